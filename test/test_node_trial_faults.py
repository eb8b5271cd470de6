"""The ROS-free rules under the trial manager's fault handling (``nodes/trial_faults.py``) and the
supervisor's one write into a run directory (``results.close_abandoned_run``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.results import RunWriter, close_abandoned_run
from robofollow_ros.nodes.trial_faults import (
    FAULT_ESTOP,
    FAULT_TIMEOUT,
    RUNNING_ALLOWANCE_S,
    STOPPING_ALLOWANCE_S,
    Fault,
    PhaseBounds,
    SafetyWatch,
    could_not_execute,
    fault_result,
    hold_kind,
)

BOUNDS = PhaseBounds(reset_s=300.0, confirm_s=0.0, start_s=60.0, running_s=4500.0, stop_s=360.0, score_s=60.0)


@pytest.mark.parametrize(("phase", "limit", "words"), [
    ("resetting", 300.0, "resetting: the sim did not reset within 300 s"),
    ("starting", 60.0, "starting: the stage monitor did not score the start state within 60 s"),
    ("running", 4500.0, "running: policy_node did not end the trial within 4500 s"),
    ("stopping", 360.0, "stopping: policy_node did not end the trial within 360 s of the stop"),
    ("scoring", 60.0, "scoring: no final score within 60 s"),
])
def test_every_phase_of_a_trial_is_bounded(phase, limit, words):
    assert BOUNDS.overrun(phase, limit, rig_mode=False) is None  # at the bound: still waiting
    assert BOUNDS.overrun(phase, limit + 0.1, rig_mode=False) == Fault(FAULT_TIMEOUT, words)


def test_waits_for_a_person_are_bounded_only_when_asked():
    assert BOUNDS.overrun("awaiting_confirm", 1e9, rig_mode=True) is None  # confirm_s 0: the operator's time
    assert BOUNDS.overrun("resetting", 1e9, rig_mode=True) is None  # rig: the operator resets, not the sim
    bounded = PhaseBounds.derive(reset_s=1.0, confirm_s=600.0, score_s=1.0, running_s=0.0, stop_s=1.0,
                                 policy_timeout_s=1.0, max_steps=1)
    assert bounded.overrun("awaiting_confirm", 601.0, rig_mode=True).reason == \
        "awaiting_confirm: the layout was not confirmed within 600 s"
    for phase in ("idle", "done", "finished"):
        assert BOUNDS.overrun(phase, 1e9, rig_mode=False) is None


def test_running_is_bounded_like_evals_trial_deadline_unless_given():
    derived = PhaseBounds.derive(reset_s=1.0, confirm_s=0.0, score_s=1.0, running_s=0.0, stop_s=1.0,
                                 policy_timeout_s=300.0, max_steps=10)
    assert derived.running_s == 300.0 * 12 + RUNNING_ALLOWANCE_S == 4500.0
    given = PhaseBounds.derive(reset_s=1.0, confirm_s=0.0, score_s=1.0, running_s=30.0, stop_s=1.0,
                               policy_timeout_s=300.0, max_steps=10)
    assert given.running_s == 30.0


def test_stopping_lets_the_call_in_flight_time_out_unless_given():
    derived = PhaseBounds.derive(reset_s=1.0, confirm_s=0.0, score_s=1.0, running_s=0.0, stop_s=0.0,
                                 policy_timeout_s=300.0, max_steps=10)
    assert derived.stop_s == 300.0 + STOPPING_ALLOWANCE_S == 360.0
    given = PhaseBounds.derive(reset_s=1.0, confirm_s=0.0, score_s=1.0, running_s=0.0, stop_s=2.0,
                               policy_timeout_s=300.0, max_steps=10)
    assert given.stop_s == 2.0


def test_a_fault_result_is_not_the_policys_and_keeps_what_the_scorer_saw():
    scored = {"task": "t", "intent_score": 0.8, "exec_score": 0.5, "intent_ok": False, "exec_ok": False,
              "completion_ok": False, "policy_steps": 4, "frames": 90,
              "phases": [{"phase": "grasp", "intent_score": 0.8, "exec_score": 0.5, "max_score": 1.0}]}
    entry = fault_result(scored, Fault(FAULT_ESTOP, "e-stop engaged during the trial (/robofollow/estop)"))
    assert (entry["fault"], entry["fault_reason"]) == ("e-stop", "e-stop engaged during the trial (/robofollow/estop)")
    assert "policy_error" not in entry
    assert (entry["intent_score"], entry["exec_score"], entry["completion_ok"]) == (0.0, 0.0, False)
    assert entry["partial_result"] == {"intent_score": 0.8, "exec_score": 0.5, "completion_ok": False}
    assert entry["phases"][0]["intent_reason"] == "not executed: e-stop" and entry["phases"][0]["max_score"] == 1.0
    assert (entry["policy_steps"], entry["frames"]) == (4, 90)
    assert could_not_execute(entry) == "e-stop: e-stop engaged during the trial (/robofollow/estop)"
    assert could_not_execute({"policy_error": "RuntimeError: boom"}) == "RuntimeError: boom"
    assert could_not_execute(scored) is None
    with pytest.raises(ValueError, match="fault kind: 'meteor'"):
        Fault("meteor", "?")


def test_the_bridges_holds_are_counted_per_trial_and_only_its_estop_input_sets_the_estop():
    assert [hold_kind(r) for r in ("e-stop engaged", "watchdog: no command for 120 ms",
                                   "left tool point [0.1, 0.2, 0.3] leaves the workspace box",
                                   "command: non-finite value for left_joint1", "left_joint2: 3.1 outside limits",
                                   "something new")] == ["e-stop", "watchdog", "workspace", "command", "limits",
                                                         "other"]
    watch = SafetyWatch()
    watch.on_bridge_status({"hold": True, "reasons": ["watchdog: no command for 120 ms"]})
    assert watch.take_holds() == {}  # not watching: between trials, a hold is nobody's
    watch.watch(True)
    for status in ({"hold": True, "reasons": ["watchdog: no command for 120 ms"]},
                   {"hold": True, "reasons": ["watchdog: no command for 340 ms"]},
                   {"hold": False, "clamped": True, "reasons": ["left_joint1: step 0.2 exceeds 0.05, clamped"]},
                   {"hold": True, "reasons": ["e-stop engaged"]}):
        watch.on_bridge_status(status)
    assert watch.take_holds() == {"e-stop": 1, "watchdog": 2} and watch.take_holds() == {}
    assert not watch.estop  # a status saying "e-stop engaged" does not set it: the e-stop input does
    assert watch.on_estop(True) and watch.estop and not watch.on_estop(True)
    assert watch.on_estop(False) and not watch.estop


def _run_with_one_trial(tmp_path):  # type: ignore[no-untyped-def]
    registry = default_registry()
    task = registry.eval_task("L0_pickup_red_cylinder")
    writer = RunWriter(tmp_path / "run", arguments={"via": "test"}, selected_tasks=[(task.scene, task.task_id)],
                       expected_trials=2)
    entry = {"task": task.task_id, "instruction": task.instruction, "intent_ok": True, "exec_ok": True,
             "completion_ok": True, "intent_score": 1.0, "exec_score": 1.0, "phases": []}
    writer.record_trial(entry, task=task, round_index=1, seed=task.seed(1))
    return writer


def test_a_supervisor_closes_a_running_run_whose_writer_died_and_nothing_else(tmp_path):
    run_dir = tmp_path / "run"
    writer = _run_with_one_trial(tmp_path)
    # its writer alive (it holds the lock): left alone, even though it says "running"
    assert not close_abandoned_run(run_dir, "trial_manager_node was killed by SIGKILL (signal 9)")
    writer.close()  # as a killed writer leaves it: "running", lock gone
    assert close_abandoned_run(run_dir, "trial_manager_node was killed by SIGKILL (signal 9)")
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["status"], run["error"], run["completed_trials"]) == (
        "failed", "trial_manager_node was killed by SIGKILL (signal 9)", 1)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    assert len(json.loads((run_dir / "results.json").read_text())) == 1  # the trials recorded are kept
    assert not close_abandoned_run(run_dir, "again")  # no longer running: never rewritten
    assert json.loads((run_dir / "run.json").read_text())["error"].startswith("trial_manager_node")
    assert not close_abandoned_run(tmp_path / "nothing-here", "x")


def test_a_writer_killed_by_sigkill_leaves_its_run_to_the_supervisor(tmp_path):
    """The real thing: a process holding the run is killed; its lock goes with it."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from pathlib import Path
        from test_node_trial_faults import _run_with_one_trial
        _run_with_one_trial(Path({str(tmp_path)!r}))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "running"
    assert close_abandoned_run(tmp_path / "run", "writer killed")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"
