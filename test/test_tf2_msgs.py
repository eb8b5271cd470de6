"""tf2_msgs/TFMessage, built into the venv by `make setup`, travels over DDS with upstream's type hash."""

from __future__ import annotations

from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from ros_harness import RosHarness

#: RIHS01 hash of upstream tf2_msgs/msg/TFMessage: real tf2 listeners match on it.
UPSTREAM_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"


def test_tfmessage_round_trip_and_type_hash():
    with RosHarness() as ros:
        node = ros.node("tf_probe")
        got: list[TFMessage] = []
        node.create_subscription(TFMessage, "/tf_probe", ros.collector(got), 10)
        pub = node.create_publisher(TFMessage, "/tf_probe", 10)
        tf = TransformStamped()
        tf.header.frame_id, tf.child_frame_id = "world", "left_tcp"
        tf.transform.translation.x = 0.25
        tf.transform.rotation.w = 1.0

        def sent() -> bool:
            pub.publish(TFMessage(transforms=[tf]))
            return bool(got)

        ros.wait_for(sent, what="TFMessage")
        assert got[0].transforms[0].child_frame_id == "left_tcp"
        assert got[0].transforms[0].transform.translation.x == 0.25
        info = node.get_publishers_info_by_topic("/tf_probe")
        assert str(info[0].topic_type_hash) == UPSTREAM_HASH
