"""The recorder's peek at a CDR message's first header agrees with full deserialization: messages written
by the independent ``rosbags`` serializer in both byte orders and by rclpy, with frame names of every length
modulo 4 (string padding and alignment), an empty TF and an empty marker array."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from robofollow_ros.monitoring import cdr_peek
from robofollow_ros.monitoring.rosmsg import typestore

FRAMES = ["w", "ab", "abc", "left_base", "object/large_red_cylinder"]


@pytest.mark.parametrize("little_endian", [True, False])
def test_peek_reads_what_rosbags_wrote(little_endian: bool) -> None:
    ts = typestore()
    Time, Header = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    Vector3, Quaternion = ts.types["geometry_msgs/msg/Vector3"], ts.types["geometry_msgs/msg/Quaternion"]
    Transform, Stamped = ts.types["geometry_msgs/msg/Transform"], ts.types["geometry_msgs/msg/TransformStamped"]
    for i, (parent, child) in enumerate(zip(FRAMES, reversed(FRAMES), strict=True)):
        stamp = Time(sec=1_700_000_000 + i, nanosec=123_456_789 - i)
        tf = ts.types["tf2_msgs/msg/TFMessage"](transforms=[Stamped(
            header=Header(stamp=stamp, frame_id=parent), child_frame_id=child,
            transform=Transform(translation=Vector3(x=1.0, y=2.0, z=3.0), rotation=Quaternion(x=0, y=0, z=0, w=1)))])
        data = bytes(ts.serialize_cdr(tf, "tf2_msgs/msg/TFMessage", little_endian=little_endian))
        ns = stamp.sec * 1_000_000_000 + stamp.nanosec
        assert cdr_peek.first_transform(data) == (ns, parent, child)
        joints = ts.types["sensor_msgs/msg/JointState"](header=Header(stamp=stamp, frame_id=parent), name=["a"],
                                                        position=np.array([0.5]), velocity=np.zeros(0),
                                                        effort=np.zeros(0))
        data = bytes(ts.serialize_cdr(joints, "sensor_msgs/msg/JointState", little_endian=little_endian))
        assert cdr_peek.header_stamp(data) == ns
    empty_tf = bytes(ts.serialize_cdr(ts.types["tf2_msgs/msg/TFMessage"](transforms=[]), "tf2_msgs/msg/TFMessage",
                                      little_endian=little_endian))
    assert cdr_peek.first_transform(empty_tf) is None
    from robofollow_ros.monitoring.scene import object_markers

    full = object_markers({"red": ((0.1, 0.2, 0.8), (1.0, 0.0, 0.0, 0.0))}, 5_000_000_123)
    assert cdr_peek.first_marker_stamp(bytes(ts.serialize_cdr(full, "visualization_msgs/msg/MarkerArray",
                                                               little_endian=little_endian))) == 5_000_000_123
    markers = ts.types["visualization_msgs/msg/MarkerArray"](markers=[])
    assert cdr_peek.first_marker_stamp(bytes(ts.serialize_cdr(markers, "visualization_msgs/msg/MarkerArray",
                                                              little_endian=little_endian))) is None


def test_peek_reads_what_rclpy_wrote() -> None:
    msg = JointState(name=["x"], position=[1.0])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 42, 7
    assert cdr_peek.header_stamp(serialize_message(msg)) == 42_000_000_007
    tf = TFMessage()
    from geometry_msgs.msg import TransformStamped

    t = TransformStamped(child_frame_id="object/ball")
    t.header.frame_id, t.header.stamp.sec = "world", 9
    tf.transforms = [t, TransformStamped(child_frame_id="other")]
    assert cdr_peek.first_transform(serialize_message(tf)) == (9_000_000_000, "world", "object/ball")
    with pytest.raises(ValueError, match="CDR"):
        cdr_peek.header_stamp(b"\x00")
