"""Run output: run.json / results.json / summary.json, the SQLite store, merging, and a crash mid-trial."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.rundir import RunDirError
from robofollow_ros.rundir.store import RunStore
from robofollow_ros.scoring import score_trajectory
from robofollow_ros.scoring.summary import summarize, wilson_interval
from robofollow_ros.scoring.synthetic import Puppet

PICK = "L0_pickup_yellow_block_1_left"
REL = "L0_place_yellow_block_1_behind_red_cylinder"


def scored(task_id: str, succeed: bool) -> dict:
    p = Puppet(task_id)
    arm = p.task.arm
    if succeed:
        p.pick(arm, p.task.source).home(arm)
    else:
        p.hold(3)
    return score_trajectory(p.task, p.frames)


def writer(path, n: int = 4, **kw) -> RunWriter:
    return RunWriter(path, arguments={"model": "oracle", "rounds": 2}, selected_tasks=[("scene1", PICK)],
                     expected_trials=n, **kw)


def test_run_files_lifecycle(tmp_path):
    reg = default_registry()
    task = reg.eval_task(PICK)
    run_dir = tmp_path / "run"
    with writer(run_dir, n=2) as run:
        run_json = json.loads((run_dir / "run.json").read_text())
        assert run_json["status"] == "running" and run_json["expected_trials"] == 2
        assert run_json["metric_version"] == "strict" and run_json["completion_aggregation"] == "task-macro"
        run.record_trial(scored(PICK, True), task=task, round_index=1, seed=task.seed(1))
        run.record_trial(scored(PICK, False), task=task, round_index=2, seed=task.seed(2), video="videos/x.mp4")
        on_disk = json.loads((run_dir / "results.json").read_text())
        assert [e["round"] for e in on_disk] == [1, 2]
    final = json.loads((run_dir / "run.json").read_text())
    assert final["status"] == "complete" and final["completed_trials"] == final["expected_trials"] == 2
    results = json.loads((run_dir / "results.json").read_text())
    first = results[0]
    for key in ("task", "instruction", "intent_ok", "intent_msg", "exec_ok", "exec_msg", "completion_ok",
                "intent_score", "exec_score", "phases", "scene", "layout", "seed", "round", "level_tag",
                "base_task_type"):
        assert key in first
    assert results[1]["video"] == "videos/x.mp4" and first["seed"] == task.seed(1)
    text = (run_dir / "results.json").read_text(encoding="utf-8")
    assert text.endswith("\n") and text.startswith("[\n  {")
    summary = json.loads((run_dir / "summary.json").read_text())
    group = summary["groups"]["scene1/L0"]
    assert summary["status"] == "complete"
    assert (group["episodes"], group["task_count"], group["completion_rate"]) == (2, 1, 0.5)


def test_run_dir_must_be_new_or_empty(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(RunDirError, match="run_dir"):
        writer(tmp_path)


def test_exception_marks_the_run_failed_with_traceback(tmp_path):
    with pytest.raises(RuntimeError), writer(tmp_path / "r") as run:
        run.record_trial(scored(PICK, True), task=default_registry().eval_task(PICK), round_index=1, seed=1)
        raise RuntimeError("policy server went away")
    run_json = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run_json["status"] == "failed" and "policy server went away" in run_json["error"]
    assert run_json["completed_trials"] == 1


def test_mismatched_task_is_refused(tmp_path):
    run = writer(tmp_path / "r")
    with pytest.raises(ValueError, match=r"result\.task"):
        run.record_trial(scored(PICK, True), task=default_registry().eval_task(REL), round_index=1, seed=1)
    run.complete()


def test_resume_continues_only_the_planned_trials_it_started_with(tmp_path):
    task = default_registry().eval_task(PICK)
    run = writer(tmp_path / "r")
    run.record_trial(scored(PICK, True), task=task, round_index=1, seed=task.seed(1))
    run.close()  # as a killed run: still "running", resumable
    with pytest.raises(RunDirError) as refused:
        RunWriter.resume(tmp_path / "r", arguments={}, selected_tasks=[("scene1", REL)], expected_trials=5)
    assert "(expected_trials, selected_tasks differ: expected_trials 4 in the run, 5 now; selected_tasks " in str(
        refused.value)
    with RunWriter.resume(tmp_path / "r", arguments={"rounds": 2}, selected_tasks=[("scene1", PICK)],
                          expected_trials=4) as resumed:
        assert resumed.run_id == run.run_id and resumed.recorded(PICK, 1) and not resumed.recorded(PICK, 2)
        resumed.record_trial(scored(PICK, False), task=task, round_index=2, seed=task.seed(2))
    final = json.loads((tmp_path / "r" / "run.json").read_text())
    assert final["status"] == "complete" and final["completed_trials"] == 2 and len(final["resumes"]) == 1


def test_store_is_wal_and_queryable_and_merges(tmp_path):
    reg = default_registry()
    dbs = []
    for i in range(2):
        with RunWriter(tmp_path / f"run{i}", arguments={}, selected_tasks=[("scene1", PICK), ("scene1", REL)],
                       expected_trials=4, store_path=tmp_path / f"s{i}.sqlite") as run:
            for r in (1, 2):
                task = reg.eval_task(PICK if r == 1 else REL)
                run.record_trial(scored(task.task_id, r == 1), task=task, round_index=r, seed=task.seed(r))
        dbs.append(tmp_path / f"s{i}.sqlite")
    with RunStore(dbs[0]) as store:
        assert store.journal_mode == "wal"
        assert len(store.trials()) == 2
        assert [t["task"] for t in store.trials(task=REL)] == [REL]
        stages = store.stage_scores(store.runs()[0]["run_id"], 0)
        assert [s["phase"] for s in stages] == ["stage1_source_select", "stage3_finish"]
        assert store.merge_from(dbs[1]) == 1
        assert store.merge_from(dbs[1]) == 0  # merging again adds nothing
        assert len(store.runs()) == 2 and len(store.trials(level="L0")) == 4
        merged = summarize(store.trials())
        assert merged["groups"]["scene1/L0"]["episodes"] == 4


CHILD = textwrap.dedent("""
    import os, signal, sys
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.results import RunWriter
    from robofollow_ros.scoring import score_trajectory
    from robofollow_ros.scoring.synthetic import Puppet
    task = default_registry().eval_task("L0_pickup_yellow_block_1_left")
    p = Puppet(task).pick("left", task.source).home("left")
    result = score_trajectory(task, p.frames)
    run = RunWriter(sys.argv[1], arguments={}, selected_tasks=[("scene1", task.task_id)], expected_trials=5)
    for r in range(1, 4):
        run.record_trial(result, task=task, round_index=r, seed=task.seed(r))
    entry = dict(result, scene="scene1", level_tag="L0", round=4)
    run.store.conn.execute("BEGIN IMMEDIATE")
    run.store._insert_trial(run.run_id, 3, entry)   # the trial row is in, its stage rows are not committed
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_killed_evaluator_leaves_whole_trials_only(tmp_path):
    run_dir = tmp_path / "crashed"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(run_dir)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == -9, proc.stderr
    results = json.loads((run_dir / "results.json").read_text())
    assert [e["round"] for e in results] == [1, 2, 3]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    with RunStore(run_dir / "results.sqlite") as store:
        assert [t["round"] for t in store.trials()] == [1, 2, 3]
        n_stage_rows = store.conn.execute("SELECT COUNT(*) FROM stage_scores").fetchone()[0]
        assert n_stage_rows == 3 * 2
        assert store.conn.execute("SELECT COUNT(*) FROM stage_scores WHERE trial_index = 3").fetchone()[0] == 0


def test_summary_metrics_and_wilson_interval():
    def trial(task: str, ok: bool, level: str = "L1") -> dict:
        return {"scene": "scene2", "level_tag": level, "task": task, "intent_score": 1.0 if ok else 0.4,
                "exec_score": 1.0 if ok else 0.0, "intent_ok": ok, "exec_ok": ok, "completion_ok": ok}

    trials = [trial("a", True)] * 3 + [trial("a", False)] + [trial("b", False)] * 2 + [trial("c", True, "L2")]
    groups = summarize(trials)["groups"]
    g = groups["scene2/L1"]
    assert (g["episodes"], g["task_count"]) == (6, 2)
    assert g["mean_intent_score"] == pytest.approx((3 * 1.0 + 3 * 0.4) / 6)
    assert g["completion_rate"] == pytest.approx((0.75 + 0.0) / 2)  # task-macro
    assert g["episode_micro_completion_rate"] == pytest.approx(3 / 6)
    assert g["episode_micro_completion_rate_ci95"] == pytest.approx(list(wilson_interval(3, 6)))
    assert list(groups) == ["scene2/L1", "scene2/L2"]
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="trial 0: missing field"):
        summarize([{"scene": "scene1"}])
