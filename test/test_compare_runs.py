"""``robofollow report --compare-runs``: the exact McNemar test against hand-computed binomial tails,
the paired bootstrap's coverage against a known truth, and the CLI on two real run directories."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.compare import compare_runs, comparison_plot
from robofollow_ros.evaluation.intervals import WILSON_BOUND, mean_interval, wilson
from robofollow_ros.evaluation.paired_stats import mcnemar_exact
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.scoring import score_trajectory
from robofollow_ros.scoring.synthetic import Puppet
from test_cli_tasks import ROBOFOLLOW

PICK = "L0_pickup_yellow_block_1_left"
L1_PICK = "L1_s11_pick_left_of_green"


@pytest.mark.parametrize(("only_a", "only_b", "expected"), [
    # Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91, worked example (1 vs 7 discordant
    # pairs): the exact conditional p is 0.070 = 2 * (C(8,0) + C(8,1)) / 2^8 = 18/256.
    (1, 7, 18 / 256),
    (7, 1, 18 / 256),  # symmetric in the two runs
    (0, 5, 2 / 32),  # 2 * C(5,0) / 2^5
    (2, 8, 2 * (1 + 10 + 45) / 1024),  # 2 * (C(10,0) + C(10,1) + C(10,2)) / 2^10
    (3, 3, 1.0),  # the doubled tail exceeds 1: capped
    (0, 0, 1.0),  # no discordant pair: no evidence either way
])
def test_exact_mcnemar_matches_hand_computed_binomial_tails(only_a: int, only_b: int, expected: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-12)


def test_exact_mcnemar_stays_exact_at_the_full_protocol_size() -> None:
    # 5,540 trials: 2^n overflows a float; the integer tail must not. Against the normal approximation
    # with continuity correction, which is close at this size.
    b, c = 2600, 2800
    z = (abs(b - c) - 1) / math.sqrt(b + c)
    approx = math.erfc(z / math.sqrt(2))
    assert mcnemar_exact(b, c) == pytest.approx(approx, rel=0.02)
    assert 0.0 < mcnemar_exact(b, c) < 0.01


def test_paired_bootstrap_interval_covers_the_true_mean_difference() -> None:
    rng = np.random.default_rng(7)
    true_diff, covered, datasets = 0.1, 0, 300
    for k in range(datasets):
        diffs = rng.normal(true_diff, 0.3, size=40)
        lo, hi = mean_interval(diffs, n_resamples=2000, seed=k, low=-2.0, high=2.0).pair()
        assert lo <= diffs.mean() <= hi
        covered += lo <= true_diff <= hi
    assert 0.90 <= covered / datasets <= 0.985  # a 95 % interval (the percentile method runs a little short)


def test_paired_bootstrap_of_identical_differences_is_not_a_point() -> None:
    got = mean_interval([0.25] * 12, low=-1.0, high=1.0)  # the bootstrap collapses: the Wilson bound, named
    assert got.method == WILSON_BOUND and got.lo < 0.25 < got.hi
    with pytest.raises(ValueError, match="values"):
        mean_interval([])


def _scored(task_id: str, succeed: bool) -> dict[str, Any]:
    p = Puppet(task_id)
    if succeed:
        p.pick(p.task.arm, p.task.source).home(p.task.arm)
    else:
        p.hold(3)
    return score_trajectory(p.task, p.frames)


def _run(run_dir: Path, outcomes: dict[str, list[bool]], skip: tuple[str, int] | None = None) -> None:
    reg = default_registry()
    tasks = [reg.eval_task(t) for t in outcomes]
    with RunWriter(run_dir, arguments={}, selected_tasks=[(t.scene, t.task_id) for t in tasks],
                   expected_trials=sum(len(v) for v in outcomes.values())) as run:
        for task in tasks:
            for r, ok in enumerate(outcomes[task.task_id], start=1):
                if (task.task_id, r) != skip:
                    run.record_trial(_scored(task.task_id, ok), task=task, round_index=r, seed=task.seed(r))


def test_compare_runs_pairs_trials_and_reports_each_cell(tmp_path: Path) -> None:
    a = {PICK: [True, True, True, False, True, True], L1_PICK: [False, False, True]}
    b = {PICK: [False, True, False, False, False, True], L1_PICK: [True, True, True]}
    _run(tmp_path / "A", a)
    _run(tmp_path / "B", b)
    png = tmp_path / "cmp.png"
    proc = subprocess.run([ROBOFOLLOW, "report", "--compare-runs", str(tmp_path / "A"), str(tmp_path / "B"), "--json",
                           "--png", str(png), "--bootstrap", "2000"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cells = {c["cell"]: c for c in json.loads(proc.stdout)["cells"]}
    assert list(cells) == ["S1/L0", "S1/L1", "all"]
    l0 = cells["S1/L0"]
    assert (l0["pairs"], l0["complete_a"], l0["complete_b"], l0["only_a"], l0["only_b"]) == (6, 5, 2, 3, 0)
    assert l0["mcnemar_p"] == pytest.approx(2 / 8)  # 3 vs 0 discordant: 2 * C(3,0) / 2^3
    assert cells["S1/L1"]["only_b"] == 2 and cells["S1/L1"]["mcnemar_p"] == pytest.approx(2 * 1 / 4)
    trials_a = json.loads((tmp_path / "A" / "results.json").read_text())
    trials_b = json.loads((tmp_path / "B" / "results.json").read_text())
    is_diff = np.mean([y["intent_score"] - x["intent_score"] for x, y in zip(trials_a[:6], trials_b[:6], strict=True)])
    assert l0["is_diff"] == pytest.approx(is_diff) and l0["is_diff"] < 0
    assert l0["is_ci95"][0] <= l0["is_diff"] <= l0["is_ci95"][1]
    assert cells["all"]["pairs"] == 9 and (cells["all"]["only_a"], cells["all"]["only_b"]) == (3, 2)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = subprocess.run([ROBOFOLLOW, "report", "--compare-runs", str(tmp_path / "A"), str(tmp_path / "B"),
                           "--no-plot"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and "McNemar p" in text.stdout and "S1/L1" in text.stdout


def test_unpaired_runs_are_refused_with_one_line_naming_the_missing_trials(tmp_path: Path) -> None:
    outcomes = {PICK: [True, False, True]}
    _run(tmp_path / "A", outcomes)
    _run(tmp_path / "B", outcomes, skip=(PICK, 2))
    proc = subprocess.run([ROBOFOLLOW, "report", "--compare-runs", str(tmp_path / "A"), str(tmp_path / "B")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    seed = default_registry().eval_task(PICK).seed(2)
    assert len(lines) == 1 and "not paired" in lines[0] and f"{PICK} seed {seed}" in lines[0]
    assert "1 trial(s)" in lines[0] and str(tmp_path / "B") in lines[0]


def _trial(task: str, level: str, rnd: int, done: bool) -> dict[str, Any]:
    s = 1.0 if done else 0.0
    return {"task": task, "scene": "scene1", "level_tag": level, "round": rnd, "seed": rnd, "intent_score": s,
            "exec_score": s, "intent_ok": done, "exec_ok": done, "completion_ok": done}


def test_the_comparison_png_shows_n_zero_markers_completion_intervals_and_a_legend_beside_the_bars() -> None:
    a = [_trial(PICK, "L0", r, False) for r in range(1, 5)] + [_trial(L1_PICK, "L1", r, True) for r in range(1, 4)]
    b = [_trial(PICK, "L0", r, r < 3) for r in range(1, 5)] + [_trial(L1_PICK, "L1", r, True) for r in range(1, 4)]
    cells = compare_runs(a, b, n_resamples=500)
    l0 = cells[0]
    assert (l0.complete_a, l0.pairs) == (0, 4) and l0.complete_a_ci95 == pytest.approx(wilson(0, 4).pair())
    assert cells[1].is_method == WILSON_BOUND and cells[1].is_ci95[0] < 0.0 < cells[1].is_ci95[1]  # all Δ = 0
    fig = comparison_plot(cells, ("A", "B"))
    ax = fig.axes[2]
    zeros = [line for line in ax.get_lines() if line.get_gid() == "zero:complete_a"]
    assert len(zeros) == 1 and list(zeros[0].get_ydata()) == [0.0]  # A's 0/4 in S1/L0 is drawn, B's rates are not 0
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["S1/L0\nn=4", "S1/L1\nn=3", "all\nn=7"]
    # the completion bars carry Wilson intervals: error bars whose ends are the Wilson bounds of A's 0/4
    ends = [seg for coll in ax.collections for seg in coll.get_segments()]
    assert any(seg[0][1] == pytest.approx(0.0) and seg[1][1] == pytest.approx(100 * wilson(0, 4).hi) for seg in ends)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    for bar in ax.patches:  # no bar under the legend
        assert not legend.overlaps(bar.get_window_extent())
    assert legend.x0 >= ax.get_window_extent().x1  # outside the panel
