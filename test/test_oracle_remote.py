"""The oracle behind ``robofollow serve`` (tcp://) scores exactly as in process when the run hands it the
privileged state (``--privileged``), gets none without it, and ``--workers 2`` gives the results of
``--workers 1``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.sim.world import SimWorld

pytestmark = pytest.mark.timeout(300)
TASKS = ["L1_s11_pick_left_of_green", "L0_push_left_cube_to_red_cylinder", "L0_s41_seq_l_bowl_then_r_green_cylinder"]
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def scored(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result.get(k) for k in COMPARED}


def test_served_oracle_scores_like_the_in_process_oracle(registry) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "serve", "--policy", "oracle", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server listens (or died: empty line)
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        spec = f"tcp://127.0.0.1:{int(line.rsplit(':', 1)[1])}"
        remote = load_policy(spec, {"timeout_s": 60}, privileged=True)  # the run's --privileged
        local = load_policy("oracle")  # in process: it declares needs_privileged, no flag needed
        world = SimWorld(render=False)
        # Without --privileged nothing privileged leaves this process: the served oracle has no task to plan.
        task = registry.eval_task(TASKS[0])
        bare = load_policy(spec, {"timeout_s": 60})
        unprivileged = run_episode(world, bare, task, task.seed(1), EpisodeSettings())
        bare.close()
        assert "privileged.task_id is missing" in unprivileged["policy_error"], unprivileged.get("policy_error")
        for task_id in TASKS[:2]:
            task = registry.eval_task(task_id)
            frames: dict[str, list[dict[str, Any]]] = {"remote": [], "local": []}
            remote_result = run_episode(world, remote, task, task.seed(1), EpisodeSettings(), frames["remote"])
            local_result = run_episode(world, local, task, task.seed(1), EpisodeSettings(), frames["local"])
            assert remote_result.get("policy_error") is None, remote_result.get("policy_error")
            assert remote_result["completion_ok"] and remote_result["intent_score"] == 1.0
            assert scored(remote_result) == scored(local_result)
            assert frames["remote"] == frames["local"]  # the same motion, frame by frame
        remote.close()
    finally:
        proc.kill()
        proc.wait(30)


def test_two_workers_give_the_results_of_one(tmp_path: Path) -> None:
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_evaluation(EvalConfig(policy="oracle", output=out, tasks=tuple(TASKS), rounds=1, render=False,
                                  workers=workers))
        runs[workers] = [scored(r) for r in json.loads((out / "results.json").read_text())]
    assert [r["task"] for r in runs[1]] == TASKS
    assert all(r["completion_ok"] for r in runs[1])
    assert runs[2] == runs[1]


def test_robofollow_eval_against_robofollow_serve_gives_the_in_process_scores(tmp_path: Path) -> None:
    """Issue 6 end to end, as users run it: two commands, two processes, real loopback TCP."""
    from robofollow_ros.dry_run import served_policy

    cli = [sys.executable, "-m", "robofollow_ros.cli", "eval", "--tasks", ",".join(TASKS[:2]), "--rounds", "1",
           "--no-render"]
    with served_policy("oracle", tmp_path / "server.log") as spec:
        remote = subprocess.run([*cli, "--policy", spec, "--privileged", "--output", str(tmp_path / "remote")],
                                capture_output=True, text=True, timeout=300)
    local = subprocess.run([*cli, "--policy", "oracle", "--output", str(tmp_path / "local")],
                           capture_output=True, text=True, timeout=300)
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr[-2000:] + local.stderr[-2000:]
    results = {name: [scored(r) for r in json.loads((tmp_path / name / "results.json").read_text())]
               for name in ("remote", "local")}
    assert [r["task"] for r in results["remote"]] == TASKS[:2]
    assert all(r["completion_ok"] for r in results["remote"])
    assert results["remote"] == results["local"]
    # The served oracle had the ground truth because the run asked for it, and its run says so.
    runs = {name: json.loads((tmp_path / name / "run.json").read_text()) for name in ("remote", "local")}
    assert runs["remote"]["arguments"]["privileged"] is True
    assert runs["local"]["arguments"]["privileged"] is False
