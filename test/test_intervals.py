"""``evaluation.intervals`` against reference values computed here, independently of its code:

* Wilson: the interval is the set of rates p the score test does not reject, (p̂ − p)² ≤ z² p(1 − p)/n,
  so each end is found by bisection on that inequality, for every k of n = 1..25 (0 and n included);
  and, where SciPy is installed, ``binomtest(k, n).proportion_ci(method="wilson")``.
* The bootstrap: a cluster bootstrap written by hand (Python's ``random``, tasks drawn with all their
  rounds) agrees with the module's within the Monte Carlo error; it covers a known mean about 95 % of
  the time; it is seeded.
* Never a point for n > 0 (hypothesis), and a collapsed bootstrap says it fell back, with the Wilson
  bound at the mean.
"""

from __future__ import annotations

import random
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robofollow_ros.evaluation.intervals import (
    BOOT_TASKS,
    BOOT_TRIALS,
    WILSON_BOUND,
    mean_interval,
    stratified_interval,
    wilson,
)

Z = NormalDist().inv_cdf(0.975)


def score_test_end(k: int, n: int, upper: bool) -> float:
    """One end of {p : (k/n − p)² ≤ z² p(1 − p)/n}, by bisection (the inverted score test)."""
    phat = k / n

    def inside(p: float) -> bool:
        return (phat - p) ** 2 <= Z * Z * p * (1 - p) / n

    lo, hi = (phat, 1.0) if upper else (0.0, phat)
    if upper and inside(1.0):
        return 1.0
    if not upper and inside(0.0):
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if inside(mid) == upper:  # upper: move right while inside; lower: move left while inside
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@pytest.mark.parametrize("n", range(1, 26))
def test_wilson_equals_the_inverted_score_test_for_every_count(n: int) -> None:
    for k in range(n + 1):
        got = wilson(k, n)
        assert got.lo == pytest.approx(score_test_end(k, n, upper=False), abs=1e-9)
        assert got.hi == pytest.approx(score_test_end(k, n, upper=True), abs=1e-9)
        assert got.hi - got.lo > 0.0  # never a point, at 0 of n and n of n too


def test_wilson_equals_scipy_binomtest() -> None:
    from scipy import stats  # requirements.txt: the reference must be there, never a skip
    for n in (1, 4, 5, 7, 11, 16, 40):
        for k in range(n + 1):
            ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
            got = wilson(k, n)
            assert (got.lo, got.hi) == (pytest.approx(ref.low, abs=1e-9), pytest.approx(ref.high, abs=1e-9))


def test_the_issues_collapsed_rows_now_read_as_wilson() -> None:
    """The memorizer's mean row printed 8/16 [50, 50], 16/16 [100, 100], 0/16 [0, 0]."""
    for k in (0, 8, 16):
        assert wilson(k, 16).pair() == pytest.approx((score_test_end(k, 16, False), score_test_end(k, 16, True)))
    assert 100 * wilson(8, 16).lo == pytest.approx(28.0, abs=0.05)
    assert 100 * wilson(16, 16).lo == pytest.approx(80.6, abs=0.05)
    assert 100 * wilson(0, 16).hi == pytest.approx(19.4, abs=0.05)


def by_hand_cluster_bootstrap(tasks: list[list[float]], resamples: int, seed: int) -> tuple[float, float]:
    """Draw len(tasks) tasks with replacement, all their rounds with them; the 2.5 and 97.5 % means."""
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        drawn = [tasks[rng.randrange(len(tasks))] for _ in tasks]
        scores = [s for task in drawn for s in task]
        means.append(sum(scores) / len(scores))
    means.sort()
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def test_the_task_bootstrap_matches_one_written_by_hand() -> None:
    tasks = [[0.0, 0.2, 0.1], [0.8, 1.0, 0.9], [0.5, 0.5, 0.4], [0.3, 0.0, 0.2], [1.0, 1.0, 0.7], [0.6, 0.2, 0.4]]
    values = [s for task in tasks for s in task]
    labels = [f"task{i}" for i, task in enumerate(tasks) for _ in task]
    got = mean_interval(values, labels, n_resamples=40_000, seed=3)
    ref = by_hand_cluster_bootstrap(tasks, 40_000, seed=11)
    assert got.method == BOOT_TASKS
    assert got.lo == pytest.approx(ref[0], abs=0.015) and got.hi == pytest.approx(ref[1], abs=0.015)
    # the same data as independent trials: narrower, since rounds of one task move together here
    trials = mean_interval(values, None, n_resamples=40_000, seed=3)
    assert trials.method == BOOT_TRIALS and trials.hi - trials.lo < got.hi - got.lo


def test_the_task_bootstrap_covers_a_known_mean() -> None:
    """Tasks with their own rates, 3 rounds each: the interval holds the true mean about 95 % of the time."""
    rng = np.random.default_rng(5)
    hits, runs = 0, 300
    for r in range(runs):
        rates = rng.uniform(0.1, 0.9, size=20)  # the population of tasks: mean 0.5
        scores = [float(rng.random() < p) for p in rates for _ in range(3)]
        labels = [i for i in range(20) for _ in range(3)]
        got = mean_interval(scores, labels, n_resamples=1000, seed=r)
        hits += got.lo <= 0.5 <= got.hi
    assert 0.88 <= hits / runs <= 0.99


def test_seeded() -> None:
    values = [0.1, 0.9, 0.4, 0.6, 0.0]
    assert mean_interval(values, seed=7) == mean_interval(values, seed=7)
    assert mean_interval(values, seed=7) != mean_interval(values, seed=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.3, 0.5, 1.0]), min_size=1, max_size=30), st.integers(1, 4))
def test_never_a_point_for_n_above_zero(values: list[float], rounds: int) -> None:
    labels = [i // rounds for i in range(len(values))]
    got = mean_interval(values, labels, n_resamples=200, seed=0)
    mean = sum(values) / len(values)
    assert 0.0 <= got.lo <= mean + 1e-12 and mean - 1e-12 <= got.hi <= 1.0
    assert got.hi - got.lo > 0.01
    if len(set(values)) == 1:  # every resample equal: the named fallback, Wilson at the mean with this n
        assert got.method == WILSON_BOUND
        assert got.pair() == pytest.approx(wilson(mean * len(values), len(values)).pair())


def test_a_collapsed_difference_falls_back_on_its_own_scale() -> None:
    """Paired differences live in [−1, 1]: all equal to 0 gives Wilson's at one half, stretched to [−1, 1]."""
    got = mean_interval([0.0] * 9, n_resamples=100, low=-1.0, high=1.0)
    half = wilson(4.5, 9)
    assert got.method == WILSON_BOUND and got.pair() == pytest.approx((2 * half.lo - 1, 2 * half.hi - 1))


def test_the_mean_row_resamples_within_each_scene_and_falls_back_with_n_summed() -> None:
    got = stratified_interval([([0.3] * 4, None), ([0.3] * 4, None)], n_resamples=100)
    assert got.method == WILSON_BOUND and got.pair() == pytest.approx(wilson(0.3 * 8, 8).pair())
    mixed = stratified_interval([([0.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b"]), ([1.0] * 3, None)], n_resamples=2000)
    assert mixed.method == BOOT_TASKS and mixed.lo < 0.75 < mixed.hi


def test_bad_input_names_the_field() -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson(5, 4)
    with pytest.raises(ValueError, match="values"):
        mean_interval([])
    with pytest.raises(ValueError, match="clusters"):
        mean_interval([0.1, 0.2], ["a"])
