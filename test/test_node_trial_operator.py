"""The operator's controls over DDS, in the mock profile's graph (one process here), and the mark's parser.

One run of two trials: round 1 is paused while running (policy_node sends no row, the arm bridge holds,
the trial stays ``running``), marked, resumed (rows come again), then redone — the ended attempt is kept
inside the redo's results entry and the summary counts the trial once; the redo is marked "success"
against the scorer's failure (the ``hold`` policy completes nothing), which ``robofollow report`` lists.
Round 2 is aborted: an ``operator-abort`` fault of class ``record_and_continue``, and the run goes on
to its end. A mark sent after the run annotates the last recorded trial.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from profile_graph import start_profile_graph
from robofollow_ros.evaluation.operator_marks import disagreements, parse_mark
from robofollow_ros.exit_status import EXIT_TRIALS_FAILED
from robofollow_ros.nodes import trial_protocol as tp
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"


def test_pause_resume_redo_abort_and_marks_over_the_graph(tmp_path):
    run = tmp_path / "run"
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "bridge": [], "joints": []}
        commands: list[int] = []  # per command: how many joint states had arrived by then

        def on_command(_msg: JointState) -> None:
            commands.append(len(got["joints"]))
            ros.notify()

        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(String, "/robofollow/arm_bridge/status", ros.collector(got["bridge"]), 10)
        operator.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), tp.STATE_STREAM)
        operator.create_subscription(JointState, "/robofollow/joint_command", on_command, tp.STATE_STREAM)
        mark = operator.create_publisher(String, tp.TOPIC_MARK, 10)
        clients = {name: operator.create_client(Trigger, f"/robofollow/trial/{name}")
                   for name in ("pause", "resume", "redo", "abort")}
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0, "policy_kwargs": '{"chunk_size": 50}'},  # 50 Hz: 1 s a call
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 4, "actions_per_step": 50,
                                   "output": str(run)}})["trial_manager_node"]

        def states() -> list[dict]:  # type: ignore[type-arg]
            return [json.loads(m.data) for m in got["trial"]]

        def running(trial_id_end: str, round_index: int) -> bool:
            return any(t["phase"] == tp.PHASE_RUNNING and t.get("round") == round_index and
                       str(t["id"]).endswith(trial_id_end) for t in states())

        ros.wait_for(lambda: running("", 1) and len(commands) > 5, timeout=60, what="round 1 running")
        assert ros.call_trigger(clients["pause"], "pause").success
        ros.wait_for(lambda: any(json.loads(m.data).get("halt") and "paused by the operator" in
                                 str(json.loads(m.data)["reasons"]) for m in got["bridge"]), what="the arms hold")
        # Held: 30 joint states (0.3 s at the mock's 100 Hz) pass without a command; rows come every 20 ms.
        ros.wait_for(lambda: len(got["joints"]) - commands[-1] >= 30, timeout=10, what="no row while paused")
        assert states()[-1]["phase"] == tp.PHASE_RUNNING and states()[-1]["operator_pause"] is True
        mark.publish(String(data=json.dumps({"verdict": "failure", "progress": 40, "note": "knocked it over"})))
        ros.wait_for(lambda: manager._mark is not None, what="the mark kept")
        sent = len(commands)
        assert ros.call_trigger(clients["resume"], "resume").success
        ros.wait_for(lambda: len(commands) > sent + 5, timeout=10, what="rows again after resume")
        assert states()[-1]["phase"] == tp.PHASE_RUNNING and states()[-1]["operator_pause"] is False

        assert ros.call_trigger(clients["redo"], "redo").success
        ros.wait_for(lambda: running("_attempt2", 1), timeout=60, what="round 1 running again")
        mark.publish(String(data=json.dumps({"verdict": "success", "note": "looked fine to me"})))
        ros.wait_for(lambda: running("", 2), timeout=60, what="round 2 running")
        reply = ros.call_trigger(clients["abort"], "abort")
        assert reply.success and "the run goes on" in reply.message
        ros.wait_for(manager.finished.is_set, timeout=60, what="the run's end")
        assert manager.exit_code == EXIT_TRIALS_FAILED  # the aborted trial could not be executed
        assert not ros.call_trigger(clients["abort"], "a late abort").success
        ok, why = manager.mark('{"verdict": "failure"}')
        assert not ok and why.startswith("the run is finished")

    first, second = json.loads((run / "results.json").read_text())
    assert first["round"] == 1 and first["attempt"] == 2 and "fault" not in first and first["policy_steps"] == 4
    assert first["operator_mark"] == {"verdict": "success", "note": "looked fine to me"}
    assert first["completion_ok"] is False  # the mark is beside the verdict, never replacing it
    (old,) = first["superseded_attempts"]
    assert old["attempt"] == 1 and old["superseded_by_redo"] is True and old["fault"] == "operator-abort"
    assert "redo" in old["fault_reason"] and old["operator_mark"] == {"verdict": "failure", "progress": 40.0,
                                                                      "note": "knocked it over"}
    assert (second["fault"], second["failure_class"]) == ("operator-abort", "record_and_continue")
    assert "operator_mark" not in second
    summary = json.loads((run / "summary.json").read_text())
    (group,) = summary["groups"].values()
    assert group["episodes"] == 2, summary  # the superseded attempt is not counted
    with sqlite3.connect(run / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2
        stored = json.loads(db.execute("SELECT result_json FROM trials WHERE round = 1").fetchone()[0])
    assert stored["superseded_attempts"][0]["attempt"] == 1
    report = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "report", str(run), "--no-plot"],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    listed = report.stdout.split("operator marks disagreeing with the verdict:\n", 1)[1].splitlines()
    assert listed[0].strip().startswith(f"{TASK} round 1: operator success, automatic failure"), report.stdout
    assert not any("round 2" in line for line in listed)


@pytest.mark.parametrize(("text", "error"), [
    ('{"verdict": "maybe"}', "mark.verdict: 'maybe' is not one of success, failure"),
    ('{"progress": 140}', "mark.progress: 140 is not a number from 0 to 100"),
    ('{"verdict": "success", "score": 1}', "mark: unknown field 'score'"),
    ('{"note": "x"}', "mark: give a verdict"),
    ("[1]", "mark: expected a JSON object, got list"),
    ("success", "mark: not JSON"),
])
def test_a_bad_mark_is_refused_in_one_line_naming_the_field(text, error):
    with pytest.raises(ValueError) as caught:
        parse_mark(text)
    assert str(caught.value).startswith(error) and "\n" not in str(caught.value)


def test_only_opposite_verdicts_disagree():
    trials = [{"task": "a", "round": 1, "completion_ok": False, "operator_mark": {"verdict": "success"}},
              {"task": "b", "round": 1, "completion_ok": True, "operator_mark": {"verdict": "failure", "progress": 80}},
              {"task": "c", "round": 1, "completion_ok": True, "operator_mark": {"verdict": "success"}},
              {"task": "d", "round": 1, "completion_ok": False, "operator_mark": {"progress": 30}},
              {"task": "e", "round": 1, "completion_ok": False}]
    assert disagreements(trials) == ["a round 1: operator success, automatic failure",
                                     "b round 1: operator failure, progress 80%, automatic success"]


def test_a_mark_after_a_trial_annotates_its_entry_in_results_json_and_sqlite(tmp_path):
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.results import RunWriter
    from robofollow_ros.nodes.trial_records import empty_result

    task = default_registry().eval_task(TASK)
    with RunWriter(tmp_path / "run", arguments={}, selected_tasks=((task.scene, task.task_id),),
                   expected_trials=1) as writer:
        writer.record_trial(empty_result(task, "test"), task=task, round_index=1, seed=0)
        writer.annotate_trial(TASK, 1, {"operator_mark": {"verdict": "success"}})
        with pytest.raises(ValueError, match=r"completion_ok.* is a score"):
            writer.annotate_trial(TASK, 1, {"completion_ok": True})
    (entry,) = json.loads((tmp_path / "run" / "results.json").read_text())
    assert entry["operator_mark"] == {"verdict": "success"} and entry["completion_ok"] is False
    with sqlite3.connect(tmp_path / "run" / "results.sqlite") as db:
        (stored,) = db.execute("SELECT result_json FROM trials").fetchone()
    assert json.loads(stored)["operator_mark"] == {"verdict": "success"}
