"""sim_node with the CPU renderer: the three cameras, their camera_info and the head depth, stamped with
the state they show; a reset asked for an unknown task is reported, not fatal."""

from __future__ import annotations

import json

import numpy as np
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String

from robofollow_ros.contract import CAMERA_NAMES, camera_image_topic, camera_info_topic
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import image_array, joint_state_msg, stamp_ns
from robofollow_ros.nodes.sim_node import SimNode
from ros_harness import RosHarness


def test_cameras_depth_and_status_after_reset_and_a_command():
    with RosHarness() as ros:
        sim = ros.add(SimNode(context=ros.context, parameter_overrides=[
            Parameter("depth", value=True), Parameter("camera_hz", value=1000.0)]))
        probe = ros.node("probe")
        got: dict[str, list] = {"status": [], "depth": [], "joints": []}
        for camera in CAMERA_NAMES:
            got[camera], got[f"{camera}_info"] = [], []
            probe.create_subscription(Image, camera_image_topic(camera), ros.collector(got[camera]), 10)
            probe.create_subscription(CameraInfo, camera_info_topic(camera), ros.collector(got[f"{camera}_info"]), 10)
        probe.create_subscription(Image, "/cameras/head/depth", ros.collector(got["depth"]), 10)
        probe.create_subscription(String, tp.TOPIC_SIM_STATUS, ros.collector(got["status"]), tp.LATCHED)
        probe.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), tp.STATE_STREAM)
        trial = probe.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        command = probe.create_publisher(JointState, "/robofollow/joint_command", tp.STATE_STREAM)

        trial.publish(String(data=tp.encode({"id": "bad", "phase": "resetting", "task": "no_such_task", "seed": 1})))
        ros.wait_for(lambda: got["status"], timeout=60, what="sim status")
        assert json.loads(got["status"][-1].data)["state"] == "error"
        assert "no_such_task" in json.loads(got["status"][-1].data)["error"]

        trial.publish(String(data=tp.encode({"id": "t1", "phase": "resetting", "task": "L0_pickup_red_cylinder",
                                             "seed": 1097})))
        ros.wait_for(lambda: all(got[c] and got[f"{c}_info"] for c in CAMERA_NAMES) and got["depth"]
                     and json.loads(got["status"][-1].data)["state"] == "ready",
                     timeout=120, what="camera images and the ready status after reset")
        ready = json.loads(got["status"][-1].data)
        assert ready["state"] == "ready" and ready["trial_id"] == "t1"
        for camera in CAMERA_NAMES:
            image, info = got[camera][-1], got[f"{camera}_info"][-1]
            assert (image.width, image.height, image.encoding) == (320, 240, "rgb8")
            assert stamp_ns(image.header.stamp) == ready["stamp_ns"]
            assert info.header.frame_id == image.header.frame_id == f"{camera}_camera_optical"
            assert info.k[0] > 0 and info.width == 320
            assert image_array(image).std() > 1.0  # a real picture, not a blank buffer
        depth = got["depth"][-1]
        assert depth.encoding == "32FC1"
        metres = np.frombuffer(bytes(depth.data), dtype=np.float32)
        assert 0.3 < float(np.median(metres)) < 3.0  # the table seen from the head camera

        ros.wait_for(lambda: got["joints"], what="joint states")
        vector = np.asarray(got["joints"][-1].position)
        vector[0] += 0.05
        count = len(got["head"])
        command.publish(joint_state_msg(vector, 0))
        ros.wait_for(lambda: len(got["head"]) > count, timeout=60, what="a new picture after the command")
        assert stamp_ns(got["head"][-1].header.stamp) > ready["stamp_ns"]
        assert sim.world.physics_steps > 0
