"""Trossen's ALOHA stack over DDS: the arm bridge drives one xs_sdk per arm (``--driver-config aloha``), the mock
hardware plays them, and the rig's graph runs a trial on them.

What goes on the wire is checked as an xs_sdk would see it: the topics under ``/follower_{left,right}``, the
message types by name and RIHS01 hash (``tools/interbotix_xs_msgs/README.md``), the group ``arm`` with the six
joints in the group's order, the gripper as the servo's angle in radians, and the joint states the xs_sdk
publishes (the fingers in metres beside the servo).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from interbotix_xs_msgs.msg import JointGroupCommand, JointSingleCommand
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from profile_graph import start_profile_graph
from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.arm_bridge_node import ArmBridgeNode
from robofollow_ros.nodes.mock_hardware_node import MockHardwareNode
from robofollow_ros.rig.driver_config import driver_config_file, load_driver_config
from ros_harness import RosHarness

SIDES = ("left", "right")
ARM_JOINTS = ["waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate"]
CLOSED, OPEN = 0.6197, 1.6214  # rad, the preset's (Trossen's FOLLOWER_GRIPPER_JOINT_CLOSE/OPEN)
TYPE_HASHES = {  # tools/interbotix_xs_msgs/README.md
    "interbotix_xs_msgs/msg/JointGroupCommand":
        "RIHS01_c43821d89bd439eeca1db1f2b48778277e465bde9daad1b0839077bcfbdb3e3b",
    "interbotix_xs_msgs/msg/JointSingleCommand":
        "RIHS01_ed9575e22584aa1f25c9e13a546641d38066caa37454ced810f165d66d842e4d",
}
TASK = "L0_pickup_red_cylinder"


def test_the_bridge_drives_two_xs_sdks_played_by_the_mock_and_reads_them_back():
    with RosHarness() as ros:
        ros.add(MockHardwareNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value="aloha"), Parameter("camera_hz", value=0.5)]))
        ros.add(ArmBridgeNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value="aloha"), Parameter("workspace_check", value=False),
            Parameter("watchdog_timeout_s", value=1.0), Parameter("max_gripper_step", value=1.0)]))
        probe = ros.node("xs_probe")
        got: dict[str, list] = {"joint_states": []}
        for side in SIDES:
            ns = f"/follower_{side}"
            for key, kind, topic in (("group", JointGroupCommand, "commands/joint_group"),
                                     ("single", JointSingleCommand, "commands/joint_single"),
                                     ("state", JointState, "joint_states")):
                got[f"{side}_{key}"] = []
                probe.create_subscription(kind, f"{ns}/{topic}", ros.collector(got[f"{side}_{key}"]), 10)
        probe.create_subscription(JointState, "/joint_states", ros.collector(got["joint_states"]), tp.STATE_STREAM)
        command = probe.create_publisher(JointState, "/robofollow/joint_command", tp.STATE_STREAM)

        ros.wait_for(lambda: got["joint_states"], what="/joint_states from the bridge, read from the mock xs_sdks")
        start = np.asarray(got["joint_states"][-1].position)
        target = start.copy()
        target[0] += 0.1  # left waist
        target[7 + 2] -= 0.1  # right elbow
        target[6], target[13] = 0.25, 0.75  # grippers, normalised

        def arrived() -> bool:
            return bool(got["joint_states"]) and np.allclose(got["joint_states"][-1].position, target, atol=2e-3)

        # As a policy does: the command again and again (the mock's arms lag behind it) until the bridge reads
        # the arms there.
        ros.publish_until(lambda: command.publish(JointState(name=list(JOINT_NAMES), position=target.tolist())),
                          arrived, timeout=20, what="the arms at the command, read back on /joint_states")

        # the safety filter sits before the mapping: the first move of the left waist (0.1 rad asked) was clamped
        # to the bridge's step (max_step_rad, 0.05 rad by default) around where the arm stood
        first = next(m.cmd[0] for m in got["left_group"] if abs(m.cmd[0] - start[0]) > 1e-6)
        assert first == pytest.approx(start[0] + 0.05, abs=1e-6)
        # /joint_states: the contract's names and order, normalised grippers
        assert list(got["joint_states"][-1].name) == list(JOINT_NAMES)
        for side, joints, gripper in (("left", target[0:6], 0.25), ("right", target[7:13], 0.75)):
            servo = CLOSED + gripper * (OPEN - CLOSED)

            def commanded(side: str = side, joints: np.ndarray = joints, servo: float = servo) -> bool:
                """The probe's copy of the last commands (the first, clamped ones went out within a step)."""
                groups, singles = got[f"{side}_group"], got[f"{side}_single"]
                return bool(groups and singles) and np.allclose(groups[-1].cmd, joints, atol=1e-6) \
                    and abs(singles[-1].cmd - servo) < 1e-6

            ros.wait_for(commanded, timeout=5, what=f"the {side} arm's commands at the target")
            group, single = got[f"{side}_group"][-1], got[f"{side}_single"][-1]
            assert group.name == "arm" and list(group.cmd) == pytest.approx(joints, abs=1e-6)
            assert single.name == "gripper" and single.cmd == pytest.approx(servo, abs=1e-6)
            # the mock answers as the xs_sdk does: its joint names, radians, the fingers in metres
            state = got[f"{side}_state"][-1]
            assert list(state.name) == [*ARM_JOINTS, "gripper", "left_finger", "right_finger"]
            position = np.asarray(state.position)
            assert position[:6] == pytest.approx(joints, abs=2e-3) and position[6] == pytest.approx(servo, abs=2e-3)
            fingers = load_driver_config("aloha").arms[side].fingers
            assert fingers is not None
            assert position[7] == pytest.approx(fingers.finger(position[6])) and position[8] == -position[7]
            assert 0.0440 < position[7] < 0.0580

        # the types an xs_sdk subscribes to, by name and by hash
        types = dict(probe.get_topic_names_and_types())
        for side in SIDES:
            for topic, type_name in (
                    (f"/follower_{side}/commands/joint_group", "interbotix_xs_msgs/msg/JointGroupCommand"),
                    (f"/follower_{side}/commands/joint_single", "interbotix_xs_msgs/msg/JointSingleCommand")):
                assert types[topic] == [type_name]
                (bridge,) = [i for i in probe.get_publishers_info_by_topic(topic) if i.node_name == "arm_bridge_node"]
                assert bridge.topic_type == type_name and str(bridge.topic_type_hash) == TYPE_HASHES[type_name]
            assert types[f"/follower_{side}/joint_states"] == ["sensor_msgs/msg/JointState"]


def test_the_rig_graph_runs_a_trial_on_mock_xs_sdks(tmp_path):
    """``robofollow bringup mock --driver-config aloha``: the mock profile's nodes, the bridge and the mock hardware
    on the preset (as ``--driver-config`` sets them), one trial through to its results."""
    preset = str(driver_config_file("aloha"))
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        got: dict[str, list] = {"group": [], "single": [], "trial": []}
        watcher.create_subscription(JointGroupCommand, "/follower_right/commands/joint_group",
                                    ros.collector(got["group"]), 10)
        watcher.create_subscription(JointSingleCommand, "/follower_right/commands/joint_single",
                                    ros.collector(got["single"]), 10)
        watcher.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        manager = start_profile_graph(ros, "mock", {
            "arm_bridge_node": {"driver_config": preset}, "mock_hardware_node": {"driver_config": preset},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 2, "actions_per_step": 10,
                                   "output": str(tmp_path / "run")},
            "policy_node": {"stale_s": 2.0}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=120, what="the trial on the mock xs_sdks")
        ros.wait_for(lambda: got["trial"] and json.loads(got["trial"][-1].data)["phase"] == tp.PHASE_FINISHED,
                     timeout=30, what="the finished phase")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(results) == 1 and results[0]["task"] == TASK and "policy_error" not in results[0]
    assert results[0]["policy_steps"] == 2 and results[0]["frames"] >= 2
    assert got["group"] and got["single"]
    assert all(m.name == "arm" and len(m.cmd) == 6 for m in got["group"])
    assert all(m.name == "gripper" and CLOSED - 1e-6 <= m.cmd <= OPEN + 1e-6 for m in got["single"])


def test_the_lockstep_sim_executes_one_row_per_bridge_command_on_xs_sdk_topics(tmp_path):
    """The sim plays the xs_sdks as well: each bridge command reaches it as a group and a gripper message per arm,
    and the lock-step sim executes one row for the pair (3 policy calls of 5 rows: 15 rows and the start)."""
    preset = str(driver_config_file("aloha"))
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        got: dict[str, list] = {"score": [], "single": [], "trial": []}
        watcher.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)  # awaited
        watcher.create_subscription(String, "/robofollow/score", ros.collector(got["score"]), 100)
        watcher.create_subscription(JointSingleCommand, "/follower_left/commands/joint_single",
                                    ros.collector(got["single"]), 100)
        manager = start_profile_graph(ros, "sim", {
            "sim_node": {"render": False, "driver_config": preset}, "arm_bridge_node": {"driver_config": preset},
            "policy_node": {"request_images": False},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 3, "output": str(tmp_path / "run"),
                                   "wait_for_nodes": ["sim_node", "arm_bridge_node", "policy_node",
                                                      "stage_monitor_node", "watcher"]}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=60, what="the trial in the sim")
        ros.wait_for(lambda: any(json.loads(m.data)["final"] for m in got["score"]), what="the final score")
    (final,) = [json.loads(m.data) for m in got["score"] if json.loads(m.data)["final"]]
    assert final["frames"] == 3 * 5 + 1 and final["result"]["task"] == TASK
    assert len(got["single"]) >= 15
