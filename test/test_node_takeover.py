"""Takeover over DDS, in the mock profile's whole graph (the Foxglove node recording the trial).

Mid-trial the operator hands the arms to a teleoperation source (``/robofollow/teleop/take_over``): a
leader arm asks for left_joint1 0.15 rad (three steps) away, and the first command the bridge sends towards it lies
within one step (``max_step_rad``) of the measured position — no jump — and the arm gets there step by
step; the policy's commands are refused meanwhile. After ``hand_back`` the trial ends as usual; its
results entry says ``assisted`` with the frames teleoperation drove, the trial's bag holds
``/robofollow/intervention``, and ``export-lerobot`` writes an ``intervention`` feature, true on some
frames and false on others, which the independent LeRobot v3 reader (test/lerobot_v3_reader.py) accepts.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pyarrow.parquet as pq
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from profile_graph import start_profile_graph
from robofollow_ros.contract import (
    JOINT_NAMES,
    SERVICE_TELEOP_HAND_BACK,
    SERVICE_TELEOP_TAKE_OVER,
    TOPIC_TELEOP_COMMAND,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, joint_vector
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import load_driver_config
from ros_harness import RosHarness
from test_learning_pipeline import read_independently

TASK = "L0_pickup_red_cylinder"
STEP = 0.05  # the mock profile's max_step_rad
JOINT = JOINT_NAMES.index("left_joint1")


def test_teleop_takes_over_without_a_jump_and_the_trial_is_recorded_as_assisted(tmp_path):
    run = tmp_path / "run"
    left = load_driver_config(share_path("config", "rig", "arm_drivers.yaml")).arms["left"]
    assert left.kind == "joint_trajectory"  # the driver commands read below
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "bridge": [], "joints": [], "policy": [], "driver": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(String, "/robofollow/arm_bridge/status", ros.collector(got["bridge"]), 10)
        operator.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), tp.STATE_STREAM)
        operator.create_subscription(JointState, "/robofollow/joint_command", ros.collector(got["policy"]),
                                     tp.STATE_STREAM)
        operator.create_subscription(JointTrajectory, left.command_topic, ros.collector(got["driver"]),
                                     tp.STATE_STREAM)
        teleop = operator.create_publisher(JointState, TOPIC_TELEOP_COMMAND, tp.STATE_STREAM)
        take_over = operator.create_client(Trigger, SERVICE_TELEOP_TAKE_OVER)
        hand_back = operator.create_client(Trigger, SERVICE_TELEOP_HAND_BACK)
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0, "policy_kwargs": '{"chunk_size": 50}'},  # 50 Hz: 1 s a call
            "foxglove_node": {"serve": False},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 4, "actions_per_step": 50,
                                   "output": str(run)}}, leave_out=())["trial_manager_node"]

        def running() -> bool:
            return any(json.loads(m.data)["phase"] == tp.PHASE_RUNNING for m in got["trial"])

        def left_joint1() -> float:
            return float(joint_vector(got["joints"][-1])[JOINT])

        ros.wait_for(lambda: running() and len(got["policy"]) > 10, timeout=90, what="the trial running")
        assert ros.call_trigger(take_over, "take_over").success
        measured = joint_vector(got["joints"][-1])
        before = len(got["driver"])
        target = measured.copy()
        target[JOINT] += 0.15  # three steps away
        ros.publish_until(lambda: teleop.publish(joint_state_msg(target, operator.get_clock().now().nanoseconds)),
                          lambda: left_joint1() > measured[JOINT] + 0.12, timeout=60, what="the leader arm's pose")
        sent = [float(m.points[0].positions[0]) for m in got["driver"][before:]]
        first = next(v for v in sent if v > measured[JOINT] + 1e-3)
        assert first <= measured[JOINT] + STEP + 1e-6, (first, measured[JOINT])  # stepped, not jumped
        assert max(abs(b - a) for a, b in itertools.pairwise(sent)) <= 2 * STEP + 1e-6
        assert any("policy command refused: teleoperation holds" in str(json.loads(m.data)["reasons"])
                   for m in got["bridge"])
        assert ros.call_trigger(hand_back, "hand_back").success
        assert not ros.call_trigger(hand_back, "a second hand_back").success
        ros.wait_for(manager.finished.is_set, timeout=90, what="the trial's end")

    (entry,) = json.loads((run / "results.json").read_text())
    # the leader's 0.12 rad took at least three measured steps of at most 0.05 rad with teleoperation on, each a
    # /joint_states frame; the policy drove the frames before the take-over and after the hand-back
    assert entry["assisted"] is True and 3 <= entry["intervened_frames"] < entry["frames"], entry
    assert "fault" not in entry
    (bag,) = sorted((run / "mcap").glob("*.mcap"))
    out = tmp_path / "dataset"
    export = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "export-lerobot", str(bag), "--output",
                             str(out), "--fps", "5", "--vcodec", "h264"], capture_output=True, text=True, timeout=120)
    assert export.returncode == 0, export.stderr
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["features"]["intervention"] == {"dtype": "bool", "shape": [1], "names": None}
    report = read_independently(out)  # the independent LeRobot v3 reader (its own venv) accepts the feature
    assert report["errors"] == [] and "intervention" in report["features"], report
    tags = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").column("intervention").to_pylist()
    assert any(tags) and not all(tags), tags
