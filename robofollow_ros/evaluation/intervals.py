"""The package's one source of 95 % intervals: every table and plot takes its intervals from here.

Why these methods:

* **Completion shares** are per-trial yes/no, so their interval is Wilson's score interval (good at
  the small n and the rates near 0 or 1 of this benchmark, where the normal interval collapses to a
  point), on the completed trials ``k`` of ``n``: the paper's task-macro CR is the same rate whenever
  every task has the same rounds (the protocol).
* **IS/ES means** (and paired differences of them) are means of bounded scores with no distribution
  to assume, so their interval is a seeded percentile bootstrap. With more than one round per task
  the rounds of a task are not independent (same task, same wording), so the bootstrap resamples
  *tasks* with all their rounds (a cluster bootstrap); with one round per task, or one task, it
  resamples trials. A cluster bootstrap over few tasks (2 or 3 in a small cell) has only a handful of
  distinct resamples and runs narrow, so a clustered interval is never narrower than the bootstrap over
  trials of the same scores: it spans both.
* **Never a point for n > 0.** When every resample gives the same mean (every score equal, e.g. all
  0, or all 0.3), the bootstrap says nothing about n; the interval falls back to the **Wilson bound
  at the mean**: a score in [0, 1] with mean m has variance at most m(1 − m), the variance of a coin
  with that rate, so Wilson's interval at m with the same n is the widest the data allow. Each
  :class:`Interval` names its method, and the tables say which in their footnotes.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from robofollow_ros.scoring.summary import Z95

#: Methods an :class:`Interval` names (the footnotes' words).
WILSON = "Wilson"
BOOT_TASKS = "bootstrap over tasks"
BOOT_TRIALS = "bootstrap over trials"
WILSON_BOUND = "Wilson bound at the mean"
#: Resamples drawn at a time (memory: chunk x clusters integers).
_CHUNK = 1000
#: A bootstrap interval narrower than this (in score units) is a point.
_POINT = 1e-12

def footnote(scores: str = "IS, ES", of: str = "the mean") -> str:
    """The footnote of a table with these intervals (the mark * is the fallback's)."""
    return (f"95 % intervals: CR Wilson score interval on completed/n; {scores} percentile bootstrap of {of}, "
            "over tasks (all rounds of a task together; never narrower than over trials) when tasks have several "
            "rounds, else over trials; "
            f"* = every resample equal, so the {WILSON_BOUND} (a score in [0, 1] varies at most as a coin with "
            "that rate)")


#: The footnote of a table of IS/ES/CR.
FOOTNOTE = footnote()


@dataclass(frozen=True)
class Interval:
    """A 95 % interval in the units of its values, and the method that gave it."""

    lo: float
    hi: float
    method: str

    @property
    def fallback(self) -> bool:
        return self.method == WILSON_BOUND

    def scaled(self, factor: float) -> Interval:
        return Interval(self.lo * factor, self.hi * factor, self.method)

    def pair(self) -> tuple[float, float]:
        return self.lo, self.hi


def wilson(successes: float, n: int, z: float = Z95) -> Interval:
    """Wilson score interval for ``successes`` of ``n`` (a rate ``successes / n``); [0, 1] when n is 0."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"wilson: need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(0.0, 1.0, WILSON)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half), WILSON)


def wilson_at(rate: float, n: int) -> Interval:
    """Wilson's interval at a rate in [0, 1] with n trials (a task-macro rate, a mean row's rate)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"wilson_at: rate must be in [0, 1], got {rate}")
    return wilson(rate * n, n)


def _bound(mean: float, n: int, low: float, high: float) -> Interval:
    unit = min(1.0, max(0.0, (mean - low) / (high - low)))
    w = wilson(unit * n, n)
    return Interval(low + w.lo * (high - low), low + w.hi * (high - low), WILSON_BOUND)


def _clusters(values: np.ndarray, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, np.ndarray, str]:
    # the units, their per-unit sums and counts
    """Per-unit sums and counts of the bootstrap's units (tasks when they hold several trials)."""
    if clusters is not None and len(clusters) != values.size:
        raise ValueError(f"clusters: {len(clusters)} labels for {values.size} values")
    if clusters is None or len(set(clusters)) in (1, values.size):
        return values, np.ones_like(values), BOOT_TRIALS
    index = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    labels = np.array([index[c] for c in clusters])
    sums = np.bincount(labels, weights=values, minlength=len(index))
    counts = np.bincount(labels, minlength=len(index)).astype(np.float64)
    return sums, counts, BOOT_TASKS


def _resampled_means(sums: np.ndarray, counts: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    means = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        stop = min(n_resamples, start + _CHUNK)
        picks = rng.integers(0, sums.size, size=(stop - start, sums.size))
        means[start:stop] = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return means


def _check(n_resamples: int, level: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level}")


def _percentile(means: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def mean_interval(values: Sequence[float], clusters: Sequence[Hashable] | None = None, n_resamples: int = 10_000,
                  seed: int = 0, low: float = 0.0, high: float = 1.0, level: float = 0.95) -> Interval:
    """Bootstrap interval of the mean of scores in [low, high] (clustered by ``clusters``, e.g. task ids);
    the Wilson bound at the mean when the bootstrap collapses."""
    groups = [(values, clusters)]
    return stratified_interval(groups, n_resamples, seed, low, high, level)


def stratified_interval(groups: Sequence[tuple[Sequence[float], Sequence[Hashable] | None]], n_resamples: int = 10_000,
                        seed: int = 0, low: float = 0.0, high: float = 1.0, level: float = 0.95) -> Interval:
    """Interval of the unweighted mean of group means (a Table 1 mean row over scenes), each group
    resampled on its own (by its clusters); the Wilson bound at that mean, with n summed, if it collapses."""
    _check(n_resamples, level)
    arrays = [np.asarray(v, dtype=np.float64) for v, _ in groups]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError("values: need at least one score in every group")
    rng, by_trial = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    total = np.zeros(n_resamples, dtype=np.float64)
    trials = np.zeros(n_resamples, dtype=np.float64)
    methods = set()
    for a, (_, labels) in zip(arrays, groups, strict=True):
        sums, counts, method = _clusters(a, labels)
        methods.add(method)
        total += _resampled_means(sums, counts, n_resamples, rng)
        if method == BOOT_TASKS:
            trials += _resampled_means(a, np.ones_like(a), n_resamples, by_trial)
    lo, hi = _percentile(total / len(arrays), level)
    if BOOT_TASKS in methods:  # never narrower than over trials (few tasks: few distinct resamples)
        for k, (a, (_, labels)) in enumerate(zip(arrays, groups, strict=True)):
            if _clusters(a, labels)[2] != BOOT_TASKS:  # groups resampled by trial: the same draws for both
                trials += _resampled_means(a, np.ones_like(a), n_resamples, np.random.default_rng([seed, 2, k]))
        t_lo, t_hi = _percentile(trials / len(arrays), level)
        lo, hi = min(lo, t_lo), max(hi, t_hi)
    if hi - lo <= _POINT:
        mean = float(np.mean([a.mean() for a in arrays]))
        return _bound(mean, sum(a.size for a in arrays), low, high)
    return Interval(lo, hi, BOOT_TASKS if BOOT_TASKS in methods else BOOT_TRIALS)


def mark(interval: Interval | None) -> str:
    """The footnote mark of an interval that fell back to the Wilson bound ("*"), else ""."""
    return "*" if interval is not None and interval.fallback else ""
