"""Dynamic batching: concurrent ``predict`` requests of many connections become one ``predict_batch``.

One GPU model serving many simulation workers spends most of its time on per-call overhead unless
requests are batched. A shareable policy that offers ``predict_batch(observations) -> chunks``
(a list of ``[T, 14]`` arrays or one ``[B, T, 14]`` array, in request order) gets up to
``max_batch_size`` requests at a time: the batch closes when it is full or ``max_wait_ms`` after
its first request arrived, whichever comes first. Each chunk is validated on its own, so one bad
row fails only its own request.

Time bounds mirror :class:`~robofollow_ros.policy.guard.TimeoutGuardedPolicy`: a caller waits at
most ``timeout_s``; while a batch call has overrun that, new requests are refused at once with
:class:`~robofollow_ros.policy.guard.PolicyBusyError` instead of piling up behind it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.policy.guard import PolicyBusyError, PolicyTimeoutError
from robofollow_ros.policy.interface import Observation, PolicyOutputError, validate_actions


@dataclass(frozen=True)
class BatchSettings:
    max_batch_size: int = 8
    max_wait_ms: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.max_batch_size, bool) or not isinstance(self.max_batch_size, int) \
                or self.max_batch_size < 2:
            raise ValueError(f"--batch-size: expected an integer >= 2 to batch, got {self.max_batch_size!r}")
        if not 0 <= self.max_wait_ms <= 10_000:
            raise ValueError(f"--batch-wait-ms: expected 0..10000 ms, got {self.max_wait_ms!r}")


@dataclass
class _Request:
    obs: Observation
    future: Future[np.ndarray]
    queued_at: float


class DynamicBatcher:
    """Collects requests from many threads and runs ``predict_batch`` on one worker thread."""

    def __init__(self, predict_batch: Callable[[list[Observation]], Any], settings: BatchSettings,
                 timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        self.settings = settings
        self.timeout_s = float(timeout_s)
        self._predict_batch = predict_batch
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._running_since: float | None = None
        #: Sizes of the batches run so far (bounded history), for logs, tests and benchmarks.
        self.batch_sizes: deque[int] = deque(maxlen=10_000)
        threading.Thread(target=self._work, name="policy-batcher", daemon=True).start()

    def predict(self, obs: Observation) -> np.ndarray:
        future: Future[np.ndarray] = Future()
        with self._cond:
            if self._closed:
                raise PolicyBusyError("policy predict: the server is shutting down")
            running = self._running_since
            if running is not None and time.monotonic() - running > self.timeout_s:
                raise PolicyBusyError(f"policy predict: refused, a batch call has been running for more than "
                                      f"{self.timeout_s:g} s")
            self._queue.append(_Request(obs, future, time.monotonic()))
            self._cond.notify()
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeoutError:
            future.cancel()  # still queued: dropped before it runs
            raise PolicyTimeoutError(f"policy predict: no answer within {self.timeout_s:g} s") from None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _next_batch(self) -> list[_Request] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if self._closed and not self._queue:
                return None
            closes_at = self._queue[0].queued_at + self.settings.max_wait_ms / 1000.0
            while len(self._queue) < self.settings.max_batch_size and not self._closed:
                remaining = closes_at - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[_Request] = []
            while self._queue and len(batch) < self.settings.max_batch_size:
                request = self._queue.popleft()
                if request.future.set_running_or_notify_cancel():  # skip callers that gave up
                    batch.append(request)
            self._running_since = time.monotonic() if batch else None
            return batch

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            if not batch:
                continue
            try:
                chunks = self._predict_batch([r.obs for r in batch])
                self._deliver(batch, chunks)
            except BaseException as exc:  # the policy's failure is every waiting caller's answer
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
            finally:
                self.batch_sizes.append(len(batch))
                with self._cond:
                    self._running_since = None

    @staticmethod
    def _deliver(batch: Sequence[_Request], chunks: Any) -> None:
        try:
            count = len(chunks)
        except TypeError:
            raise PolicyOutputError(f"predict_batch output: {type(chunks).__name__} is not a sequence of "
                                    f"{len(batch)} chunks") from None
        if count != len(batch):
            raise PolicyOutputError(f"predict_batch output: {count} chunks for {len(batch)} observations")
        for request, chunk in zip(batch, chunks, strict=True):
            try:
                request.future.set_result(validate_actions(chunk))
            except PolicyOutputError as exc:
                request.future.set_exception(exc)
