"""Statistics for two policies run on the same trials: paired bootstrap intervals and the exact McNemar test.

Why paired: both runs see the same task, layout and seed in every pair, so the per-pair difference
removes the trial-to-trial variation that two independent means would carry; the bootstrap
resamples *pairs* (whole trials), never the two runs separately.

Why exact McNemar: completion is binary and the discordant counts are small at this benchmark's
sizes (a cell holds tens of trials), where the chi-square approximation is poor. Under H0 the
discordant pairs split 50/50, so the two-sided p is twice the smaller binomial tail (capped at 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Resamples drawn at a time (memory: chunk x pairs integers).
_CHUNK = 1000


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (A succeeded only / B succeeded only)."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1))  # exact integers: no underflow at large n
    return min(1.0, 2 * tail / 2**n)


def paired_bootstrap_ci(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of paired differences, resampling pairs with replacement."""
    values = np.asarray(diffs, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("diffs: need at least one paired difference")
    if n_resamples < 1:
        raise ValueError(f"n_resamples: must be >= 1, got {n_resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        stop = min(n_resamples, start + _CHUNK)
        picks = rng.integers(0, values.size, size=(stop - start, values.size))
        means[start:stop] = values[picks].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)
