"""robot_state_node over DDS: the URDF on /robot_description (latched), every fixed joint and optical frame on
/tf_static, every moving link on /tf for each measured joint state, stamped with it — and the chain of
those transforms puts each link where the kinematics (checked against SAPIEN) puts it."""

from __future__ import annotations

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from robofollow_ros.contract import CAMERA_OPTICAL_FRAMES, WORLD_FRAME
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, stamp_ns
from robofollow_ros.nodes.robot_state_node import DESCRIPTION_QOS, RobotStateNode
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.transforms import quat_to_matrix
from ros_harness import RosHarness


def _chain(transforms: dict[str, tuple[str, np.ndarray, np.ndarray]], frame: str) -> tuple[np.ndarray, np.ndarray]:
    """World pose of ``frame`` by composing parent → child transforms, as any TF listener does."""
    rotation, position = np.eye(3), np.zeros(3)
    while frame != WORLD_FRAME:
        parent, r, p = transforms[frame]
        rotation, position = r @ rotation, r @ position + p
        frame = parent
    return rotation, position


def _as_dict(messages: list[TFMessage]) -> dict[str, tuple[str, np.ndarray, np.ndarray]]:
    out = {}
    for msg in messages:
        for t in msg.transforms:
            q = t.transform.rotation
            tr = t.transform.translation
            out[t.child_frame_id] = (t.header.frame_id, quat_to_matrix(np.array([q.w, q.x, q.y, q.z])),
                                     np.array([tr.x, tr.y, tr.z]))
    return out


def test_description_static_and_link_transforms_follow_the_joint_states():
    kin = RigKinematics()
    with RosHarness() as ros:
        probe = ros.node("probe")
        # a late joiner (as RViz or Foxglove) still gets the description and the static frames
        ros.add(RobotStateNode(context=ros.context))
        got: dict[str, list] = {"description": [], "static": [], "tf": []}
        probe.create_subscription(String, "/robot_description", ros.collector(got["description"]), DESCRIPTION_QOS)
        probe.create_subscription(TFMessage, "/tf_static", ros.collector(got["static"]), DESCRIPTION_QOS)
        probe.create_subscription(TFMessage, "/tf", ros.collector(got["tf"]), tp.STATE_STREAM)
        joints = probe.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
        ros.wait_for(lambda: got["description"] and got["static"], what="the latched description and static TF")
        assert got["description"][0].data == kin.rig.urdf_path.read_text()
        static = _as_dict(got["static"])
        assert {"left_base", "right_tcp", "head_camera"} <= set(static)
        assert set(CAMERA_OPTICAL_FRAMES.values()) <= set(static)

        vector = kin.home_vector()
        vector[:6] += [0.4, -0.3, 0.5, 0.2, -0.6, 0.7]
        vector[6] = 0.25  # the left gripper a quarter open
        ros.publish_until(lambda: joints.publish(joint_state_msg(vector, 123_456_789)), lambda: bool(got["tf"]),
                          what="link transforms")
        moving = got["tf"][-1]
        assert {stamp_ns(t.header.stamp) for t in moving.transforms} == {123_456_789}
        frames = {**static, **_as_dict([moving])}
        for link in ("left_tcp", "left_wrist_camera", "left_finger_a", "right_link6", "head_camera"):
            rotation, position = _chain(frames, link)
            expected = kin.link_pose(vector, link)
            np.testing.assert_allclose(position, expected.position, atol=1e-9)
            np.testing.assert_allclose(rotation, expected.rotation, atol=1e-9)
        # the optical frame looks along +z of ROS's convention: the head camera's +z points at the table
        rotation, _ = _chain(frames, CAMERA_OPTICAL_FRAMES["head"])
        assert rotation[2, 2] < -0.5


def test_headless_recordings_name_and_place_the_frames_as_the_graph_does():
    """An ``eval --record`` MCAP (monitoring.robot) and the graph (robot_state_node) carry the same static
    frames and the same link transforms, so a picture's optical frame id means one pose in either."""
    from robofollow_ros.monitoring.robot import RobotModel

    def poses(transforms) -> dict[tuple[str, str], np.ndarray]:  # type: ignore[no-untyped-def]
        out = {}
        for t in transforms:
            q, p = t.transform.rotation, t.transform.translation
            out[(t.header.frame_id, t.child_frame_id)] = np.concatenate(
                [quat_to_matrix(np.array([q.w, q.x, q.y, q.z])).ravel(), [p.x, p.y, p.z]])
        return out

    kin = RigKinematics()
    vector = kin.home_vector()
    vector[7:13] += [-0.2, 0.3, -0.4, 0.1, 0.5, -0.6]
    vector[13] = 0.6
    headless = RobotModel()
    with RosHarness() as ros:
        node = ros.add(RobotStateNode(context=ros.context))
        graph_static = poses(node._static_transforms())
        probe = ros.node("probe")
        got: list[TFMessage] = []
        probe.create_subscription(TFMessage, "/tf", ros.collector(got), tp.STATE_STREAM)
        joints = probe.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
        ros.publish_until(lambda: joints.publish(joint_state_msg(vector, 5)), lambda: bool(got), what="link transforms")
        graph_links = poses(got[-1].transforms)
    for graph, recorded in ((graph_static, poses(headless.static_transforms())),
                            (graph_links, poses(headless.link_transforms(vector, 5)))):
        assert set(graph) == set(recorded)
        for pair, pose in graph.items():
            np.testing.assert_allclose(recorded[pair], pose, atol=1e-9, err_msg=str(pair))


def test_a_camera_on_a_link_of_another_name_gets_its_camera_frame_first():
    from robofollow_ros.robot.cameras import optical_mounts

    links = {"head": "head_camera", "left_wrist": "left_link6", "right_wrist": "right_wrist_camera"}
    pairs = [(parent, child) for parent, child, _, _ in optical_mounts(links)]
    assert ("left_link6", "left_wrist_camera") in pairs and ("left_wrist_camera", "left_wrist_camera_optical") in pairs
    assert ("head_camera", "head_camera_optical") in pairs and len(pairs) == 4
