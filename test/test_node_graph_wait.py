"""The trial manager's wait for a connected graph is bounded and says what it waits for: a node that
never comes ends the run with one line naming it (instead of a silent graph), and a profile that
awaits one of the package's nodes without running it is refused before anything starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from rclpy.parameter import Parameter

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_INTERNAL
from robofollow_ros.nodes.trial_manager_node import TrialManagerNode
from robofollow_ros.paths import package_share
from ros_harness import RosHarness
from said import error_lines


def test_a_node_that_never_comes_ends_the_run_naming_it(tmp_path: Path) -> None:
    with RosHarness() as ros:
        manager = ros.add(TrialManagerNode(context=ros.context, parameter_overrides=[
            Parameter("mode", value="rig"), Parameter("trials", value="tasks=L0_pickup_red_cylinder"),
            Parameter("output", value=str(tmp_path / "run")), Parameter("check_policy", value=False),
            Parameter("wait_for_nodes", value=["vendor_arm_driver"]), Parameter("graph_timeout_s", value=2.0)]))
        ros.wait_for(manager.finished.is_set, timeout=60, what="the trial manager to give up")
        assert manager.exit_code == EXIT_INTERNAL
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] != "complete"
    assert "vendor_arm_driver" in json.dumps(run) and "graph is incomplete after 2 s" in json.dumps(run)


def test_a_profile_awaiting_a_node_it_does_not_run_is_refused(tmp_path: Path) -> None:
    profile = yaml.safe_load((package_share() / "config" / "profiles" / "sim.yaml").read_text())
    profile["nodes"] = [n for n in profile["nodes"] if n["executable"] != "robot_state_node"]
    path = tmp_path / "no_robot_state.yaml"
    path.write_text(yaml.safe_dump(profile))
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "bringup", "sim", "--profile", str(path),
                           "--output", str(tmp_path / "run"), "--foxglove-port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "'robot_state_node' is not in this profile" in lines[0] and "wait_for_nodes" in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_wait_for_the_simulators_reset_is_told_while_it_lasts(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A sim reset can take minutes (the first one with cameras builds the renderer): the trial manager says
    what it waits for, again every SIM_RESET_TELL_PERIOD_S, instead of a silent graph. No sim_node runs here."""
    from rcl_interfaces.msg import Log
    from rclpy.node import Node
    from std_msgs.msg import String

    from robofollow_ros.contract import TOPIC_TRIAL
    from robofollow_ros.nodes import trial_manager_node
    from robofollow_ros.nodes import trial_protocol as tp

    monkeypatch.setattr(trial_manager_node, "SIM_RESET_TELL_PERIOD_S", 1.0)
    heard: list[str] = []
    with RosHarness() as ros:
        listener = ros.add(Node("rosout_listener", context=ros.context))
        listener.create_subscription(Log, "/rosout", lambda m: heard.append(str(m.msg)), 100)
        listener.create_subscription(String, TOPIC_TRIAL, lambda m: None, tp.LATCHED)  # what the graph wait needs
        ros.add(TrialManagerNode(context=ros.context, parameter_overrides=[
            Parameter("trials", value="tasks=L0_pickup_red_cylinder"), Parameter("output", value=str(tmp_path / "r")),
            Parameter("check_policy", value=False), Parameter("wait_for_nodes", value=["rosout_listener"])]))
        told = "trial L0_pickup_red_cylinder_r1_s1097: waiting for sim_node's reset, 2 s so far"
        ros.wait_for(lambda: any(line.startswith(told) for line in heard), timeout=30,
                     what="the second line about the reset under way")
    assert [line for line in heard if "waiting for sim_node's reset, 1 s so far" in line], heard


def test_the_trial_under_way_is_told_while_it_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A real-time trial runs on the wall clock, a minute or more, and nothing else is said until it ends: the
    trial manager says it runs, with the live score, every TRIAL_TELL_PERIOD_S (issue 35). The test plays the
    simulator's reset and the stage monitor's first frame, then holds the trial (no policy ends it)."""
    from rcl_interfaces.msg import Log
    from rclpy.node import Node
    from std_msgs.msg import String

    from robofollow_ros.contract import TOPIC_SCORE, TOPIC_TRIAL
    from robofollow_ros.nodes import trial_manager_node
    from robofollow_ros.nodes import trial_protocol as tp

    monkeypatch.setattr(trial_manager_node, "TRIAL_TELL_PERIOD_S", 1.0)
    heard: list[str] = []
    phases: list[dict] = []  # type: ignore[type-arg]
    with RosHarness() as ros:
        listener = ros.add(Node("rosout_listener", context=ros.context))
        listener.create_subscription(Log, "/rosout", lambda m: heard.append(str(m.msg)), 100)
        listener.create_subscription(String, TOPIC_TRIAL, lambda m: phases.append(json.loads(m.data)), tp.LATCHED)
        sim = listener.create_publisher(String, tp.TOPIC_SIM_STATUS, tp.LATCHED)
        score = listener.create_publisher(String, TOPIC_SCORE, tp.LATCHED)
        ros.add(TrialManagerNode(context=ros.context, parameter_overrides=[
            Parameter("trials", value="tasks=L0_pickup_red_cylinder"), Parameter("output", value=str(tmp_path / "r")),
            Parameter("check_policy", value=False), Parameter("wait_for_nodes", value=["rosout_listener"])]))
        trial = "L0_pickup_red_cylinder_r1_s1097"
        ros.wait_for(lambda: any(p.get("phase") == tp.PHASE_RESETTING for p in phases), timeout=30, what="the reset")
        sim.publish(String(data=json.dumps({"trial_id": trial, "state": "ready", "stamp_ns": 1})))
        ros.wait_for(lambda: any(p.get("phase") in (tp.PHASE_STARTING, tp.PHASE_RUNNING) for p in phases),
                     timeout=30, what="the start")
        score.publish(String(data=json.dumps({"trial_id": trial, "final": False, "frames": 3, "intent": 0.5,
                                              "exec": 0.25})))  # the live score (and the start, if it waits)
        told = re.compile(rf"trial {trial}: running, \d+ s so far \(3 frames scored, IS 0\.50 ES 0\.25\)")
        ros.wait_for(lambda: any(told.fullmatch(line) for line in heard), timeout=30,
                     what="the line about the trial under way")
        assert phases[-1].get("phase") == tp.PHASE_RUNNING  # said while it runs, not after
        assert any(line.startswith(f"trial {trial}: running, 1 s so far") for line in heard), heard  # at once
