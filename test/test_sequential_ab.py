"""The sequential A/B test (evaluation.sequential) on synthetic paired policies, and ``robofollow compare``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robofollow_ros.evaluation.sequential import (
    SequentialTest,
    e_value_paths,
    fixed_design_pairs_binary,
    fixed_design_pairs_mean,
    stopping_pairs,
)

ALPHA = 0.05
SIMS = 2000
ROOT = Path(__file__).resolve().parents[1]


def _binary(rng: np.random.Generator, p_a: float, p_b: float, sims: int, pairs: int) -> np.ndarray:
    a = rng.random((sims, pairs)) < p_a
    b = rng.random((sims, pairs)) < p_b
    return b.astype(np.float64) - a.astype(np.float64)


def _partial(rng: np.random.Generator, mean_a: float, mean_b: float, sims: int, pairs: int) -> np.ndarray:
    """Paired scores in [0, 1]: a shared task difficulty plus policy noise (Beta), like IS/ES on one seed."""
    task = rng.beta(2.0, 2.0, size=(sims, pairs))
    a = np.clip(0.5 * task + rng.beta(8 * mean_a, 8 * (1 - mean_a), size=(sims, pairs)) - 0.25, 0, 1)
    b = np.clip(0.5 * task + rng.beta(8 * mean_b, 8 * (1 - mean_b), size=(sims, pairs)) - 0.25, 0, 1)
    return b - a


def _upper_bound(rejections: int, n: int) -> float:
    """One-sided 99 % Wilson upper bound of a rate (z = 2.326)."""
    z, p = 2.326, rejections / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre + half


@pytest.mark.parametrize("bet", ["mixture", "agrapa"])
@pytest.mark.parametrize(("p", "binary"), [(0.5, True), (0.2, True), (0.5, False)])
def test_type_one_error_stays_below_alpha_over_2000_null_comparisons(p: float, binary: bool, bet: str) -> None:
    rng = np.random.default_rng(28)
    diffs = _binary(rng, p, p, SIMS, 300) if binary else _partial(rng, p, p, SIMS, 300)
    rejected = int((stopping_pairs(e_value_paths(diffs, binary=binary, bet=bet), ALPHA) > 0).sum())
    # Watched after every one of 300 pairs: a fixed-n test peeked at this often rejects far more than alpha.
    assert _upper_bound(rejected, SIMS) <= ALPHA, f"{rejected}/{SIMS} null comparisons rejected"


def test_peeking_at_a_fixed_n_test_would_break_the_same_bound() -> None:
    """The control: the same null data, a naive z-test on the running mean checked after every pair."""
    rng = np.random.default_rng(28)
    diffs = _binary(rng, 0.5, 0.5, SIMS, 300)
    n = np.arange(1, 301)
    z = np.abs(np.cumsum(diffs, axis=1)) / np.sqrt(np.maximum(np.cumsum(diffs != 0, axis=1), 1))
    rejected = int((z[:, 9:] >= 1.96).any(axis=1).sum())
    assert n.size == 300 and _upper_bound(rejected, SIMS) > 2 * ALPHA  # the bound above is not trivially loose


def test_clear_completion_difference_decides_well_before_the_fixed_design() -> None:
    rng = np.random.default_rng(7)
    p_a, p_b = 0.4, 0.8
    stop = stopping_pairs(e_value_paths(_binary(rng, p_a, p_b, SIMS, 400), binary=True), ALPHA)
    power = float((stop > 0).mean())
    assert power >= 0.99
    used = np.where(stop > 0, stop, 400).mean()
    fixed = fixed_design_pairs_binary(p_b * (1 - p_a), p_a * (1 - p_b), ALPHA, power=0.99)
    # power-matched: the fixed McNemar design with the power the sequential test reached (measured 28 vs 54)
    assert used < 0.6 * fixed, (used, fixed)
    # and the direction: B (0.8) is the better one in (almost) every decision
    paths = e_value_paths(_binary(np.random.default_rng(8), p_a, p_b, 200, 400), binary=True)
    assert stopping_pairs(paths, ALPHA).all()


def test_partial_credit_decides_a_clear_gap_about_as_fast_as_the_power_matched_fixed_design() -> None:
    rng = np.random.default_rng(9)
    diffs = _partial(rng, 0.45, 0.6, SIMS, 400)
    stop = stopping_pairs(e_value_paths(diffs, binary=False), ALPHA)
    assert (stop > 0).mean() >= 0.99
    used = np.where(stop > 0, stop, 400).mean()
    fixed = fixed_design_pairs_mean(float(diffs.mean()), float(diffs.std()), ALPHA, power=0.99)
    # Measured: 48 pairs against the paired z-test's 45 at power 0.99 (62 at 0.999; aGRAPA needs 61): on
    # a low-variance difference the z-test, which knows sigma, is hard to beat; the e-process roughly ties.
    assert used < 1.15 * fixed, (used, fixed)


@pytest.mark.parametrize("bet", ["mixture", "agrapa"])
def test_the_stepwise_test_and_the_vectorised_paths_agree_and_name_the_better_side(bet: str) -> None:
    rng = np.random.default_rng(3)
    a = (rng.random(200) < 0.7).astype(float)
    b = (rng.random(200) < 0.3).astype(float)
    test = SequentialTest(alpha=ALPHA, binary=True, bet=bet)
    values = [test.update(x, y).e_value for x, y in zip(a, b, strict=True)]
    assert np.allclose(values, e_value_paths((b - a)[None], binary=True, bet=bet)[0])
    assert test.decision().verdict == "A better"
    scores_a, scores_b = rng.random(100) * 0.5, rng.random(100) * 0.5 + 0.4
    partial = SequentialTest(alpha=ALPHA, binary=False, bet=bet)
    values = [partial.update(x, y).e_value for x, y in zip(scores_a, scores_b, strict=True)]
    assert np.allclose(values, e_value_paths((scores_b - scores_a)[None], binary=False, bet=bet)[0])
    assert partial.decision().verdict == "B better"
    with pytest.raises(ValueError, match="scores must be in"):
        partial.update(1.5, 0.0)


def test_fixed_design_matches_the_textbook_and_the_exact_floor() -> None:
    # Connor 1987: psi = 0.4, delta = 0.2, alpha 0.05, power 0.8 -> 77 pairs by the formula
    assert fixed_design_pairs_binary(0.1, 0.3, 0.05, 0.8) == 77
    assert fixed_design_pairs_binary(0.0, 1.0, 0.05, 0.8) == 6  # exact McNemar needs 6 discordant pairs
    assert math.isinf(fixed_design_pairs_binary(0.2, 0.2, 0.05))
    assert fixed_design_pairs_mean(0.1, 0.3, 0.05, 0.8) == 71  # (1.96 + 0.8416)^2 * 9 = 70.6
    assert fixed_design_pairs_mean(-1.0, 0.0, 0.05, 0.8) == 2  # a constant difference: never 0 pairs


def test_compare_cli_stops_early_and_names_the_better_policy(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "compare", "--policy-a", "oracle",
                           "--policy-b", "hold", "--scene", "scene1", "--levels", "L0", "--limit", "3",
                           "--no-render", "--backend", "inline", "--output", str(out), "--seed", "1"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "compare.json").read_text())
    decision = record["decision"]
    assert decision["verdict"] == "A better" and record["stop_reason"] == "decided"
    assert "decision: A better (oracle)" in proc.stdout
    assert decision["pairs"] < record["pool_pairs"] == 30  # stopped before the pool of 3 tasks x 10 rounds
    assert decision["e_value"] >= 20 and record["trace"][-2]["e_value"] < 20  # stopped at the first crossing
    a = json.loads((out / "A" / "results.json").read_text())
    b = json.loads((out / "B" / "results.json").read_text())
    assert len(a) == len(b) == decision["pairs"]
    assert {(t["task"], t["seed"]) for t in a} == {(t["task"], t["seed"]) for t in b}  # paired
    assert all(t["completion_ok"] for t in a) and not any(t["completion_ok"] for t in b)
    run_a = json.loads((out / "A" / "run.json").read_text())
    assert run_a["policy"]["spec"] == "oracle"
    assert run_a["stopped_early"]["by"] == "robofollow compare"  # fewer trials than planned, and why
    assert run_a["completed_trials"] == decision["pairs"] < run_a["stopped_early"]["planned_trials"]
    assert "pairs" in proc.stdout and "fixed design" in proc.stdout
    # each side's completion with n and its Wilson interval (never a point: 0 of n and n of n included)
    from robofollow_ros.evaluation.intervals import wilson

    n = decision["pairs"]
    for side, spec, k in (("A", "oracle", n), ("B", "hold", 0)):
        ci = wilson(k, n)
        assert (f"{side} = {spec}: completed {k}/{n} = {100 * k / n:.1f} % [{100 * ci.lo:.1f}, {100 * ci.hi:.1f}] "
                "(Wilson 95 %)") in proc.stdout
        assert ci.hi - ci.lo > 0.05


def test_compare_cli_on_partial_credit_names_b_when_b_is_better(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "compare", "--policy-a", "hold",
                           "--policy-b", "oracle", "--tasks", "L0_pickup_yellow_block_2,L0_pickup_yellow_block_3",
                           "--metric", "is", "--no-render", "--backend", "inline", "--output", str(out)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "compare.json").read_text())
    assert record["decision"]["verdict"] == "B better" and record["settings"]["metric"] == "is"
    assert "decision: B better (oracle)" in proc.stdout
    assert record["decision"]["pairs"] < record["pool_pairs"] == 20
    b = json.loads((out / "B" / "results.json").read_text())
    assert [t["intent_score"] for t in b] == [1.0] * record["decision"]["pairs"]
    assert record["fixed_design_pairs"] == 2  # a constant difference of 1: the floor of a paired test
