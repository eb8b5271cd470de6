"""What every protocol's policy server shares: its settings, its counters and its life cycle.

Each protocol folder (``robofollow/``, ``openpi/``, ``vlaeval/``, ``act/``, ``gr00t/``) keeps how it
listens, reads and answers; this is the rest, written once so that the five servers take the same
arguments, check them the same way and are started and stopped the same way:

* ``robofollow serve`` hands every server the same keyword arguments (``debug``, ``metadata``,
  ``idle_timeout_s``, ``frame_timeout_s``, ``max_connections``, ``max_pending_bytes``,
  ``budget_wait_s``); a bad bound is refused here, naming the argument and the value, before a socket
  is bound.
* ``start()`` serves in a daemon thread named after the protocol and returns the server, so
  ``with Server(...).start() as server:`` reads well; leaving the block calls ``stop()``.
* ``slots`` (``wire/slots.py``) are the ``max_connections`` connection slots: idle and trickling
  connections give theirs up to a newcomer; a connection answered before is protected between its
  requests for ``frame_timeout_s`` (its session lives on the connection). ``admit_connection`` hands
  one out and counts it.
* the memory budget (``budget.py``) across connections, and glibc's heap set so that RSS follows it
  (``heap.py``);
* ``stats`` counts what happened (connections, requests, errors, refusals ...) under one lock, for logs
  and tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.wire.budget import DEFAULT_BUDGET_WAIT_S, DEFAULT_MAX_PENDING_BYTES, MemoryBudget
from robofollow_ros.policy.wire.common import DEFAULT_FRAME_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_CONNECTIONS
from robofollow_ros.policy.wire.heap import bound_heap
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions
from robofollow_ros.policy.wire.slots import ConnectionSlots, Slot

if TYPE_CHECKING:  # typing.Self is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Self


class ServerSettings(TypedDict, total=False):
    """The keyword arguments every server takes (a protocol's server: ``**settings: Unpack[ServerSettings]``)."""

    debug: bool  # error replies carry the server's traceback
    metadata: dict[str, Any] | None  # what served
    idle_timeout_s: float  # longest wait for a connection's next request
    frame_timeout_s: float  # deadline for a request once its first byte came
    max_connections: int  # served at once; the next one is refused, naming the limit
    max_pending_bytes: int  # the memory budget of all connections together
    budget_wait_s: float  # how long a request waits for room in that budget


class PolicyServer:
    """The shared part of a policy server; a protocol's server adds ``serve_forever`` and ``stop``.

    ``policy`` is a :class:`PolicySessions`, a factory (one policy per connection, e.g. a class), a
    policy declaring ``shareable = True`` (one object for all), or a plain policy object (one connection
    at a time; others are refused while it is in use). ``stats`` names the counters this server keeps.
    """

    #: The name of the serving thread (``start``), which shows in thread dumps and ``py-spy``.
    thread_name: ClassVar[str] = "policy-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, *, stats: tuple[str, ...],
                 debug: bool = False, metadata: dict[str, Any] | None = None,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 budget_wait_s: float = DEFAULT_BUDGET_WAIT_S) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections: expected >= 1, got {max_connections}")
        if not budget_wait_s >= 0:
            raise ValueError(f"budget_wait_s: expected >= 0 seconds, got {budget_wait_s!r}")
        for name, seconds in (("idle_timeout_s", idle_timeout_s), ("frame_timeout_s", frame_timeout_s)):
            if not seconds > 0:
                raise ValueError(f"{name}: expected > 0 seconds, got {seconds!r}")
        bound_heap()  # freed request buffers go back to the system: RSS follows the budget (wire/heap.py)
        self.sessions = PolicySessions.coerce(policy)
        self.debug = debug
        #: What served, for logs and for the protocols that send it (openpi, vla-eval, gr00t).
        self.metadata = dict(metadata or {})
        self.idle_timeout_s = float(idle_timeout_s)
        self.frame_timeout_s = float(frame_timeout_s)
        self.max_connections = max_connections
        self.budget_wait_s = float(budget_wait_s)
        #: The memory budget of all connections together (``wire/budget.py``).
        self.memory = MemoryBudget(max_pending_bytes)
        #: The connection slots, reclaimable from idle and trickling connections (``wire/slots.py``).
        self.slots = ConnectionSlots(max_connections, protect_s=self.frame_timeout_s)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.stats: dict[str, int] = dict.fromkeys(stats, 0)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def admit_connection(self, close: Callable[[], None]) -> Slot | None:
        """A slot for a new connection (``close`` shuts it down when reclaimed), or None: refuse it."""
        slot = self.slots.admit(close)
        with self._lock:
            if slot is None:
                self.stats["refused"] = self.stats.get("refused", 0) + 1
            else:
                self.stats["connections"] = self.stats.get("connections", 0) + 1
                self.stats["peak_connections"] = max(self.stats.get("peak_connections", 0), len(self.slots))
        return slot

    # ------------------------------------------------------------------ life cycle
    def serve_forever(self) -> None:
        """Serve until :meth:`stop`, in the calling thread."""
        raise NotImplementedError

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop accepting, end the connections, close the sessions' policies."""
        raise NotImplementedError

    def start(self) -> Self:
        """Serve in a daemon thread; returns ``self`` so ``with Server(...).start() as server:`` reads well."""
        self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _join_serving(self, timeout_s: float) -> None:
        """Wait for the serving thread to end (not from inside it: a handler may call ``stop``)."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
