"""One memory budget per server: the bytes that requests of all its connections may hold at once.

Both servers charge it as bytes *arrive*, never as a peer announces them: a header that promises
128 MiB and a trickle (or nothing) holds only what was delivered, so idle announcers cannot lock
anyone out (issue 23). What is charged, and released once the request is answered:

- the request's bytes as they are read from the socket (TCP: each chunk of the frame body before
  it is kept; openpi, vla-eval: each read the websocket library makes, twice, before it is made, so the bytes in the
  library's buffers are inside the budget too);
- before decoding, what decoding will build: :func:`decode_cost` (copies of the payload plus a
  fixed cost per container / element the message holds, counted before anything is built).

Large requests (over :data:`SMALL_REQUEST_BYTES` announced) may together hold at most
``capacity - reserve``: the ``reserve`` (an eighth of the budget, at most 64 MiB) is kept for
ordinary requests (an observation is about 1 MB), so large frames, stalled or not, never crowd
them out. A charge that finds no room waits at most a short, bounded time
(:data:`DEFAULT_BUDGET_WAIT_S`, and never past the request's own deadline); then the request is
refused with :class:`MemoryBudgetError` (``server busy: ... memory ...``) and everything it held
is released. The accounting (``used``, ``peak``, ``large_used``, ``large_peak``) never exceeds
the capacity, and tests assert on it.

**The oldest request always goes on.** Charging as bytes arrive lets many large requests each hold
part of the budget and then all wait for room that only their own completion would free: on a
loaded machine twelve concurrent 3.6 MB requests on a 24 MiB budget were all refused together when
their waits ran out. So the request that began holding bytes first has priority: while it waits
for room, a younger request may take bytes only if the room the oldest wants stays free, and is
otherwise refused at once (releasing what it holds), so the oldest one finishes. Its wait may run
past its own limit by as much again while requests that gave way are still letting go of their
bytes (an openpi connection releases them once its client has stopped sending). One request at a
time always makes progress, whatever the others do.
"""

from __future__ import annotations

import threading
import time

from robofollow_ros.policy.interface import PolicyError

MIB = 1 << 20
#: Bytes of requests all connections of a server may hold at once (``max_pending_bytes``).
DEFAULT_MAX_PENDING_BYTES = 512 * MIB
#: Requests announced larger than this are "large" and share ``capacity - reserve``.
SMALL_REQUEST_BYTES = 8 * MIB
#: Most of the budget kept for ordinary (small) requests.
MAX_RESERVE_BYTES = 64 * MIB
#: Seconds a charge waits for room before its request is refused.
DEFAULT_BUDGET_WAIT_S = 5.0
#: Charged per container or msgpack value a decoder may build (a small dict or list is 64-100 B).
OBJECT_BYTES = 128
#: Charged per JSON element (a comma): a float and its list slot.
ELEMENT_BYTES = 32


class MemoryBudgetError(PolicyError):
    """The server's memory budget had no room for a request in time; the request was refused."""


def decode_cost(raw_bytes: int, objects: int, elements: int = 0, copies: int = 1) -> int:
    """Bytes decoding a message of ``raw_bytes`` may build: ``copies`` of the payload (JSON: the text
    and the base64-decoded arrays; msgpack: the bytes of its ``bin`` values) plus its objects."""
    return copies * raw_bytes + objects * OBJECT_BYTES + elements * ELEMENT_BYTES


def _mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"


class MemoryBudget:
    """The shared account; :meth:`hold` opens one request's (or connection's) share of it."""

    def __init__(self, capacity: int, reserve: int | None = None) -> None:
        if capacity < 1 * MIB:
            raise ValueError(f"max_pending_bytes: {capacity} is below 1 MiB")
        self.capacity = capacity
        self.reserve = min(MAX_RESERVE_BYTES, capacity // 8) if reserve is None else reserve
        if not 0 <= self.reserve < capacity:
            raise ValueError(f"reserve: {self.reserve} is outside 0..{capacity - 1}")
        self.used = self.large_used = self.peak = self.large_peak = 0
        #: Holds open now (requests being received or answered; openpi: connections).
        self.holds = 0
        #: Charges refused for want of room.
        self.refusals = 0
        self._cond = threading.Condition()
        #: Holds that hold bytes now, in the order they began to (oldest first); what waiting ones want.
        self._busy: dict[Hold, None] = {}
        self._wants: dict[Hold, int] = {}
        #: Holds refused to make way for the oldest that still hold bytes (they are letting go).
        self._giving_way: set[Hold] = set()

    @property
    def large_capacity(self) -> int:
        return self.capacity - self.reserve

    def hold(self, large: bool = False) -> Hold:
        with self._cond:
            self.holds += 1
        return Hold(self, large)

    def describe(self) -> str:
        with self._cond:
            return (f"requests of all connections hold {_mib(self.used)} of its {_mib(self.capacity)} "
                    f"(max_pending_bytes)")

    # ------------------------------------------------------------------ used by Hold only
    def _fits(self, n: int, large: bool) -> bool:
        return self.used + n <= self.capacity and (not large or self.large_used + n <= self.large_capacity)

    def _blocker(self, hold: Hold) -> Hold | None:
        """The oldest request, when it is older than ``hold`` and waiting for room: ``hold`` gives way to it."""
        oldest = next(iter(self._busy), None)
        return oldest if oldest is not None and oldest is not hold and oldest in self._wants else None

    def _fits_beside(self, n: int, large: bool, blocker: Hold) -> bool:
        """Whether ``n`` bytes fit and still leave the waiting oldest request the room it wants."""
        want = self._wants[blocker]
        large_want = want if blocker.large else 0
        return (self.used + n + want <= self.capacity
                and (not large or self.large_used + n + large_want <= self.large_capacity))

    def _charge(self, hold: Hold, n: int, until: float | None, grace_until: float | None) -> bool:
        large, held = hold.large, hold.held
        if held + n > (self.large_capacity if large else self.capacity):
            with self._cond:
                self.refusals += 1
            return False  # could never fit, however long it waited
        with self._cond:
            while True:
                blocker = self._blocker(hold)
                if blocker is None and self._fits(n, large):
                    break
                if blocker is not None:
                    if self._fits_beside(n, large, blocker):
                        break
                    self.refusals += 1
                    if held:
                        self._giving_way.add(hold)
                    return False  # give way: releasing what it holds lets the oldest one finish
                now = time.monotonic()
                if self._giving_way and grace_until is not None and now < grace_until:
                    remaining: float | None = grace_until - now  # others are still letting go for us
                else:
                    remaining = None if until is None else until - now
                if remaining is not None and remaining <= 0:
                    self.refusals += 1
                    return False
                self._wants[hold] = n
                if next(iter(self._busy), None) is hold:
                    self._cond.notify_all()  # younger waiters re-check: they give way to this one
                try:
                    self._cond.wait(remaining)
                finally:
                    del self._wants[hold]
            self._busy.setdefault(hold)
            self.used += n
            self.peak = max(self.peak, self.used)
            if large:
                self.large_used += n
                self.large_peak = max(self.large_peak, self.large_used)
            return True

    def _release(self, hold: Hold, n: int, close: bool) -> None:
        with self._cond:
            self.used -= n
            if hold.large:
                self.large_used -= n
            if close:
                self.holds -= 1
            if close or hold.held == 0:
                self._busy.pop(hold, None)  # it holds nothing now: its place in the queue goes too
                self._giving_way.discard(hold)
            self._cond.notify_all()


class Hold:
    """What one request (TCP) or one connection (openpi) holds of a :class:`MemoryBudget`.

    Not thread-safe on its own: one thread charges and releases it, except :meth:`close`, which
    may come from any thread once (it releases whatever is still held).
    """

    def __init__(self, budget: MemoryBudget, large: bool) -> None:
        self.budget = budget
        self.large = large
        self.held = 0
        self._lock = threading.Lock()
        self._closed = False

    def charge(self, n: int, wait_s: float, deadline: float | None = None) -> bool:
        """Take ``n`` bytes, waiting at most ``wait_s`` (and never past ``deadline``) for room."""
        if n <= 0:
            return True
        now = time.monotonic()
        until, grace_until = now + wait_s, now + 2 * wait_s
        if deadline is not None:
            until, grace_until = min(until, deadline), min(grace_until, deadline)
        with self._lock:
            if self._closed:
                return False
        if not self.budget._charge(self, n, until, grace_until):
            return False
        with self._lock:
            if not self._closed:
                self.held += n
                return True
        self.budget._release(self, n, close=False)  # closed while waiting: give it back
        return False

    def release(self, n: int | None = None) -> None:
        """Give back ``n`` bytes (all by default; never more than held)."""
        with self._lock:
            n = self.held if n is None else max(0, min(n, self.held))
            self.held -= n
        if n:
            self.budget._release(self, n, close=False)

    def close(self) -> None:
        """Release everything; later charges fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            n, self.held = self.held, 0
        self.budget._release(self, n, close=True)

    def refusal(self, what: str, wait_s: float) -> MemoryBudgetError:
        """The error a refused request gets: what it needed and what the budget held."""
        return MemoryBudgetError(f"server busy: no room within {wait_s:g} s in the server's memory budget for "
                                 f"{what}; {self.budget.describe()}; try again later")

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
