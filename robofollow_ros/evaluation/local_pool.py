"""``--backend local``: trials in supervised worker processes on this machine.

``multiprocessing.Pool`` waits forever for the result of a worker that died (abort, SIGKILL, the
kernel's OOM killer), so a run could hang with nothing recorded. Here the driver watches each
worker's pipe *and* its process sentinel: a worker that dies fails only the trial it held, with
the reason (exit status or signal; an OOM kill is named as such), and a fresh worker takes its
place. A worker whose trial overruns ``trial_deadline_s`` (a policy stuck in C code where the
per-call timeout cannot reach) is killed the same way. Workers die with the driver
(``PR_SET_PDEATHSIG``), so a killed evaluator leaves no orphans behind.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from robofollow_ros.evaluation.episode import unexecuted_result
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.evaluation.trial_worker import TrialOutcome, WorkerSpec, replacement
from robofollow_ros.evaluation.worker_errors import (
    START_DIED,
    WorkerStartError,
    death_reason,
    oom_kills,
    start_failure,
)
from robofollow_ros.rundir.errors import is_unusable


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    """A worker process: build the worker, then run trials sent by the driver until told to stop."""
    _die_with_parent()
    if os.getppid() == 1:  # the driver died before we could ask to die with it
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; it stops us
    from robofollow_ros.evaluation.trial_worker import TrialWorker

    try:
        worker = TrialWorker(spec)
    except BaseException as exc:
        conn.send(("init_failed", *start_failure(exc)))
        return
    conn.send(("ready", os.getpid(), worker.info))
    try:
        while True:
            try:
                key = conn.recv()
            except EOFError:
                return
            if key is None:
                return
            try:
                outcome = worker.run(key)
            except OSError as exc:
                if is_unusable(exc):  # the run's output (a --record MCAP) cannot take writes: not a bug
                    conn.send(("unusable", key, exc.errno, exc.strerror, exc.filename))
                else:
                    conn.send(("error", key, traceback.format_exc()))
                return
            except Exception:  # a simulator or scorer error: a bug, the run stops with its traceback
                conn.send(("error", key, traceback.format_exc()))
                return
            conn.send(("done", outcome))
            if outcome.retire:
                return
    finally:
        worker.close()


@dataclass
class _Slot:
    proc: Any
    conn: Connection
    key: TrialKey | None = None
    ready: bool = False
    started: float = 0.0
    oom_before: int | None = None
    overdue: bool = False
    #: What the worker reported when it was ready (``TrialWorker.info``).
    info: dict[str, Any] = field(default_factory=dict)


class LocalPool:
    """Supervised worker processes; :meth:`results` yields one :class:`TrialOutcome` per key, as they finish."""

    def __init__(self, spec: WorkerSpec, workers: int, trial_deadline_s: float) -> None:
        self.spec, self.workers, self.trial_deadline_s = spec, workers, trial_deadline_s
        # spawn: SAPIEN and DDS do not survive fork; each worker imports and builds its own world.
        self._ctx = mp.get_context("spawn")
        self._slots: list[_Slot] = []
        self.replaced = 0

    def _start(self, replacing: bool = False) -> _Slot:
        ours, theirs = self._ctx.Pipe(duplex=True)
        spec = replacement(self.spec) if replacing else self.spec
        # Not daemonic, so that a policy may start processes of its own; close() and PDEATHSIG end workers.
        proc = self._ctx.Process(target=worker_main, args=(theirs, spec), name="robofollow-worker", daemon=False)
        proc.start()
        theirs.close()
        slot = _Slot(proc, ours)
        self._slots.append(slot)
        return slot

    def start(self, trials: int) -> dict[str, Any]:
        """Start the workers ``trials`` trials need and wait until one is ready (its policy built, a remote one
        reached); returns what it reported (``TrialWorker.info``). Before the run directory is opened: a
        policy that cannot be built fails here (``WorkerStartError``) and the run leaves nothing behind."""
        for _ in range(min(self.workers, trials) - len(self._slots)):
            self._start()
        while self._slots:
            ready = wait([s.conn for s in self._slots] + [s.proc.sentinel for s in self._slots])
            for slot in list(self._slots):
                if slot.conn not in ready and slot.proc.sentinel not in ready:
                    continue
                for outcome in self._service(slot, collections.deque()):  # nothing is assigned: no outcome
                    raise RuntimeError(f"a worker reported trial {outcome.key.trial_id} before it was given one")
                if slot.ready:
                    return slot.info
        raise WorkerStartError(START_DIED, "no worker could start")

    def running(self) -> list[tuple[TrialKey, float]]:
        """The trials under way and when each began (``time.monotonic``): what a progress line waits for."""
        return [(slot.key, slot.started) for slot in list(self._slots) if slot.key is not None]

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]:
        pending = collections.deque(keys)
        for _ in range(min(self.workers, len(pending)) - len(self._slots)):
            self._start()
        for slot in [s for s in self._slots if s.ready and s.key is None]:  # ready since start(): no waiting
            if pending:
                self._assign(slot, pending)
        while self._slots and (pending or any(s.key is not None for s in self._slots)):
            ready = wait([s.conn for s in self._slots] + [s.proc.sentinel for s in self._slots], timeout=1.0)
            for slot in list(self._slots):
                if slot.conn in ready or slot.proc.sentinel in ready:
                    yield from self._service(slot, pending)
            self._kill_overdue()
            for slot in [s for s in self._slots if s.ready and s.key is None]:
                if pending:
                    self._assign(slot, pending)
                else:
                    self._stop(slot)

    def _service(self, slot: _Slot, pending: collections.deque[TrialKey]) -> Iterator[TrialOutcome]:
        """Read what a worker sent; if it died, fail its trial and start another in its place."""
        while slot.conn.poll():
            try:
                message = slot.conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "ready":
                slot.ready, slot.info = True, message[2]
            elif kind == "done":
                outcome: TrialOutcome = message[1]
                slot.key = None
                yield outcome
                if outcome.retire:
                    self._retire(slot, pending)
                    return
            elif kind == "init_failed":
                self.close()
                raise WorkerStartError(message[1], message[2])
            elif kind == "error":
                self.close()
                raise RuntimeError(f"worker failed on trial {message[1].trial_id}:\n{message[2]}")
            elif kind == "unusable":  # the driver reports it as the run directory's (exit 5); the trial is lost
                self.close()
                raise OSError(message[2], message[3], message[4])
        if slot.proc.is_alive():
            return
        slot.proc.join(5)
        reason = death_reason(slot.proc.exitcode, slot.oom_before)
        if slot.overdue:
            reason = f"no result within {self.trial_deadline_s:g} s; the worker was killed"
        if not slot.ready:
            self.close()
            raise WorkerStartError(START_DIED, f"a worker process {reason} while starting (loading the policy "
                                           "and the simulator)")
        dead_key = slot.key
        self._discard(slot)
        if dead_key is not None:
            task = _registry().eval_task(dead_key.task_id)
            yield TrialOutcome(dead_key, unexecuted_result(task, f"worker process {reason}"))
        if pending:
            self.replaced += 1
            self._start(replacing=True)

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.key is not None and not slot.overdue and now - slot.started > self.trial_deadline_s:
                slot.overdue = True
                slot.proc.kill()  # its sentinel fires; _service reports the trial on the next turn

    def _assign(self, slot: _Slot, pending: collections.deque[TrialKey]) -> None:
        key = pending.popleft()
        try:
            slot.conn.send(key)
        except OSError:  # it died while idle: the trial goes back, the sentinel reports the death
            pending.appendleft(key)
            return
        slot.key, slot.started, slot.oom_before = key, time.monotonic(), oom_kills()

    def _retire(self, slot: _Slot, pending: collections.deque[TrialKey]) -> None:
        slot.proc.join(30)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join(5)
        self._discard(slot)
        if pending:
            self.replaced += 1
            self._start(replacing=True)

    def _stop(self, slot: _Slot) -> None:
        with contextlib.suppress(OSError):
            slot.conn.send(None)
        slot.proc.join(30)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join(5)
        self._discard(slot)

    def _discard(self, slot: _Slot) -> None:
        slot.conn.close()
        if slot in self._slots:
            self._slots.remove(slot)

    def close(self) -> None:
        """Stop every worker now (a failed or interrupted run); finished trials were already handed over."""
        for slot in list(self._slots):
            if slot.proc.is_alive():
                slot.proc.kill()
            slot.proc.join(5)
            self._discard(slot)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _registry() -> Any:
    from robofollow_ros.benchmark import default_registry

    return default_registry()
