"""``robofollow report`` views on constructed results: n and 95 % intervals per cell (Wilson computed here
from the formula, independently of scoring.summary), the zero marker in the PNG, the exit 3 of a run
that executed nothing, ``--tasks``, ``--failures``, ``--csv`` and the ``--compare-runs`` columns."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from robofollow_ros.cli import main
from robofollow_ros.evaluation.compare import compare_runs, format_comparison
from robofollow_ros.evaluation.report import comparison_figure, run_table
from robofollow_ros.scoring.summary import summarize

S1_L0 = ("scene1", "L0", "L0_pickup_yellow_block_1_left")
S1_L0_B = ("scene1", "L0", "L0_pickup_yellow_block_1_right")
S1_L1 = ("scene1", "L1", "L1_s11_pick_left_of_green")
S2_L0 = ("scene2", "L0", "L0_pickup_red_cylinder")
Z = NormalDist().inv_cdf(0.975)
BOOT = "500"  # bootstrap resamples: enough for the assertions, fast


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score interval, written from the formula (Wilson 1927), in percent."""
    p = k / n
    centre = p + Z * Z / (2 * n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    denom = 1 + Z * Z / n
    return 100 * (centre - half) / denom, 100 * (centre + half) / denom


def trial(cell: tuple[str, str, str], rnd: int, done: bool, score: float | None = None, **extra: Any) -> dict[str, Any]:
    scene, level, task = cell
    s = (1.0 if done else 0.0) if score is None else score
    full = min(0.8, s)
    phases = [{"phase": "stage1_source_select", "intent_score": full, "exec_score": full, "max_score": 0.8,
               "intent_reason": "ok" if s else "operating arm never closed gripper",
               "exec_reason": "ok" if s else "operating arm never closed gripper"},
              {"phase": "stage3_finish", "intent_score": 0.2 if done else 0.0, "exec_score": 0.2 if done else 0.0,
               "max_score": 0.2, "intent_reason": "ok" if done else "arm did not return home",
               "exec_reason": "ok" if done else "gated"}]
    return {"task": task, "scene": scene, "level_tag": level, "round": rnd, "seed": 100 * rnd + 7,
            "intent_score": s, "exec_score": s, "intent_ok": done, "exec_ok": done, "completion_ok": done,
            "phases": phases, "exec_msg": "ok" if done else f"exec_score={s:.2f}/1.00", **extra}


def write_run(path: Path, trials: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps(trials), encoding="utf-8")
    return path


def standard_run(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """S1/L0: 3 of 7 complete (one task 2/4, the other 1/3); S1/L1: 0 of 5; S2/L0: 4 of 4."""
    trials = ([trial(S1_L0, r, r in (1, 3)) for r in range(1, 5)] + [trial(S1_L0_B, r, r == 2) for r in range(1, 4)]
              + [trial(S1_L1, r, False) for r in range(1, 6)] + [trial(S2_L0, r, True) for r in range(1, 5)])
    return write_run(tmp_path / "run", trials), trials


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_every_cell_carries_n_and_the_wilson_interval_of_its_completions(tmp_path, capsys):
    run, _ = standard_run(tmp_path)
    data = run_json(["report", str(run), "--json", "--no-plot", "--bootstrap", BOOT], capsys)
    cells = data["cells"]
    for scene, level, k, n in (("S1", "L0", 3, 7), ("S1", "L1", 0, 5), ("S2", "L0", 4, 4)):
        c = cells[scene][level]
        assert (c["n"], c["CR_k"]) == (n, k)
        assert c["CR_ci95"] == pytest.approx(wilson(k, n), abs=1e-9)
    assert cells["S1"]["L1"]["CR_ci95"][1] == pytest.approx(100 * Z * Z / (5 + Z * Z))  # 0 of n: z²/(n+z²)
    l0 = cells["S1"]["L0"]
    assert l0["IS"] == pytest.approx(100 * 3 / 7)
    assert 0.0 <= l0["IS_ci95"][0] < l0["IS"] < l0["IS_ci95"][1] <= 100.0  # a bootstrap of 0/1 scores: inside [0, 100]
    # every score 0: the bootstrap collapses, so the interval is the Wilson bound at the mean (0 of 5), named
    assert cells["S1"]["L1"]["IS_ci95"] == pytest.approx(wilson(0, 5), abs=1e-9)
    assert cells["S1"]["L1"]["IS_method"] == "Wilson bound at the mean" and l0["IS_method"] == "bootstrap over tasks"
    assert cells["S2"]["L0"]["IS_ci95"] == pytest.approx(wilson(4, 4), abs=1e-9)  # every score 1
    mean = cells["mean"]["L0"]  # unweighted over S1 and S2, n summed
    assert mean["n"] == 11 and mean["CR"] == pytest.approx((l0["CR"] + 100.0) / 2)
    assert mean["CR_ci95"] == pytest.approx(wilson(7, 11), abs=1e-9)  # Wilson on the completions, n summed
    assert cells["mean"]["L1"]["CR_ci95"] == pytest.approx(wilson(0, 5), abs=1e-9)

    assert main(["report", str(run), "--no-plot", "--bootstrap", BOOT, "--compare", "PI05"]) == 0
    out = capsys.readouterr().out
    s1 = next(line for line in out.splitlines() if line.startswith("S1 "))
    assert "n=7" in s1 and "n=5" in s1
    lo, hi = wilson(3, 7)
    row = next(line for line in out.splitlines() if re.match(r"S1\s+L0\s+7\s", line))
    assert "3/7" in row and f"[{lo:.1f}, {hi:.1f}]" in row
    lo, hi = wilson(0, 5)
    row = next(line for line in out.splitlines() if re.match(r"S1\s+L1\s+5\s", line))
    assert f"[{lo:.1f}, {hi:.1f}]*" in row  # the fallback is marked, and the footnote says what the mark means
    assert "* = every resample equal, so the Wilson bound at the mean" in out and "bootstrap" in out
    assert "warning: this run is a subset of the protocol" in out  # beside published, full-protocol rows


def test_a_zero_cell_is_drawn_as_a_marker_in_the_png(tmp_path, capsys):
    run, trials = standard_run(tmp_path)
    png = tmp_path / "report.png"
    data = run_json(["report", str(run), "--json", "--png", str(png), "--bootstrap", BOOT], capsys)
    # the same figure the command drew, to find where its zero marker of S1/L1 sits
    fig = comparison_figure(run_table(summarize(trials)), {}, run_label=run.name, stats=data["cells"])
    ax = fig.axes[0]
    zeros = [line for line in ax.get_lines() if line.get_gid() == f"zero:{run.name}"]
    assert len(zeros) == 1  # S1/L1 scored 0; absent cells get no marker
    x, y = ax.transData.transform((zeros[0].get_xdata()[0], 0.0))
    expected = zeros[0].get_markerfacecolor()
    height = fig.get_size_inches()[1] * fig.dpi
    import matplotlib.colors as mcolors
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    pixels = mpimg.imread(png)
    plt.close(fig)
    assert pixels.shape[0] == round(height)
    marker = pixels[round(height - y), round(x)][:3]
    assert marker == pytest.approx(list(mcolors.to_rgb(expected)), abs=0.08)
    # one cell to the right (S1/L2, not run): the same height holds no marker
    x_empty, _ = ax.transData.transform((zeros[0].get_xdata()[0] + 1, 0.0))
    assert pixels[round(height - y), round(x_empty)][:3] != pytest.approx(marker, abs=0.08)


@pytest.mark.parametrize("content", [[], "faulted"])
def test_a_run_that_executed_nothing_says_so_in_one_line_and_exits_3(tmp_path, capsys, content):
    trials = [] if content == [] else [trial(S1_L0, r, False, fault="e-stop", fault_reason="e-stop engaged")
                                       for r in (1, 2)]
    run = write_run(tmp_path / "run", trials)
    assert main(["report", str(run), "--no-plot"]) == 3
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "no executed trial" in lines[0] and f"{len(trials)} recorded" in lines[0]
    assert captured.out == ""


def test_tasks_view_gives_each_task_over_its_rounds(tmp_path, capsys):
    run, _ = standard_run(tmp_path)
    rows = run_json(["report", str(run), "--tasks", "--json", "--bootstrap", BOOT], capsys)["tasks"]
    by_task = {r["task"]: r for r in rows}
    left = by_task[S1_L0[2]]
    assert (left["n"], left["CR_k"], left["rounds"]) == (4, 2, [1, 2, 3, 4])
    assert left["CR"] == pytest.approx(50.0) and left["CR_ci95"] == pytest.approx(wilson(2, 4))
    assert by_task[S1_L0_B[2]]["CR_ci95"] == pytest.approx(wilson(1, 3))
    assert len(rows) == 4
    assert main(["report", str(run), "--tasks", "--bootstrap", BOOT]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith(S1_L0_B[2]))
    assert re.search(r"\sS1\s+L0\s+3\s", line) and "1/3" in line


def test_failures_view_names_the_stage_the_reason_and_the_recordings(tmp_path, capsys):
    trials = [trial(S1_L0, 1, True), trial(S1_L0, 2, False),
              trial(S1_L0, 3, False, policy_error="policy raised: ValueError('bad chunk')\ntraceback..."),
              trial(S1_L0, 4, False, fault="timeout", fault_reason="phase running past its bound (360 s)"),
              trial(S1_L0, 5, False, score=0.8)]  # stage 1 full, the finish stage failed
    run = write_run(tmp_path / "run", trials)
    (run / "mcap").mkdir()
    (run / "videos").mkdir()
    mcap = run / "mcap" / f"{S1_L0[2]}_r2_s207.mcap"
    video = run / "videos" / f"{S1_L0[2]}_r4_s407.mp4"
    mcap.write_bytes(b"x")
    video.write_bytes(b"x")
    rows = run_json(["report", str(run), "--failures", "--json"], capsys)["failures"]
    assert [r["round"] for r in rows] == [2, 3, 4, 5]
    scored, raised, faulted, finish = rows
    assert scored["stage"] == "stage1_source_select (intent)"
    assert scored["reason"] == "operating arm never closed gripper"
    assert scored["mcap"] == str(mcap) and scored["video"] is None
    assert raised["stage"] == "not executed"
    assert raised["reason"] == "policy_error: policy raised: ValueError('bad chunk')"  # its first line
    assert faulted["reason"] == "fault timeout: phase running past its bound (360 s)" and faulted["video"] == str(video)
    assert faulted["mcap"] is None
    assert (finish["stage"], finish["reason"]) == ("stage3_finish (intent)", "arm did not return home")
    assert main(["report", str(run), "--failures"]) == 0
    out = capsys.readouterr().out
    assert "failed trials: 4 of 5" in out and f"mcap: {mcap}" in out and f"video: {video}" in out


def test_csv_round_trips_the_trial_table_and_the_summaries(tmp_path, capsys):
    run, trials = standard_run(tmp_path)
    out = tmp_path / "csv"
    data = run_json(["report", str(run), "--json", "--no-plot", "--csv", str(out), "--bootstrap", BOOT], capsys)
    with open(out / "trials.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["task"], int(r["round"]), int(r["seed"])) for r in rows] == [
        (t["task"], t["round"], t["seed"]) for t in trials]
    assert [float(r["intent_score"]) for r in rows] == [t["intent_score"] for t in trials]
    assert [r["completion_ok"] == "True" for r in rows] == [t["completion_ok"] for t in trials]
    assert rows[1]["failed_stage"] == "stage1_source_select (intent)"
    with open(out / "cells.csv", newline="", encoding="utf-8") as fh:
        cells = {(r["scene"], r["level"]): r for r in csv.DictReader(fh)}
    for (scene, level), row in cells.items():
        c = data["cells"][scene][level]
        assert int(row["n"]) == c["n"] and int(row["CR_k"]) == c["CR_k"]
        assert [float(row["CR_lo"]), float(row["CR_hi"])] == c["CR_ci95"]  # repr round-trips exactly
        assert [float(row["IS_lo"]), float(row["IS_hi"])] == c["IS_ci95"]
    assert main(["report", str(run), "--csv", str(out / "trials.csv")]) == 2  # a file, not a directory
    assert "--csv" in capsys.readouterr().err
    assert set(cells) == {("S1", "L0"), ("S1", "L1"), ("S2", "L0"), ("mean", "L0"), ("mean", "L1")}
    with open(out / "tasks.csv", newline="", encoding="utf-8") as fh:
        tasks = list(csv.DictReader(fh))
    assert [(t["task"], int(t["n"])) for t in tasks] == [(S1_L0[2], 4), (S1_L0_B[2], 3), (S1_L1[2], 5), (S2_L0[2], 4)]
    # one name for a scene across the files: every (scene, level) of trials.csv and tasks.csv is a row of cells.csv
    assert {(r["scene"], r["level"]) for r in rows} | {(t["scene"], t["level"]) for t in tasks} <= set(cells)
    assert {k for k in cells if k[0] != "mean"} == {(r["scene"], r["level"]) for r in rows}


def test_compare_runs_columns_line_up_whatever_the_values():
    a = [trial(S1_L0, r, r % 2 == 0) for r in range(1, 7)] + [trial(S2_L0, r, True) for r in range(1, 4)]
    b = [trial(S1_L0, r, True) for r in range(1, 7)] + [trial(S2_L0, r, False) for r in range(1, 4)]
    names = ("runs/a-long-policy-name", "B")
    text = format_comparison(compare_runs(a, b, n_resamples=200, names=names), names)
    lines = text.splitlines()
    header, rule, rows, note = lines[1], lines[2], lines[3:-1], lines[-1]
    assert set(rule) == {"-"} and len(rule) == len(header)
    assert note.startswith("95 % intervals: CR Wilson") and "IS Δ, ES Δ percentile bootstrap" in note
    columns = re.split(r"\s{2,}", header.strip())
    assert len(columns) == 15
    for row in rows:  # every cell of every row parses back into the 15 columns
        assert len(re.split(r"\s{2,}", row.strip())) == 15, row
    # right-aligned numeric columns end where their header ends
    for name in ("pairs", "IS Δ", "ES Δ", "complete A/B", "McNemar p"):
        end = header.index(name) + len(name)
        for row in rows:
            assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (name, row)
    s2 = next(r for r in rows if r.startswith("S2/L0"))
    assert "-100.0" in s2 and "3/0" in s2
    assert re.search(rf"\[{wilson(3, 3)[0]:.0f}, 100\]\s+\[0, {wilson(0, 3)[1]:.0f}\]$", s2)  # each run's, Wilson
