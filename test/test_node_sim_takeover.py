"""Takeover in the sim profile's lock-step graph (real SAPIEN, physics only).

In lock-step the sim moves only when a command row reaches it, and policy_node sends its next row only once
the state after its last one came back. Mid-trial the operator takes over: the policy's rows are refused, and
the leader arm's commands (0.15 rad away on left_joint1, three of the profile's ``teleop_max_step_rad``
steps) drive the sim, each one clamped to one step of the measured position — no jump — so the arm gets
there step by step, every such state tagged ``/robofollow/intervention`` true. After ``hand_back`` the trial
goes on (the bridge holds the arms where teleoperation left them, a row that answers the policy's refused
one) to its step budget without a timeout; its results entry says ``assisted``.
"""

from __future__ import annotations

import itertools
import json

from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from profile_graph import start_profile_graph
from robofollow_ros.bringup import load_profile
from robofollow_ros.contract import (
    JOINT_NAMES,
    SERVICE_TELEOP_HAND_BACK,
    SERVICE_TELEOP_TAKE_OVER,
    TOPIC_INTERVENTION,
    TOPIC_TELEOP_COMMAND,
)
from robofollow_ros.exit_status import EXIT_OK
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, joint_vector, stamp_ns
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import load_driver_config
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
JOINT = JOINT_NAMES.index("left_joint1")
STEP = float(load_profile("sim").node("arm_bridge_node").parameters["teleop_max_step_rad"])


def test_teleop_takes_over_in_lock_step_without_a_jump_and_the_trial_is_assisted(tmp_path):
    left = load_driver_config(share_path("config", "rig", "arm_drivers.yaml")).arms["left"]
    assert left.kind == "joint_trajectory" and STEP < 0.1  # the driver commands read below; a real clamp
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "joints": [], "tags": [], "policy": [], "driver": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), tp.STATE_STREAM)
        operator.create_subscription(Bool, TOPIC_INTERVENTION, ros.collector(got["tags"]), tp.STATE_STREAM)
        operator.create_subscription(JointState, "/robofollow/joint_command", ros.collector(got["policy"]),
                                     tp.STATE_STREAM)
        operator.create_subscription(JointTrajectory, left.command_topic, ros.collector(got["driver"]),
                                     tp.STATE_STREAM)
        teleop = operator.create_publisher(JointState, TOPIC_TELEOP_COMMAND, tp.STATE_STREAM)
        take_over = operator.create_client(Trigger, SERVICE_TELEOP_TAKE_OVER)
        hand_back = operator.create_client(Trigger, SERVICE_TELEOP_HAND_BACK)
        manager = start_profile_graph(ros, "sim", {
            "sim_node": {"render": False},
            "policy_node": {"request_images": False, "state_timeout_s": 20.0, "policy_kwargs": "{\"chunk_size\": 40}"},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 3, "actions_per_step": 40,
                                   "output": str(tmp_path / "run"),
                                   "wait_for_nodes": ["sim_node", "arm_bridge_node", "policy_node",
                                                      "stage_monitor_node", "operator"]}})["trial_manager_node"]

        def running() -> bool:
            return any(json.loads(m.data)["phase"] == tp.PHASE_RUNNING for m in got["trial"])

        ros.wait_for(lambda: running() and len(got["policy"]) >= 3, timeout=120, what="the trial running")
        assert ros.call_trigger(take_over, "take_over").success
        measured = joint_vector(got["joints"][-1])  # the hold policy's rows keep the arm here
        before, states_before = len(got["driver"]), len(got["joints"])
        target = measured.copy()
        target[JOINT] += 0.15  # three steps away

        def left_joint1() -> float:
            return float(joint_vector(got["joints"][-1])[JOINT])

        ros.publish_until(lambda: teleop.publish(joint_state_msg(target, operator.get_clock().now().nanoseconds)),
                          lambda: left_joint1() > measured[JOINT] + 0.14, timeout=60, what="the leader arm's pose")
        sent = [float(m.points[0].positions[0]) for m in got["driver"][before:]]
        first = next(v for v in sent if v > measured[JOINT] + 1e-3)
        assert first <= measured[JOINT] + STEP + 1e-6, (first, measured[JOINT])  # stepped, not jumped
        # each one within a step of where the arm was measured then (which trails the last command a little)
        assert max(abs(b - a) for a, b in itertools.pairwise(sent)) <= 1.5 * STEP
        assert len([v for v in sent if v > measured[JOINT] + 1e-3]) >= 3  # step by step: 0.15 rad in >= 3 rows
        assert len(got["joints"]) > states_before + 2  # the sim stepped for each teleop command
        ros.wait_for(lambda: len(got["tags"]) >= len(got["joints"]), what="every state's tag")
        assert any(t.data for t in got["tags"][states_before:]), "no teleop-driven state tagged"

        def answered() -> bool:  # every teleop command executed, and the policy's newest row sent on the newest state
            return len(got["joints"]) - states_before >= len(got["driver"]) - before and \
                stamp_ns(got["policy"][-1].header.stamp) == stamp_ns(got["joints"][-1].header.stamp)

        ros.wait_for(answered, timeout=30, what="the graph at rest: the policy's row refused, the sim waiting")
        assert manager.phase == tp.PHASE_RUNNING  # rows of its budget left for the policy after the hand-back
        assert ros.call_trigger(hand_back, "hand_back").success
        handed_back = len(got["joints"])
        ros.wait_for(manager.finished.is_set, timeout=120, what="the trial's end after hand_back")
        assert len(got["joints"]) > handed_back + 5  # the policy's rows moved the sim again
        assert manager.exit_code == EXIT_OK
        assert not got["tags"][-1].data  # the policy's again at the end

    (entry,) = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "fault" not in entry and "policy_error" not in entry, entry
    assert entry["assisted"] is True and entry["intervened_frames"] >= 3, entry.get("intervened_frames")
    assert entry["policy_steps"] == 3
