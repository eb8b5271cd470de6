"""Anytime-valid sequential A/B tests on paired trials (``robofollow compare``); no ROS, numpy only.

Why sequential: a fixed design must fix n before it sees data, and n is chosen for an effect size
nobody knows; looking at a fixed-n test's p-value after every pair and stopping when it dips below α
inflates the type-I error far beyond α. A *test martingale* (an e-process) can be watched after every
pair and the experiment stopped the moment it crosses 1/α: by Ville's inequality,
P_H0(sup_t K_t ≥ 1/α) ≤ α, so the type-I error holds at any stopping time (SAVI: safe, anytime-valid
inference). A clear difference then decides after few pairs; a small one runs to the budget.

What this module implements (written from the papers, no code copied):

* **Betting e-process for a bounded mean** (Waudby-Smith & Ramdas 2023, "Estimating means of bounded
  random variables by betting", JRSS-B). Pair t gives D_t ∈ [−1, 1] (B's score minus A's). Under H0
  each pair's D_t has conditional mean 0, so for any predictable bet λ_t ∈ (−1, 1) the wealth
  K_t = Π(1 + λ_i D_i) is a nonnegative martingale with K_0 = 1, and so is any average of such
  wealths. Two bets are implemented:

  - ``mixture`` (default): the average of the wealths of 19 constant bets λ ∈ {−0.9, −0.8, …, 0.9}
    (Robbins' method of mixtures, discretised: the betting form of a mixture likelihood ratio, the
    kind of e-value SAVI builds on). Two-sided by construction:
    the positive bets grow when B is better, the negative ones when A is.
  - ``agrapa``: the hedged capital process of Waudby-Smith & Ramdas, K = (K⁺ + K⁻)/2, with the
    aGRAPA bet λ = μ̂/(σ̂² + μ̂²) from the pairs so far (one pseudo-observation at the null: μ̂
    starts at 0, σ̂² at 1), truncated to [0, 1/2] on each side.

  ``bench/sequential_ab.py`` measures both: the mixture stops 5–25 % sooner on every effect tried,
  its type-I error still well below α (about 3 % at α = 5 %, aGRAPA's about 2 %), so it is the
  default. The test rejects when K_t ≥ 1/α; the larger side
  (the bets on B > A against those on A > B) says which policy is better.
* **Binary (paired completions)**: the same process on the *discordant* pairs only (one policy
  completed, the other not): under H0, P(B only | discordant) = 1/2 (McNemar's null), D = +1 when B
  alone completed and −1 when A alone did; concordant pairs carry no evidence and are skipped. This is
  the sequential counterpart of the exact McNemar test in ``paired_stats`` (STEP, Snyder et al., RSS
  2025, and SAVI's Turner & Grünwald 2023 test the same paired 2×2 question with other martingales).
* **Partial credit**: D = IS_B − IS_A (or ES) ∈ [−1, 1] on every pair ("Beyond Binary Success",
  2026: progress scores separate policies in fewer trials than success alone).

The null these tests are valid under is the per-pair one: on every (task, seed), A and B are
exchangeable (the same distribution of outcome), so E[D_t | past, task_t] = 0 whatever order the tasks
come in. Random task order is what makes the *estimate* represent the task pool, not the validity.

The fixed design compared against (``fixed_design_pairs``): binary: the two-sided McNemar test at
level α with power 1 − β (Connor 1987's normal approximation, from the discordant probabilities);
partial credit: the two-sided paired z-test, n = ((z_{1−α/2} + z_{1−β}) σ_D / μ_D)².
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

METRICS = ("completion", "is", "es")
#: Largest aGRAPA bet (fraction of wealth staked on one pair); Waudby-Smith & Ramdas truncate at 1/2 or 3/4.
DEFAULT_MAX_BET = 0.5
BETS = ("mixture", "agrapa")
#: The constant bets the default mixture averages over (0 included: a share of wealth kept aside).
MIXTURE_GRID = tuple(round(0.1 * k, 1) for k in range(-9, 10))
#: Power of the fixed design the sequential test is compared with.
DEFAULT_POWER = 0.8


@dataclass
class Decision:
    """Where a sequential test stands: ``verdict`` is ``"B better"``, ``"A better"`` or ``"undecided"``."""

    verdict: str
    pairs: int  # pairs observed so far (all of them, ties included)
    used: int  # pairs that entered the bet (binary: the discordant ones; partial credit: all)
    e_value: float  # K_t, the hedged wealth; rejects at >= 1/alpha
    e_plus: float  # wealth of the side betting B > A
    e_minus: float  # wealth of the side betting A > B
    mean_diff: float  # mean of D over the pairs observed (B - A)


@dataclass
class SequentialTest:
    """The betting test of mean 0 on paired differences in [−1, 1]; see the module docstring.

    ``binary=True``: each pair is (completed_a, completed_b) and only discordant pairs are bet on.
    Feed pairs with :meth:`update`; :attr:`decided` turns true the first time K_t ≥ 1/α and stays.
    """

    alpha: float = 0.05
    binary: bool = True
    bet: str = "mixture"
    max_bet: float = DEFAULT_MAX_BET
    _log: list[float] = field(default_factory=list)  # log-wealth of each mixture bet
    _log_plus: float = 0.0  # aGRAPA: the side betting B > A
    _log_minus: float = 0.0
    _n: int = 0  # observations bet on
    _sum: float = 0.0
    _resid: float = 0.0  # sum of (x_i - mu_i)^2, mu_i the estimate after x_i
    _pairs: int = 0
    _diff_sum: float = 0.0
    _verdict: str = "undecided"

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"--alpha: must be in (0, 1), got {self.alpha}")
        if not 0.0 < self.max_bet < 1.0:
            raise ValueError(f"max_bet: must be in (0, 1), got {self.max_bet}")
        if self.bet not in BETS:
            raise ValueError(f"bet: {self.bet!r} is not one of {', '.join(BETS)}")
        self._log = [0.0] * len(MIXTURE_GRID)

    @property
    def decided(self) -> bool:
        return self._verdict != "undecided"

    def agrapa_bets(self) -> tuple[float, float]:
        """aGRAPA's (λ⁺, λ⁻) for the next observation, from the ones before it only (predictable)."""
        mu = self._sum / (self._n + 1)
        var = (1.0 + self._resid) / (self._n + 1)
        raw = mu / (var + mu * mu)
        return min(max(raw, 0.0), self.max_bet), min(max(-raw, 0.0), self.max_bet)

    def update(self, a: float, b: float) -> Decision:
        """One pair: A's and B's outcome (binary: completed or not; else a score in [0, 1])."""
        if self.binary:
            a, b = float(bool(a)), float(bool(b))
        elif not (0.0 <= a <= 1.0 and 0.0 <= b <= 1.0):
            raise ValueError(f"scores must be in [0, 1], got A={a}, B={b}")
        x = b - a
        self._pairs += 1
        self._diff_sum += x
        if not self.binary or x != 0.0:
            lam_plus, lam_minus = self.agrapa_bets()
            self._log_plus += math.log1p(lam_plus * x)
            self._log_minus += math.log1p(-lam_minus * x)
            self._log = [w + math.log1p(lam * x) for w, lam in zip(self._log, MIXTURE_GRID, strict=True)]
            self._n += 1
            self._sum += x
            self._resid += (x - self._sum / (self._n + 1)) ** 2
        decision = self.decision()
        if not self.decided and decision.e_value >= 1.0 / self.alpha:
            self._verdict = "B better" if decision.e_plus >= decision.e_minus else "A better"
        return self.decision()

    def decision(self) -> Decision:
        if self.bet == "agrapa":
            e_plus, e_minus = math.exp(self._log_plus), math.exp(self._log_minus)
            e_value = (e_plus + e_minus) / 2
        else:
            wealth = [math.exp(w) for w in self._log]
            e_value = sum(wealth) / len(wealth)
            e_plus = sum(w for w, lam in zip(wealth, MIXTURE_GRID, strict=True) if lam > 0) / len(wealth)
            e_minus = sum(w for w, lam in zip(wealth, MIXTURE_GRID, strict=True) if lam < 0) / len(wealth)
        return Decision(verdict=self._verdict, pairs=self._pairs, used=self._n, e_value=e_value,
                        e_plus=e_plus, e_minus=e_minus,
                        mean_diff=self._diff_sum / self._pairs if self._pairs else 0.0)


def e_value_paths(diffs: np.ndarray, *, binary: bool, bet: str = "mixture",
                  max_bet: float = DEFAULT_MAX_BET) -> np.ndarray:
    """K_t after each pair for many comparisons at once: ``diffs`` [sims, T] of D = B − A in [−1, 1]
    (binary: −1, 0, +1; zeros are skipped as :class:`SequentialTest` skips them). The same arithmetic as
    :class:`SequentialTest`, vectorised for simulation (``bench/sequential_ab.py``, the tests)."""
    x = np.asarray(diffs, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"diffs: expected [sims, T], got shape {x.shape}")
    if bet not in BETS:
        raise ValueError(f"bet: {bet!r} is not one of {', '.join(BETS)}")
    used = (x != 0.0) if binary else np.ones_like(x, dtype=bool)
    if bet == "mixture":
        total = np.zeros_like(x)
        for lam in MIXTURE_GRID:
            total += np.exp(np.cumsum(np.where(used, np.log1p(lam * x), 0.0), axis=1))
        return total / len(MIXTURE_GRID)
    n_after = np.cumsum(used, axis=1)  # observations bet on, including this one
    sum_after = np.cumsum(np.where(used, x, 0.0), axis=1)
    mu_after = sum_after / (n_after + 1)
    resid_after = np.cumsum(np.where(used, (x - mu_after) ** 2, 0.0), axis=1)
    n_before = n_after - used
    sum_before = sum_after - np.where(used, x, 0.0)
    resid_before = resid_after - np.where(used, (x - mu_after) ** 2, 0.0)
    mu = sum_before / (n_before + 1)
    var = (1.0 + resid_before) / (n_before + 1)
    raw = mu / (var + mu * mu)
    lam_plus = np.clip(raw, 0.0, max_bet)
    lam_minus = np.clip(-raw, 0.0, max_bet)
    log_plus = np.cumsum(np.where(used, np.log1p(lam_plus * x), 0.0), axis=1)
    log_minus = np.cumsum(np.where(used, np.log1p(-lam_minus * x), 0.0), axis=1)
    return (np.exp(log_plus) + np.exp(log_minus)) / 2


def stopping_pairs(paths: np.ndarray, alpha: float) -> np.ndarray:
    """The pair (1-based) at which each comparison first reaches 1/α; 0 where it never does."""
    hit = paths >= 1.0 / alpha
    first = np.argmax(hit, axis=1) + 1
    return np.where(hit.any(axis=1), first, 0)


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def fixed_design_pairs_binary(p_a_only: float, p_b_only: float, alpha: float,
                              power: float = DEFAULT_POWER) -> float:
    """Pairs a two-sided McNemar test at level α needs for power ``power`` (Connor 1987):
    n = (z_{1−α/2} √ψ + z_{power} √(ψ − δ²))² / δ², ψ = P(discordant), δ = P(B only) − P(A only).
    ``inf`` when δ = 0 (no fixed n has power against no difference)."""
    psi, delta = p_a_only + p_b_only, p_b_only - p_a_only
    if delta == 0.0:
        return math.inf
    root = _z(1 - alpha / 2) * math.sqrt(psi) + _z(power) * math.sqrt(max(psi - delta * delta, 0.0))
    # The exact test cannot reject with fewer than d_min discordant pairs (2 * 0.5**d <= alpha), which the
    # normal approximation ignores at large effects: ask for at least d_min / psi pairs.
    d_min = math.ceil(math.log2(2 / alpha))
    return max(math.ceil(root * root / (delta * delta)), math.ceil(d_min / psi))


def fixed_design_pairs_mean(mean_diff: float, sd_diff: float, alpha: float, power: float = DEFAULT_POWER) -> float:
    """Pairs a two-sided paired z-test at level α needs for power ``power`` against mean difference
    ``mean_diff`` with standard deviation ``sd_diff``; ``inf`` when the mean is 0; at least 2 (a paired
    test needs a spread; the oracle against ``hold`` differs by exactly 1 on every pair)."""
    if mean_diff == 0.0:
        return math.inf
    return max(2, math.ceil(((_z(1 - alpha / 2) + _z(power)) * sd_diff / mean_diff) ** 2))


def fixed_design_from_pairs(pairs: list[tuple[float, float]], *, binary: bool, alpha: float,
                            power: float = DEFAULT_POWER) -> float:
    """The fixed design's n at the effect the observed pairs estimate (plug-in); ``inf`` with no effect."""
    if not pairs:
        return math.inf
    if binary:
        n = len(pairs)
        a_only = sum(1 for a, b in pairs if a and not b) / n
        b_only = sum(1 for a, b in pairs if b and not a) / n
        return fixed_design_pairs_binary(a_only, b_only, alpha, power)
    d = np.array([b - a for a, b in pairs], dtype=np.float64)
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    return fixed_design_pairs_mean(float(d.mean()), sd, alpha, power)
