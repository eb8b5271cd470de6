"""sim_node with the CPU renderer, playing the arm drivers: the three cameras, their camera_info and the
head depth, stamped with the state they show; each arm's driver state on the driver's topic in the
driver's joint names and gripper units; one row executed once both arms' driver commands arrived; a
reset asked for an unknown task is reported, not fatal."""

from __future__ import annotations

import json

import numpy as np
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robofollow_ros.contract import CAMERA_NAMES, camera_image_topic, camera_info_topic
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import image_array, stamp_ns
from robofollow_ros.nodes.sim_node import SimNode
from ros_harness import RosHarness

#: config/rig/arm_drivers.yaml, the map sim_node plays by default.
DRIVER = {arm: (f"/{arm}_arm_controller/joint_trajectory", f"/{arm}_arm/joint_states",
                [f"f{arm[0]}_joint{i}" for i in range(1, 8)]) for arm in ("left", "right")}
GRIPPER_OPEN = 0.04  # the URDF finger limit


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
        for arm, (_, state_topic, _) in DRIVER.items():
            got[arm] = []
            probe.create_subscription(JointState, state_topic, ros.collector(got[arm]), tp.STATE_STREAM)
        trial = probe.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        commands = {arm: probe.create_publisher(JointTrajectory, topic, tp.STATE_STREAM)
                    for arm, (topic, _, _) in DRIVER.items()}

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

        ros.wait_for(lambda: got["left"] and got["right"], what="driver joint states")
        for arm, (_, _, names) in DRIVER.items():
            state = got[arm][-1]
            assert list(state.name) == names and stamp_ns(state.header.stamp) == ready["stamp_ns"]
            assert state.position[6] == GRIPPER_OPEN  # the gripper in the driver's units: open
        left = np.asarray(got["left"][-1].position)
        target = left.copy()
        target[0] += 0.05
        count, states = len(got["head"]), len(got["right"])
        commands["left"].publish(JointTrajectory(joint_names=DRIVER["left"][2],
                                                 points=[JointTrajectoryPoint(positions=target.tolist())]))
        # one arm's command alone is half a row: nothing moves until the other arm's command arrives
        assert not ros_waits(ros, lambda: len(got["right"]) > states, 1.0)
        assert sim.world.physics_steps == 0
        commands["right"].publish(JointTrajectory(joint_names=DRIVER["right"][2],
                                                  points=[JointTrajectoryPoint(positions=list(got["right"][-1].position))]))
        ros.wait_for(lambda: len(got["head"]) > count and len(got["left"]) > 1, timeout=60,
                     what="a new picture and driver state after the row")
        assert stamp_ns(got["head"][-1].header.stamp) > ready["stamp_ns"]
        assert sim.world.physics_steps > 0
        assert abs(got["left"][-1].position[0] - target[0]) < 0.01  # the left arm went where it was told


def ros_waits(ros: RosHarness, predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """True when ``predicate`` became true within ``timeout`` s (a negative check's bounded wait)."""
    try:
        ros.wait_for(predicate, timeout=timeout)
    except TimeoutError:
        return False
    return True
