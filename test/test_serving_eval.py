"""Issue 16, done-when: one policy server (TCP or openpi) serving two ``robofollow eval --workers 2``
runs at once gives every trial the score it gets in process.

The memorizer is the policy because it is the one a shared session would break: it recalls a plan
from the instruction and replays it step by step, so another connection's ``set_instruction`` (TCP)
or prompt (openpi) in between would replay the wrong plan. The two runs use different tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation

pytestmark = pytest.mark.timeout(900)
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
RUNS = {"a": ["L0_pickup_yellow_block_1_left", "L0_pickup_red_cylinder"],
        "b": ["L0_pickup_left_cube", "L0_s41_l_pick_yellow_cylinder"]}
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def scored(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["task"]: {k: r.get(k) for k in COMPARED} for r in results}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("in_process") / "run"
    tasks = tuple(t for run in RUNS.values() for t in run)
    run_evaluation(EvalConfig(policy="memorizer", output=out, tasks=tasks, rounds=1, render=False))
    reference = scored(json.loads((out / "results.json").read_text()))
    assert set(reference) == set(tasks) and all(r["completion_ok"] for r in reference.values())
    return reference


@contextmanager
def served(*args: str) -> Iterator[int]:
    proc = subprocess.Popen([*ROBOFOLLOW, "serve", "--policy", "memorizer", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield int(line.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def two_runs_at_once(spec: str, out: Path, *extra: str) -> dict[str, dict[str, Any]]:
    procs = {name: subprocess.Popen([*ROBOFOLLOW, "eval", "--policy", spec, "--tasks", ",".join(tasks), "--rounds", "1",
                                     "--workers", "2", "--output", str(out / name), *extra],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, tasks in RUNS.items()}
    merged: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=800)
        assert proc.returncode == 0, err[-3000:]
        results = json.loads((out / name / "results.json").read_text())
        assert [r["task"] for r in results] == RUNS[name]
        merged.update(scored(results))
    return merged


def test_one_tcp_server_serves_two_evaluators_with_two_workers_each(in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with served() as port:
        remote = two_runs_at_once(f"tcp://127.0.0.1:{port}", tmp_path, "--no-render")
    assert remote == in_process


def test_one_openpi_server_serves_two_evaluators_with_two_workers_each(in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with served("--protocol", "openpi") as port:
        remote = two_runs_at_once(f"openpi://127.0.0.1:{port}", tmp_path, "--render")  # openpi needs cam_high
    assert remote == in_process
