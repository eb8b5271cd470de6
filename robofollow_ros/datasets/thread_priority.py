"""Keep an encoder's threads at ordinary priority: SVT-AV1, run as root, makes itself real-time.

SVT-AV1 (the ``libsvtav1`` in PyAV's wheels, v4.1) gives its threads, and the thread that opens the encoder,
``SCHED_FIFO`` priority 99 whenever it may, that is whenever the process runs as root (containers, rig PCs).
Its encoding then starves everything else on the machine: a ROS graph's nodes, the arm bridge's watchdog, the
other collection workers. ``OrdinaryPriority`` snapshots each thread's policy before the encoder opens and,
after each call into it, puts back every thread that became real-time: an existing thread to its old policy,
a new one to ``SCHED_OTHER``. Threads that were real-time before are left as they were.
"""

from __future__ import annotations

import os

REAL_TIME = frozenset(p for p in (getattr(os, "SCHED_FIFO", None), getattr(os, "SCHED_RR", None)) if p is not None)


def _threads() -> dict[int, tuple[int, int]]:
    """Each thread of this process: its id, scheduling policy and real-time priority (Linux only)."""
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return out
    for tid in tids:
        try:
            out[tid] = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
        except OSError:  # the thread ended meanwhile
            continue
    return out


class OrdinaryPriority:
    """``with OrdinaryPriority() as guard: ... encoder calls ...; guard.restore()`` after each of them."""

    def __init__(self) -> None:
        self.before: dict[int, tuple[int, int]] = {}
        self.demoted = 0

    def __enter__(self) -> OrdinaryPriority:
        self.before = _threads() if hasattr(os, "sched_setscheduler") else {}
        return self

    def restore(self) -> None:
        """Put back every thread that turned real-time since ``__enter__``."""
        if not hasattr(os, "sched_setscheduler"):
            return
        for tid, (policy, _) in _threads().items():
            if policy not in REAL_TIME:
                continue
            old_policy, old_priority = self.before.get(tid, (os.SCHED_OTHER, 0))
            if old_policy in REAL_TIME:
                continue  # real-time before the encoder: someone chose it
            try:
                os.sched_setscheduler(tid, old_policy, os.sched_param(old_priority))
                self.demoted += 1
            except OSError:
                continue

    def __exit__(self, *exc: object) -> None:
        self.restore()
