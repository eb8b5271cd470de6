"""Synchronous chunk execution: observe, predict, execute the first ``k`` rows, repeat.

This is RoboFollow's fixed runtime (``--actions-per-step``): the world waits while the policy thinks, so
latency costs nothing but wall time. The real-time executors live beside it (``realtime``).
"""

from __future__ import annotations

import collections

import numpy as np

from robofollow_ros.policy.interface import Observation, Policy, ValidatedPolicy


def check_k(actions_per_step: int) -> int:
    """``actions_per_step`` as given, or ``ValueError`` naming it (an integer >= 1)."""
    if isinstance(actions_per_step, bool) or not isinstance(actions_per_step, int) or actions_per_step < 1:
        raise ValueError(f"actions_per_step: expected an integer >= 1, got {actions_per_step!r}")
    return actions_per_step


class SyncChunkExecutor:
    """One ``predict`` per chunk; the caller executes the returned rows before observing again."""

    def __init__(self, policy: Policy, actions_per_step: int = 50) -> None:
        self.policy = ValidatedPolicy.wrap(policy)
        self.actions_per_step = check_k(actions_per_step)
        self._queue: collections.deque[np.ndarray] = collections.deque()

    def chunk_for(self, obs: Observation) -> np.ndarray:
        """``predict(obs)[:actions_per_step]`` (RoboFollow's ``--actions-per-step``)."""
        return self.policy.predict(obs)[: self.actions_per_step]

    def next_action(self, obs: Observation) -> np.ndarray:
        """For a fixed-rate loop: the next row, predicting a new chunk from ``obs`` when the last is used up."""
        if not self._queue:
            self._queue.extend(self.chunk_for(obs))
        return self._queue.popleft()

    def clear(self) -> None:
        """Forget queued rows (call at episode start)."""
        self._queue.clear()
