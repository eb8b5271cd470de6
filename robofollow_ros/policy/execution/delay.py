"""How many control steps a request takes: a sliding high percentile of measured latencies.

The delay decides how early the next chunk is requested and how many rows of the old plan a
real-time-chunking server must treat as frozen. A running maximum never forgets one slow call, and the
first call of a model (compilation, a cold cache) is often ten times the rest: LeRobot's RTC kept that
spike in its running max and skipped 21 of 30 actions of its first chunk (huggingface/lerobot PR 4223;
PR 4454 leaves cold start out). So: the first ``warmup`` calls are left out, and the estimate is the
``percentile`` (nearest rank) of the last ``window`` latencies, in steps of ``control_dt_s``, rounded up.
"""

from __future__ import annotations

import collections
import math


class DelayEstimator:
    """Latencies in, a delay in control steps out (0 before the first counted sample)."""

    def __init__(self, control_dt_s: float, *, window: int = 20, percentile: float = 90.0, warmup: int = 1) -> None:
        if not (isinstance(control_dt_s, int | float) and math.isfinite(control_dt_s) and control_dt_s > 0):
            raise ValueError(f"control_dt_s: expected a positive number of seconds, got {control_dt_s!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"latency_window: expected an integer >= 1, got {window!r}")
        if not (isinstance(percentile, int | float) and 0 < percentile <= 100):
            raise ValueError(f"latency_percentile: expected a number in (0, 100], got {percentile!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup: expected an integer >= 0, got {warmup!r}")
        self.control_dt_s = float(control_dt_s)
        self.percentile = float(percentile)
        self.warmup = warmup
        self.seen = 0  # every latency ever added, warm-up included
        self._window: collections.deque[float] = collections.deque(maxlen=window)

    def add(self, latency_s: float) -> bool:
        """Record one measured latency; False when it was a warm-up call, left out of the estimate."""
        self.seen += 1
        if self.seen <= self.warmup:
            return False
        self._window.append(max(0.0, float(latency_s)))
        return True

    @property
    def samples(self) -> tuple[float, ...]:
        """The latencies the estimate is taken over (oldest first)."""
        return tuple(self._window)

    @property
    def latency_s(self) -> float | None:
        """The nearest-rank ``percentile`` of the window: the ``ceil(p/100·n)``-th smallest; None when empty."""
        if not self._window:
            return None
        ordered = sorted(self._window)
        rank = max(1, math.ceil(self.percentile / 100.0 * len(ordered) - 1e-9))
        return ordered[min(rank, len(ordered)) - 1]

    @property
    def delay_steps(self) -> int:
        """``ceil(latency_s / control_dt_s)``; 0 with no counted sample yet."""
        latency = self.latency_s
        if latency is None:
            return 0
        return max(0, math.ceil(latency / self.control_dt_s - 1e-9))
