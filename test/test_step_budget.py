"""The lock-step step budget (issue 36): ``calls`` (the official ``max_steps``, default) or ``rows``
(``max_steps x actions_per_step`` executed rows, however many rows each call returns); results.json
says calls and rows per trial, run.json the unit, the limit and the totals, and a resume keeps the unit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.execution_mode import ExecutionSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.exit_status import EXIT_BAD_INPUT
from said import error_lines

TASK = "L0_s41_l_pick_yellow_cylinder"
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


def _run(out: Path, chunk: int, budget: str, resume: bool = False) -> tuple[dict, dict]:
    settings = EpisodeSettings(3, 5, ExecutionSettings(budget=budget))
    run_evaluation(EvalConfig(policy="hold", policy_kwargs={"chunk_size": chunk}, output=out, tasks=(TASK,),
                              rounds=1, render=False, backend="inline", settings=settings, resume=resume))
    (result,) = json.loads((out / "results.json").read_text())
    return result, json.loads((out / "run.json").read_text())


@pytest.mark.parametrize(("chunk", "budget", "calls", "rows"), [
    (1, "calls", 3, 3),     # one action per call: max_steps rows only
    (1, "rows", 15, 15),    # ... and a rows budget runs the whole 3 x 5
    (4, "calls", 3, 12),    # short chunks: every row of every call
    (4, "rows", 4, 15),     # 4 + 4 + 4 + 3: the last chunk cut to what is left
    (8, "calls", 3, 15),    # long chunks cut at actions_per_step, as always
    (8, "rows", 3, 15),
])
def test_the_budget_counts_its_unit(tmp_path: Path, chunk: int, budget: str, calls: int, rows: int) -> None:
    result, run = _run(tmp_path / "run", chunk, budget)
    assert (result["policy_steps"], result["rows_executed"]) == (calls, rows)
    assert result["frames"] == rows + 1  # frame 0, then one per executed row
    limit = 3 if budget == "calls" else 15
    assert run["step_budget"] == {"unit": budget, "limit": limit, "official": budget == "calls"}
    assert run["budget_used"] == {"calls": calls, "rows": rows}
    assert run["execution"] == ({"mode": "lockstep"} if budget == "calls" else {"mode": "lockstep", "budget": "rows"})


def test_a_resume_with_another_unit_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(out, 1, "rows")
    with pytest.raises(ValueError, match="execution"):
        _run(out, 1, "calls", resume=True)


def test_budget_rows_with_realtime_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--budget rows: --execution realtime already counts control ticks"):
        ExecutionSettings(mode="realtime", budget="rows")
    with pytest.raises(ValueError, match="--budget: 'time' is not one of calls, rows"):
        ExecutionSettings(budget="time")
    done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", "hold", "--tasks", TASK, "--execution", "realtime",
                           "--budget", "rows", "--output", str(tmp_path / "rt")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == EXIT_BAD_INPUT and len(error_lines(done.stderr)) == 1, done.stderr
    assert "--budget rows" in done.stderr
