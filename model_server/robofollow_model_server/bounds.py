"""What keeps one client from stalling the model server: reclaimable connection slots and a memory budget.

This package imports nothing of robofollow_ros (it installs beside a model's own stack), so these are
the model server's own small copies of ``robofollow_ros/policy/wire/slots.py`` and ``budget.py``, kept to
the same rules (issue 36 item 7):

**Slots.** ``max_connections`` slots, each ``idle`` (waiting for a request's first byte), ``head``
(reading a request's opening bytes: a frame's length, the start of a websocket message) or ``busy``.
When all are taken a new connection reclaims the longest-idle one that has not asked for anything for
``head_grace_s`` since it connected (or one idle between requests for longer than ``protect_s``), else one
that has been opening a request for longer than ``head_grace_s`` (a trickle); only when none qualifies is
the newcomer refused. Reclaiming shuts the socket down: its handler wakes to an end of stream and ends.

**Memory.** One budget (``max_pending_bytes``) for the request bytes all connections hold at once,
charged as they arrive (TCP) or before a message is decoded (openpi; the websocket library holds at
most one unread message of ``max_message_bytes`` per connection beside it). A charge that finds no room
within ``wait_s`` is refused with :class:`MemoryBudgetError` (``server busy: ... memory budget ...``).

**The heap.** :func:`bound_heap` fixes glibc's mmap threshold at 256 KiB and its trim threshold at 1 MiB, so
freed request buffers go back to the system and RSS follows the budget (robofollow_ros's
``policy/wire/heap.py`` says why: glibc's dynamic threshold kept 32 MiB buffers in the threads' arenas).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

IDLE, HEAD, BUSY = "idle", "head", "busy"
#: A request's opening part that takes longer than this is a trickle (s); real clients send it at once.
DEFAULT_HEAD_GRACE_S = 1.0
MIB = 1 << 20
#: Bytes of requests all connections may hold at once.
DEFAULT_MAX_PENDING_BYTES = 512 * MIB
#: Seconds a request waits for room in the memory budget before it is refused.
DEFAULT_BUDGET_WAIT_S = 5.0


@dataclass(eq=False)
class Slot:
    """One connection's slot: its state, since when, and how to close it."""

    close: Callable[[], None]
    state: str = IDLE
    since: float = field(default_factory=time.monotonic)
    reclaimed: bool = False
    served: bool = False


class ConnectionSlots:
    """``limit`` slots; ``admit`` hands one out, reclaiming an idle or trickling one when all are taken."""

    def __init__(self, limit: int, head_grace_s: float = DEFAULT_HEAD_GRACE_S, protect_s: float = 0.0) -> None:
        if limit < 1:
            raise ValueError(f"max_connections: expected >= 1, got {limit}")
        self.limit, self.head_grace_s, self.protect_s = limit, head_grace_s, protect_s
        self._slots: list[Slot] = []
        self._lock = threading.Lock()
        self.reclaimed = 0

    def admit(self, close: Callable[[], None]) -> Slot | None:
        """A slot for a new connection (``close`` shuts it down), or None when none can be had."""
        victim: Slot | None = None
        with self._lock:
            if len(self._slots) >= self.limit:
                now = time.monotonic()
                idle = [s for s in self._slots if s.state == IDLE
                        and now - s.since > (self.protect_s if s.served else self.head_grace_s)]
                heads = [s for s in self._slots if s.state == HEAD and now - s.since > self.head_grace_s]
                victim = min(idle or heads, key=lambda s: s.since, default=None)
                if victim is None:
                    return None
                self._slots.remove(victim)
                victim.reclaimed = True
                self.reclaimed += 1
            slot = Slot(close)
            self._slots.append(slot)
        if victim is not None:
            with contextlib.suppress(OSError):
                victim.close()
        return slot

    def mark(self, slot: Slot, state: str) -> None:
        with self._lock:
            if slot.state == BUSY and state == IDLE:
                slot.served = True
            slot.state, slot.since = state, time.monotonic()

    def release(self, slot: Slot) -> None:
        with self._lock:
            if slot in self._slots:
                self._slots.remove(slot)

    def reclaimable(self) -> int:
        """Slots a newcomer could reclaim now (for stats and tests)."""
        with self._lock:
            now = time.monotonic()
            return sum(now - s.since > (self.protect_s if s.state == IDLE and s.served else self.head_grace_s)
                       for s in self._slots if s.state != BUSY)

    def count(self, state: str) -> int:
        """Slots in ``state`` now (for stats and tests)."""
        with self._lock:
            return sum(s.state == state for s in self._slots)

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)


class MemoryBudgetError(RuntimeError):
    """No room in the memory budget in time; the request was refused."""


class MemoryBudget:
    """Bytes that requests of all connections hold at once; ``charge`` waits (bounded) for room.

    The oldest request holding bytes always goes on: while it waits for room, a younger request that
    does not fit is refused at once (its caller releases what it holds), so many large requests that
    each hold part of the budget cannot all wait for one another until every one is refused.
    """

    def __init__(self, capacity: int = DEFAULT_MAX_PENDING_BYTES, wait_s: float = DEFAULT_BUDGET_WAIT_S) -> None:
        if capacity < MIB:
            raise ValueError(f"max_pending_bytes: {capacity} is below 1 MiB")
        self.capacity, self.wait_s = capacity, wait_s
        self.used = self.peak = self.refusals = 0
        self._cond = threading.Condition()
        self._holders: dict[object, int] = {}  # who holds bytes, oldest first
        self._oldest_waiting = False

    def charge(self, owner: object, n: int, deadline: float | None = None) -> None:
        """``owner`` takes ``n`` more bytes, or :class:`MemoryBudgetError` (it then holds nothing)."""
        until = time.monotonic() + self.wait_s
        if deadline is not None:
            until = min(until, deadline)
        with self._cond:
            while self.used + n > self.capacity:
                oldest = next(iter(self._holders), owner) is owner
                left = until - time.monotonic()
                if n > self.capacity or left <= 0 or (not oldest and self._oldest_waiting):
                    self.refusals += 1
                    self._drop(owner)
                    raise MemoryBudgetError(
                        f"server busy: no room within {self.wait_s:g} s in the server's memory budget for "
                        f"{n:,} more bytes of a request; requests of all connections hold {self.used / MIB:.1f} "
                        f"MiB of {self.capacity / MIB:.0f} MiB (--max-pending-bytes); try again later")
                self._oldest_waiting = self._oldest_waiting or oldest
                self._cond.notify_all()
                try:
                    self._cond.wait(min(left, 0.5))
                finally:
                    if oldest:
                        self._oldest_waiting = False
            self._holders[owner] = self._holders.get(owner, 0) + n
            self.used += n
            self.peak = max(self.peak, self.used)

    def release(self, owner: object) -> None:
        """``owner`` gives back everything it holds."""
        with self._cond:
            self._drop(owner)

    def _drop(self, owner: object) -> None:
        self.used -= self._holders.pop(owner, 0)
        self._cond.notify_all()


def bound_heap() -> bool:
    """Fix glibc's mmap (256 KiB) and trim (1 MiB) thresholds; False where that is not glibc. Process-wide."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return True  # the operator's setting wins
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(-3, 256 * 1024)) and bool(mallopt(-1, 1 << 20))  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
