"""Bounding a policy's calls in time, so a hung model cannot hang a server (issue 6, robustness).

Python cannot kill a thread, so a call that overruns keeps running in its worker thread; the
guard answers the caller with :class:`PolicyTimeoutError` at once and answers every further call
with :class:`PolicyBusyError` until the stuck call returns. The server stays responsive and the
caller learns exactly why. Its users (``robofollow eval`` and ``serve``, ``policy_node``) then carry
on with a fresh policy (:func:`close_guarded` leaves the stuck one to its thread).

A caller that must stop waiting before the timeout (``policy_node`` when its trial is stopped) sets
:attr:`TimeoutGuardedPolicy.abandon_when`: the call in flight is then abandoned as a timed-out one is
(:class:`PolicyAbandonedError`), and the policy counts as stuck until that call returns.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from robofollow_ros.policy.interface import (
    Observation,
    Policy,
    PolicyError,
    PolicyWrapper,
    RtcHint,
    accepts_rtc,
    close_policy,
)
from robofollow_ros.policy.remote import is_remote

#: The official evaluate.py default for ``--policy-timeout`` (seconds), which covers a first model
#: compilation: ``robofollow eval``, ``robofollow serve`` and ``policy_node`` (``policy_timeout_s``) share it.
DEFAULT_POLICY_TIMEOUT_S = 300.0
#: How often a wait that may be abandoned looks at ``abandon_when`` (seconds).
ABANDON_POLL_S = 0.05
#: Names of the threads that run policy calls (and closes): ``robofollow serve`` joins them before it exits,
#: except those whose name ends in :data:`STUCK_SUFFIX` (a call that already timed out: nobody waits for it).
WORKER_THREAD_PREFIX = "policy-"
STUCK_SUFFIX = "-stuck"


class PolicyTimeoutError(PolicyError, TimeoutError):
    """The policy did not answer within its timeout."""


class PolicyBusyError(PolicyError):
    """An earlier call timed out and is still running inside the policy."""


class PolicyAbandonedError(PolicyError):
    """The caller stopped waiting for the call (its ``abandon_when`` event was set); the call runs on."""


def guarded_kwargs(spec: str, kwargs: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """``kwargs`` for ``load_policy(spec, ...)`` under a guard of ``timeout_s``: a remote client's own socket
    timeout follows the guard's, as evaluate.py passes it to its client, set a little above it so that the
    whole-call bound is the one that speaks (one reason)."""
    out = dict(kwargs)
    if is_remote(spec):  # a remote client has a socket timeout of its own
        out.setdefault("timeout_s", timeout_s * 1.1 + 1.0)
    return out


class TimeoutGuardedPolicy(PolicyWrapper):
    """Runs every call of ``inner`` in a worker thread and waits at most ``timeout_s`` for it.

    ``interface.receives_privileged`` reads through it to the policy's own wrapper; an RTC hint passes
    through it (``interface.accepts_rtc``)."""

    forwards_rtc = True

    def __init__(self, inner: Policy, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        self.inner = inner
        self.timeout_s = float(timeout_s)
        #: Set by the caller: once this event is set, the call in flight is abandoned (see the module doc).
        self.abandon_when: threading.Event | None = None
        self._lock = threading.Lock()
        self._stuck: tuple[str, Future[Any]] | None = None
        # One persistent *daemon* worker: calls stay in order, and a stuck call can neither block
        # the caller nor keep the process alive at exit (a ThreadPoolExecutor would be joined).
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._worker = threading.Thread(target=self._work, name="policy-call", daemon=True)
        self._worker.start()

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
            started = time.monotonic()
            self._jobs.put((future, fn, args))
            if not self._wait(future, started + self.timeout_s):
                self._stuck = (name, future)
                self._worker.name = f"policy-call{STUCK_SUFFIX}"  # not waited for at shutdown
                if time.monotonic() - started < self.timeout_s:
                    raise PolicyAbandonedError(f"policy {name}: abandoned after {time.monotonic() - started:.1f} s "
                                               "(the caller stopped waiting)")
                raise PolicyTimeoutError(f"policy {name}: no answer within {self.timeout_s:g} s")
            return future.result()

    def _wait(self, future: Future[Any], deadline: float) -> bool:
        """Wait for ``future`` until ``deadline`` or until ``abandon_when`` is set; True when it is done."""
        abandon = self.abandon_when
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (abandon is not None and abandon.is_set()):
                return future.done()
            try:  # an exception of the call itself (a TimeoutError too) is the caller's, via result()
                future.exception(timeout=remaining if abandon is None else min(remaining, ABANDON_POLL_S))
                return True
            except FutureTimeoutError:
                continue

    @property
    def stuck(self) -> bool:
        """True while a call that timed out or was abandoned is still running inside the policy."""
        return not self.wait_idle(0.0)

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

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> Any:
        if rtc is not None and accepts_rtc(self.inner):
            return self._call("predict", lambda o: self.inner.predict(o, rtc=rtc), obs)
        return self._call("predict", self.inner.predict, obs)

    def close(self) -> None:
        self._jobs.put(None)
        close_policy(self.inner)


def close_guarded(policy: TimeoutGuardedPolicy) -> None:
    """Close ``policy`` now, or, while a call is stuck inside it, in the background without waiting on it
    (its close may wait for that call)."""
    if policy.stuck:
        threading.Thread(target=policy.close, name=f"policy-close{STUCK_SUFFIX}", daemon=True).start()
    else:
        policy.close()
