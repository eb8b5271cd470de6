"""Message conversions are exact (float64 in, the same float64 out) and reject what breaks the contract."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes.conversions import (
    MessageError,
    image_array,
    image_msg,
    joint_state_msg,
    joint_vector,
    object_markers_msg,
    objects_from_markers,
    objects_from_transforms,
    stamp_ns,
    time_msg,
    transform_msg,
)


def test_stamps_round_trip_in_nanoseconds():
    for ns in (0, 1, 999_999_999, 1_000_000_000, 123_456_789_012_345):
        assert stamp_ns(time_msg(ns)) == ns


def test_joint_vector_is_exact_and_by_name():
    vector = np.random.default_rng(1).normal(size=14)
    assert np.array_equal(joint_vector(joint_state_msg(vector, 5)), vector)
    shuffled = JointState(name=list(reversed(JOINT_NAMES)), position=list(reversed(vector.tolist())))
    assert np.array_equal(joint_vector(shuffled), vector)


@pytest.mark.parametrize(("msg", "words"), [
    (JointState(name=list(JOINT_NAMES[:13]), position=[0.0] * 13), ["missing joints", "right_gripper"]),
    (JointState(name=list(JOINT_NAMES), position=[0.0] * 13), ["14 names but 13 positions"]),
    (JointState(position=[0.0] * 7), ["7 unnamed positions", "expected 14"]),
])
def test_bad_joint_state_is_named(msg, words):
    with pytest.raises(MessageError) as info:
        joint_vector(msg)
    for word in words:
        assert word in str(info.value)


def test_images_round_trip_and_bad_ones_are_named():
    rgb = np.random.default_rng(2).integers(0, 255, (240, 320, 3), dtype=np.uint8)
    msg = image_msg(rgb, 7, "head_camera_optical")
    assert (msg.encoding, msg.step, msg.header.frame_id) == ("rgb8", 960, "head_camera_optical")
    assert np.array_equal(image_array(msg), rgb)
    depth = image_msg(np.ones((4, 5), dtype=np.float32), 7, "x")
    assert depth.encoding == "32FC1" and depth.step == 20
    with pytest.raises(MessageError, match="unsupported pixels int16"):
        image_msg(np.zeros((4, 5), dtype=np.int16), 0, "x")
    with pytest.raises(MessageError, match="encoding '32FC1'"):
        image_array(depth)


def test_object_poses_round_trip_through_markers_and_tf():
    poses = {"cube": ([0.1, -0.2, 0.76012345678], [0.9, 0.1, 0.2, 0.3]), "bowl": ([0.0, 0.0, 0.76], [1, 0, 0, 0])}
    stamp, positions, quats = objects_from_markers(object_markers_msg(poses, 42))
    assert stamp == 42 and positions["cube"] == poses["cube"][0] and quats["cube"] == poses["cube"][1]
    tfs = [transform_msg("world", f"object/{n}", p, q, 42) for n, (p, q) in poses.items()]
    tfs.append(transform_msg("world", "left_tcp", [0, 0, 1], [1, 0, 0, 0], 42))  # not an object
    by_stamp = objects_from_transforms(tfs)
    assert set(by_stamp[42]) == {"cube", "bowl"} and by_stamp[42]["cube"] == (poses["cube"][0], poses["cube"][1])


def test_markers_in_another_frame_are_refused():
    msg = object_markers_msg({"cube": ([0, 0, 0], [1, 0, 0, 0])}, 1)
    msg.markers[0].header.frame_id = "head_camera_optical"
    with pytest.raises(MessageError, match="'cube' is in frame 'head_camera_optical'"):
        objects_from_markers(msg)
    msg.markers[0].action = Marker.DELETE  # deleted markers are ignored, whatever their frame
    assert objects_from_markers(msg)[1] == {}
