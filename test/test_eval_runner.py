"""The headless evaluator: results files, failing policies, refusing non-empty output, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.evaluation.selection import select_tasks, trial_keys
from test_cli_tasks import ROBOFOLLOW

FAST = EpisodeSettings(max_steps=2, actions_per_step=5)


def _config(tmp_path: Path, **kw) -> EvalConfig:  # type: ignore[no-untyped-def]
    base = dict(policy="hold", output=tmp_path / "run", scenes=("scene1", "scene2"), levels=("L0",), rounds=1,
                limit=1, settings=FAST)
    base.update(kw)
    return EvalConfig(**base)


def test_selection_order_limit_and_rounds(registry):
    tasks = select_tasks(registry, ["scene2", "scene1"], ["L0", "L1"], limit=2)
    assert [t.scene for t in tasks] == ["scene1"] * 4 + ["scene2"] * 4  # scenes 1 -> 4 always
    # --limit counts per scene and level: two L0 and two L1 tasks of each scene, in registry order
    assert [(t.scene, t.level) for t in tasks] == sorted((t.scene, t.level) for t in tasks)
    assert [t.level for t in tasks] == ["L0", "L0", "L1", "L1"] * 2
    assert tasks[:2] == registry.eval_tasks("scene1", "L0")[:2]
    assert tasks[2:4] == registry.eval_tasks("scene1", "L1")[:2]
    keys = trial_keys(tasks, rounds=3)
    assert [(k.task_id, k.round) for k in keys[:3]] == [(tasks[0].task_id, r) for r in (1, 2, 3)]
    assert keys[0].seed == tasks[0].seed(1)
    with pytest.raises(ValueError, match="--rounds"):
        trial_keys(tasks, rounds=11)


def test_limit_per_scene_and_level_is_recorded_so_the_official_evaluator_selects_the_same_tasks(tmp_path, registry):
    """run.json's official ``limit`` would mean K per scene to evaluate.py: where ours differs (several levels),
    the official keys list the selected tasks and ours keeps K under ``limit_per_scene_level``."""
    config = _config(tmp_path, scenes=("scene1", "scene2"), levels=("L0", "L1"), limit=2)
    arguments = config.arguments()
    selected = select_tasks(registry, ("scene1", "scene2"), ("L0", "L1"), 2)
    assert arguments["limit"] is None and arguments["tasks"] == ",".join(t.task_id for t in selected)
    assert arguments["limit_per_scene_level"] == 2
    one_level = _config(tmp_path, levels=("L1",), limit=2).arguments()  # the two meanings agree: kept as given
    assert (one_level["limit"], one_level["tasks"], one_level["limit_per_scene_level"]) == (2, None, 2)


def test_run_writes_results_files_and_store(tmp_path):
    outcome = run_evaluation(_config(tmp_path))
    run_dir = tmp_path / "run"
    run = json.loads((run_dir / "run.json").read_text())
    results = json.loads((run_dir / "results.json").read_text())
    assert run["status"] == "complete" and run["completed_trials"] == run["expected_trials"] == 2
    assert [r["task"] for r in results] == ["L0_pickup_yellow_block_1_left", "L0_pickup_red_cylinder"]
    assert all(r["intent_score"] == 0.0 and not r["completion_ok"] for r in results)  # hold never grasps
    assert all(r["frames"] == 1 + 2 * 5 for r in results)  # frame 0 + max_steps x rows
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["groups"]["scene1/L0"]["episodes"] == 1
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 2
    assert outcome.recorded == 2 and outcome.failed_trials == []


@pytest.mark.parametrize("mode", ["raise", "nan", "wrong_shape"])
def test_a_failing_policy_fails_its_trials_and_the_run_goes_on(tmp_path, mode):
    outcome = run_evaluation(_config(tmp_path, policy="robofollow_ros.policy.drills.scripted:faulty",
                                     policy_kwargs={"mode": mode}))
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(results) == 2 and len(outcome.failed_trials) == 2
    for entry in results:
        assert entry["policy_error"] and not entry["completion_ok"] and entry["intent_score"] == 0.0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "complete"


def test_non_empty_output_is_refused_with_a_hint(tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    proc = subprocess.run([ROBOFOLLOW, "eval", "--policy", "hold", "--scene", "scene1", "--levels", "L0",
                           "--rounds", "1", "--limit", "1", "--no-render", "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "not an empty directory" in proc.stderr and "--resume" in proc.stderr
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(("args", "message"), [
    (["--scene", "scene9"], "--scene"), (["--levels", "L5"], "--levels"), (["--tasks", "L0_nope"], "L0_nope"),
    (["--policy", "nonsense://x"], "policy spec"), (["--kwargs", "[1]"], "--kwargs"),
    (["--policy-timeout", "0"], "--policy-timeout"), (["--policy-timeout", "nan"], "--policy-timeout"),
    (["--ray-address", "auto"], "--ray-address: only with --backend ray"), (["--workers", "0"], "--workers"),
])
def test_bad_arguments_exit_2_naming_the_field(tmp_path, args, message):
    base = {"--policy": "hold", "--scene": "scene1", "--levels": "L0", "--rounds": "1", "--output": str(tmp_path / "o")}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = [x for kv in base.items() for x in kv]
    proc = subprocess.run([ROBOFOLLOW, "eval", *argv, "--no-render"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def _recorded(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "results.json").read_text())


def test_resume_after_sigkill_loses_nothing_and_runs_only_the_rest(tmp_path):
    run_dir = tmp_path / "killed"
    argv = [ROBOFOLLOW, "eval", "--policy", "hold", "--scene", "scene1", "--levels", "L0", "--rounds", "2",
            "--limit", "3", "--max-steps", "4", "--actions-per-step", "10", "--no-render", "--output", str(run_dir)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    while True:  # the progress line of each recorded trial is the event we wait on
        line = lines.get(timeout=120)
        if " 2/6 trials" in line:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = _recorded(run_dir)
    assert 2 <= len(before) < 6
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    after = _recorded(run_dir)
    assert [e for e in after if e in before] == before  # nothing recorded before the kill was lost or changed
    keys = [(e["task"], e["round"]) for e in after]
    assert len(keys) == len(set(keys)) == 6  # every trial exactly once
    # run round by round (one worker: in order), so what the kill left is round 1 of as many tasks
    assert {e["round"] for e in before} == {1} and len({e["task"] for e in before}) == len(before)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["completed_trials"] == 6 and len(run["resumes"]) == 1
    assert run["resumes"][0]["trials_before"] == len(before) and run["resumes"][0]["changed"] == {}
    assert "already recorded" in resumed.stdout
