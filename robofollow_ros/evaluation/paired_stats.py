"""Statistics for two policies run on the same trials: the exact McNemar test (the paired intervals are
``intervals.mean_interval`` of the per-pair differences: both runs see the same task, layout and seed in
every pair, so the difference removes the trial-to-trial variation, and the bootstrap resamples pairs,
never the two runs separately).

Why exact McNemar: completion is binary and the discordant counts are small at this benchmark's
sizes (a cell holds tens of trials), where the chi-square approximation is poor. Under H0 the
discordant pairs split 50/50, so the two-sided p is twice the smaller binomial tail (capped at 1).
"""

from __future__ import annotations

import math


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
