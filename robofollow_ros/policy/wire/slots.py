"""Connection slots that idle sockets cannot hold: a server's ``max_connections``, reclaimable.

Issue 36: 64 silent sockets held every slot of a server for its 30-minute idle timeout, and 64 sockets
trickling a header byte every few seconds held them as long as they kept trickling. A slot here is in
one of three states, and when all are taken a new connection reclaims one instead of being refused:

* **idle** — waiting for the first byte of the connection's next request (a socket that never sent
  anything, or a keep-alive connection between requests). The longest idle one is reclaimed first: a
  client that is not asking for anything loses nothing but a connection it can reopen. A connection
  that has never sent anything is left ``head_grace_s`` to send its first request (a real client sends
  it right after connecting: a burst of clients over the limit must not reclaim each other's fresh
  connections before they ask).
* **head** — reading a request's opening part (an HTTP request line and headers, a frame's length
  prefix): a few bytes that a real client sends at once. One that has been at it for longer than
  ``head_grace_s`` is trickling, and is reclaimed next (the frame deadline would cut it anyway).
* **busy** — a request whose body is arriving, or being answered: never reclaimed.

A server whose sessions live on the connection (TCP, openpi, vla-eval, the model server) passes
``protect_s``: an idle connection that has been answered before keeps its slot until it has been idle that
long (its episode is not cut between two requests; issue 36 "no client can touch another's session"),
while sockets that never asked for anything are reclaimed at once.

Only when every slot is busy (or a fresh head, or protected) is the newcomer refused. Reclaiming calls the slot's
``close`` (shut the socket down), which wakes its handler with an end of stream; the handler then
ends as for any closed connection and ``release``s the slot (twice is harmless).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

IDLE, HEAD, BUSY = "idle", "head", "busy"
#: A request's opening part that takes longer than this is a trickle (s); real clients send it at once.
DEFAULT_HEAD_GRACE_S = 1.0


@dataclass(eq=False)
class Slot:
    """One connection's slot: its state, since when, and how to close it."""

    close: Callable[[], None]
    state: str = IDLE
    since: float = field(default_factory=time.monotonic)
    reclaimed: bool = False
    #: Answered at least once: an idle connection between two requests of a client, not a silent socket.
    served: bool = False


class ConnectionSlots:
    """``limit`` slots; ``admit`` hands one out, reclaiming an idle or trickling one when all are taken."""

    def __init__(self, limit: int, head_grace_s: float = DEFAULT_HEAD_GRACE_S, protect_s: float = 0.0) -> None:
        if limit < 1:
            raise ValueError(f"max_connections: expected >= 1, got {limit}")
        self.limit = limit
        self.head_grace_s = head_grace_s
        self.protect_s = protect_s
        self._slots: list[Slot] = []
        self._lock = threading.Lock()
        #: Connections admitted, refused, and slots reclaimed (idle, trickling), for stats and tests.
        self.admitted = self.refused = self.reclaimed_idle = self.reclaimed_head = 0
        self.peak = 0

    def admit(self, close: Callable[[], None]) -> Slot | None:
        """A slot for a new connection (``close`` shuts it down), or None when every slot is busy."""
        victim: Slot | None = None
        with self._lock:
            if len(self._slots) >= self.limit:
                victim = self._victim(time.monotonic())
                if victim is None:
                    self.refused += 1
                    return None
                self._slots.remove(victim)
                victim.reclaimed = True
                if victim.state == IDLE:
                    self.reclaimed_idle += 1
                else:
                    self.reclaimed_head += 1
            slot = Slot(close)
            self._slots.append(slot)
            self.admitted += 1
            self.peak = max(self.peak, len(self._slots))
        if victim is not None:
            with contextlib.suppress(OSError):
                victim.close()
        return slot

    def _reclaimable_idle(self, slot: Slot, now: float) -> bool:
        return slot.state == IDLE and now - slot.since > (self.protect_s if slot.served else self.head_grace_s)

    def reclaimable(self) -> int:
        """Slots a newcomer could reclaim now (for stats and tests)."""
        with self._lock:
            now = time.monotonic()
            return sum(self._reclaimable_idle(s, now) or (s.state == HEAD and now - s.since > self.head_grace_s)
                       for s in self._slots)

    def _victim(self, now: float) -> Slot | None:
        idle = [s for s in self._slots if self._reclaimable_idle(s, now)]
        if idle:
            return min(idle, key=lambda s: s.since)
        trickling = [s for s in self._slots if s.state == HEAD and now - s.since > self.head_grace_s]
        return min(trickling, key=lambda s: s.since) if trickling else None

    def mark(self, slot: Slot, state: str, served: bool = False) -> None:
        """The connection is now ``IDLE`` (waiting for a request), in its ``HEAD`` or ``BUSY``; ``served``: treat
        it as a client between requests from now on (GR00T: its ZMTP handshake is done)."""
        with self._lock:
            if (slot.state == BUSY and state == IDLE) or served:
                slot.served = True
            slot.state, slot.since = state, time.monotonic()

    def release(self, slot: Slot) -> None:
        with self._lock:
            if slot in self._slots:
                self._slots.remove(slot)

    def count(self, state: str) -> int:
        """Slots in ``state`` now (for stats and tests)."""
        with self._lock:
            return sum(s.state == state for s in self._slots)

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)
