"""The first asynchronous executor: rows stamped with the control step of their observation.

Superseded by :class:`~robofollow_ros.policy.execution.realtime.RealtimeChunkExecutor`, kept for its
callers. :class:`AsyncChunkExecutor` requests the next chunk while the current one runs; rows carry the
control step they are meant for (the step of the observation plus their row index), and rows whose step
has passed when the chunk arrives are dropped — also those of steps on which the arm only held, which
makes the first chunk after a slow cold start jump ahead (the real-time executor drops only rows that
were executed meanwhile). It is ROS-free and driven by an explicit step counter, never by a wall clock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

from robofollow_ros.policy.execution.sync import check_k
from robofollow_ros.policy.interface import Observation, Policy, ValidatedPolicy, validate_actions


@dataclass(frozen=True)
class StampedAction:
    """One action row and the control step it is meant to be executed at."""

    step: int
    row: np.ndarray


@dataclass
class AsyncStats:
    requests: int = 0
    chunks: int = 0
    stale_rows_dropped: int = 0
    starved_steps: int = 0  # steps with no fresh row: the caller holds its last target


Submit = Callable[[Observation], "Future[np.ndarray]"]


class AsyncChunkExecutor:
    """Keeps a queue of stamped rows and a single request in flight.

    Call :meth:`next_action` once per control step with the step index and the latest
    observation. It harvests a finished request (stamping its first ``actions_per_step`` rows from
    the observation's step on, dropping the stale ones and replacing queued rows with the newer
    plan), starts a new request when at most ``request_ahead`` rows remain, and returns the row for
    this step, or ``None`` when none is available (hold position).

    ``submit`` starts a prediction and returns a Future; by default a one-thread pool runs
    ``policy.predict``. Tests pass their own submit to decide when each Future completes.
    """

    def __init__(self, policy: Policy | None = None, actions_per_step: int = 50, *, request_ahead: int | None = None,
                 submit: Submit | None = None) -> None:
        self.actions_per_step = check_k(actions_per_step)
        self.request_ahead = actions_per_step // 2 if request_ahead is None else request_ahead
        if not 0 <= self.request_ahead < actions_per_step:
            raise ValueError(f"request_ahead: expected 0..{actions_per_step - 1}, got {request_ahead!r}")
        self._pool: ThreadPoolExecutor | None = None
        if submit is None:
            if policy is None:
                raise ValueError("policy: required when no submit function is given")
            validated = ValidatedPolicy.wrap(policy)
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-request")
            pool = self._pool

            def submit(obs: Observation) -> Future[np.ndarray]:
                return pool.submit(validated.predict, obs)

        self._submit = submit
        self._queue: collections.deque[StampedAction] = collections.deque()
        self._pending: tuple[int, Future[np.ndarray]] | None = None
        self._last_step: int | None = None
        self.stats = AsyncStats()

    @property
    def in_flight(self) -> bool:
        return self._pending is not None

    def wait_for_request(self, timeout_s: float) -> bool:
        """Block until the request in flight (if any) has finished; False on timeout.

        For callers that want to hand the CPU to the model, and for tests that must not sleep.
        """
        if self._pending is None:
            return True
        done, _ = wait([self._pending[1]], timeout=timeout_s)
        return bool(done)

    def queued_steps(self) -> list[int]:
        return [a.step for a in self._queue]

    def next_action(self, step: int, obs: Observation) -> np.ndarray | None:
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"step: {step} does not advance past the previous step {self._last_step}")
        self._last_step = step
        self._harvest(step)
        self._drop_before(step)
        if self._pending is None and len(self._queue) <= self.request_ahead:
            self._pending = (step, self._submit(obs))
            self.stats.requests += 1
            self._harvest(step)  # a synchronous submit has already finished
            self._drop_before(step)
        if self._queue and self._queue[0].step == step:
            return self._queue.popleft().row
        self.stats.starved_steps += 1
        return None

    def _harvest(self, step: int) -> None:
        if self._pending is None or not self._pending[1].done():
            return
        obs_step, future = self._pending
        self._pending = None
        rows = validate_actions(future.result())[: self.actions_per_step]  # a failed request raises here
        self.stats.chunks += 1
        fresh = [StampedAction(obs_step + i, row) for i, row in enumerate(rows) if obs_step + i >= step]
        self.stats.stale_rows_dropped += len(rows) - len(fresh)
        if fresh:
            self._queue = collections.deque(fresh)  # the newer plan wins over what was queued

    def _drop_before(self, step: int) -> None:
        while self._queue and self._queue[0].step < step:
            self._queue.popleft()
            self.stats.stale_rows_dropped += 1

    def reset(self) -> None:
        """Start a new episode: forget queued rows and ignore the request in flight."""
        self._queue.clear()
        self._pending = None
        self._last_step = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
