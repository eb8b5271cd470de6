"""Bounding a policy's calls in time, so a hung model cannot hang a server (issue 6, robustness).

Python cannot kill a thread, so a call that overruns keeps running in its worker thread; the
guard answers the caller with :class:`PolicyTimeoutError` at once and answers every further call
with :class:`PolicyBusyError` until the stuck call returns. The server stays responsive and the
caller learns exactly why.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from robofollow_ros.policy.interface import Observation, Policy, PolicyError, close_policy


class PolicyTimeoutError(PolicyError, TimeoutError):
    """The policy did not answer within its timeout."""


class PolicyBusyError(PolicyError):
    """An earlier call timed out and is still running inside the policy."""


class TimeoutGuardedPolicy:
    """Runs every call of ``inner`` in a worker thread and waits at most ``timeout_s`` for it."""

    def __init__(self, inner: Policy, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        self.inner = inner
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._stuck: tuple[str, Future[Any]] | None = None
        # One persistent *daemon* worker: calls stay in order, and a stuck call can neither block
        # the caller nor keep the process alive at exit (a ThreadPoolExecutor would be joined).
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        threading.Thread(target=self._work, name="policy-call", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

    def _call(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            if self._stuck is not None:
                stuck_name, stuck = self._stuck
                if not stuck.done():
                    raise PolicyBusyError(f"policy {name}: refused, an earlier {stuck_name} call timed out "
                                          f"after {self.timeout_s:g} s and is still running")
                self._stuck = None
            future: Future[Any] = Future()
            self._jobs.put((future, fn, args))
            try:
                return future.result(timeout=self.timeout_s)
            except FutureTimeoutError:
                self._stuck = (name, future)
                raise PolicyTimeoutError(f"policy {name}: no answer within {self.timeout_s:g} s") from None

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until a timed-out call has finished; True when idle."""
        with self._lock:
            stuck = self._stuck
        if stuck is None:
            return True
        try:
            stuck[1].exception(timeout=timeout_s)
        except FutureTimeoutError:
            return False
        return True

    def reset(self) -> None:
        self._call("reset", self.inner.reset)

    def set_instruction(self, text: str) -> None:
        self._call("set_instruction", self.inner.set_instruction, text)

    def predict(self, obs: Observation) -> Any:
        return self._call("predict", self.inner.predict, obs)

    def close(self) -> None:
        self._jobs.put(None)
        close_policy(self.inner)
