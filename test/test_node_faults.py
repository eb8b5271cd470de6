"""Every wait on the ROS path is bounded, and a fault is recorded as what it is (issue 23, items 3 and 4).

Over DDS with the mock profile's graph (one process here): a policy that stalls in ``predict`` fails its
trial with eval's ``PolicyTimeoutError`` within ``policy_timeout_s`` (and the next trial gets a fresh
policy, so it fails for its own stall, not as "busy"); an e-stop mid-trial ends the trial as an
``e-stop`` fault (not the policy's 0.0/0.0), pauses the run until released; an operator's stop is an
``operator-stop`` fault. Against a stand-in rig: a trial whose policy side never reports after a stop
is bounded in ``stopping``.
"""

from __future__ import annotations

import json

import numpy as np
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.exit_status import EXIT_OK, EXIT_TRIALS_FAILED
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, object_markers_msg
from robofollow_ros.nodes.trial_manager_node import TrialManagerNode
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
STALL = "robofollow_ros.policy.drills.scripted:dying"
STALL_KWARGS = json.dumps({"mode": "sleep", "sleep_s": 3600.0})


def _trials(got: dict[str, list]) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(m.data) for m in got["trial"]]


def _results(manager: TrialManagerNode) -> list[dict]:  # type: ignore[type-arg]
    return json.loads((manager.run_dir / "results.json").read_text())


def test_a_stalled_in_process_policy_fails_each_trial_within_the_policy_timeout(tmp_path):
    with RosHarness() as ros:
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"policy": STALL, "policy_kwargs": STALL_KWARGS, "policy_timeout_s": 1.5,
                            "stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 3,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]
        # two stalls of 1.5 s each, plus the graph's start-up: far below the trial's own limit (120 s)
        ros.wait_for(manager.finished.is_set, timeout=90, what="both trials to fail on the policy timeout")
        assert manager.exit_code == EXIT_TRIALS_FAILED
    results = _results(manager)
    assert [r["round"] for r in results] == [1, 2]
    for result in results:
        # the same reason as robofollow eval's, for each trial: the second trial's policy is a fresh one
        # (the first one's call is still stuck; a reused guard would answer "busy" at once)
        assert result["policy_error"] == "PolicyTimeoutError: policy predict: no answer within 1.5 s", result
        assert "fault" not in result and result["policy_steps"] == 0
        assert result["intent_score"] == 0.0 and not result["completion_ok"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "complete"


def test_a_policy_stalled_past_the_trials_time_budget_fails_it_in_stopping_at_the_policy_timeout(tmp_path):
    """The colleague's mock run: the time budget (trial_timeout_s) stopped the trial while predict hung, and
    the trial sat in ``stopping`` for good. Now the stop lets the call time out, which fails the trial."""
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        got: dict[str, list] = {"trial": []}
        watcher.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"policy": STALL, "policy_kwargs": STALL_KWARGS, "policy_timeout_s": 4.0,
                            "stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK}", "max_steps": 3, "trial_timeout_s": 1.0,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=90, what="the trial to fail on the policy timeout")
        assert manager.exit_code == EXIT_TRIALS_FAILED
        assert tp.PHASE_STOPPING in [t["phase"] for t in _trials(got)]  # the budget stopped it first
    (result,) = _results(manager)
    assert result["policy_error"] == "PolicyTimeoutError: policy predict: no answer within 4 s"
    assert "fault" not in result


def test_an_estop_mid_trial_is_an_estop_fault_that_pauses_the_run_and_a_stop_is_the_operators(tmp_path):
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "commands": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(JointState, "/robofollow/joint_command", ros.collector(got["commands"]),
                                     tp.STATE_STREAM)
        estop = operator.create_publisher(Bool, "/robofollow/estop", 10)
        stop = operator.create_client(Trigger, "/robofollow/trial/stop")
        start = operator.create_client(Trigger, "/robofollow/trial/start")
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 100000,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]

        def phase_of(round_index: int) -> list[str]:
            return [t["phase"] for t in _trials(got) if t.get("round") == round_index]

        ros.wait_for(lambda: tp.PHASE_RUNNING in phase_of(1) and len(got["commands"]) > 5, timeout=90,
                     what="round 1 running")
        estop.publish(Bool(data=True))
        ros.wait_for(lambda: tp.PHASE_DONE in phase_of(1), timeout=60, what="round 1 ended by the e-stop")
        results = _results(manager)
        assert len(results) == 1 and results[0]["fault"] == "e-stop", results
        assert "policy_error" not in results[0]  # not the policy's failure ...
        assert results[0]["intent_score"] == 0.0 and not results[0]["completion_ok"]  # ... and no result of its
        assert results[0]["policy_steps"] > 0 and "partial_result" in results[0]
        # paused while the e-stop is engaged: the trial state says so, and round 2 has not begun
        ros.wait_for(lambda: _trials(got)[-1].get("paused_by") == "e-stop", what="the run paused by the e-stop")
        assert not phase_of(2) and not manager.finished.is_set()

        estop.publish(Bool(data=False))
        ros.wait_for(lambda: tp.PHASE_RUNNING in phase_of(2), timeout=60, what="round 2 after the release")
        assert stop.wait_for_service(timeout_sec=10)
        reply = stop.call_async(Trigger.Request())
        ros.wait_for(reply.done, what="the stop's reply")
        assert reply.result().success
        ros.wait_for(lambda: tp.PHASE_DONE in phase_of(2), timeout=60, what="round 2 ended by the operator")
        results = _results(manager)
        assert results[1]["fault"] == "operator-stop" and "policy_error" not in results[1], results[1]
        assert results[1]["fault_reason"] == "stopped by the operator (/robofollow/trial/stop)"
        reply = start.call_async(Trigger.Request())  # the stop paused the run; nothing is left to run
        ros.wait_for(manager.finished.is_set, timeout=30, what="the run to end")
        assert manager.exit_code == EXIT_TRIALS_FAILED  # both trials could not be executed
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "complete" and run["completed_trials"] == 2


def _stand_in_rig(ros: RosHarness):  # type: ignore[no-untyped-def]
    """What the arm bridge and perception publish on the rig, at their own rates; nothing else answers."""
    registry = default_registry()
    task = registry.eval_task(TASK)
    layout = registry.layout_of(task)
    xy = layout.jittered_xy(task.seed(1))
    poses = {o.name: ([*xy[o.name], TABLE_TOP_Z + o.half_height], [1.0, 0.0, 0.0, 0.0]) for o in layout.objects}
    rig = ros.node("fake_rig")
    joints = rig.create_publisher(JointState, "/joint_states", 10)
    objects = rig.create_publisher(MarkerArray, "/robofollow/objects", 10)
    vector = np.full(14, 0.1)

    def tick() -> None:
        now = rig.get_clock().now().nanoseconds
        objects.publish(object_markers_msg(poses, now))
        joints.publish(joint_state_msg(vector, now))

    rig.create_timer(0.02, tick)
    return rig


def test_a_trial_whose_policy_side_never_reports_after_a_stop_is_bounded_in_stopping(tmp_path):
    with RosHarness() as ros:
        rig = _stand_in_rig(ros)
        got: dict[str, list] = {"trial": []}
        rig.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        # no policy node: nothing will ever report the trial done, after its time limit or ever
        manager = ros.add(TrialManagerNode(context=ros.context, parameter_overrides=[
            Parameter("mode", value="rig"), Parameter("auto_confirm", value=True),
            Parameter("trials", value=f"tasks={TASK}"), Parameter("output", value=str(tmp_path / "run")),
            Parameter("wait_for_nodes", value=["fake_rig"]), Parameter("trial_timeout_s", value=1.0),
            Parameter("stop_timeout_s", value=2.0)]))
        ros.wait_for(manager.finished.is_set, timeout=60, what="the stopped trial to give up")
        assert manager.exit_code == EXIT_TRIALS_FAILED
        # the finished phase reaches this test's subscription after the manager set its flag
        ros.wait_for(lambda: any(t["phase"] == tp.PHASE_FINISHED for t in _trials(got)), what="the finished phase")
        phases = [t["phase"] for t in _trials(got) if t.get("id")]
        assert tp.PHASE_STOPPING in phases and phases[-1] == tp.PHASE_FINISHED
    result = _results(manager)[0]
    assert result["fault"] == "timeout" and "policy_error" not in result
    assert result["fault_reason"] == "stopping: policy_node did not end the trial within 2 s of the stop"


def test_a_run_without_faults_still_exits_ok_and_records_no_fault(tmp_path):
    """The bounds and the safety watch change nothing for a trial that runs to its step budget."""
    with RosHarness() as ros:
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK}", "max_steps": 2, "actions_per_step": 10,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=90, what="the trial")
        assert manager.exit_code == EXIT_OK
    result = _results(manager)[0]
    assert "fault" not in result and "policy_error" not in result and result["policy_steps"] == 2
