"""The RoboFollow policy server (spec section f): policies behind length-prefixed JSON on TCP.

Unlike the reference server (one connection at a time, one policy shared by all), every
connection is served in its own thread with its own policy session (``wire/sessions.py``), so
many evaluator workers can share one server without changing each other's scores, and an idle
client blocks nobody. Bounds a hostile or broken peer cannot stretch (issue 23: one client cannot
stall the others):

- ``max_connections`` connection slots (``wire/slots.py``): when all are taken a new connection
  reclaims the longest-idle one that never asked for anything (or one idle between requests for
  longer than ``frame_timeout_s``), else one that has trickled a frame's 4-byte length for over a
  second (issue 36: 64 silent sockets held every slot for the idle timeout); only when every slot is
  receiving or answering a request is the newcomer refused. A refused connection gets the framed
  error reply naming the limit *before* the close, even in a burst: one refusal thread answers them all without
  blocking, half-closes, reads (and drops) what the client sends until it hangs up or
  ``REFUSAL_LINGER_S`` pass, and only then closes, so the close carries no reset;
- ``idle_timeout_s`` for the first byte of a request, then a deadline of ``frame_timeout_s`` for the
  whole frame (a trickle of bytes does not extend it);
- memory (``wire/budget.py``): all connections together hold at most ``max_pending_bytes``, charged
  as bytes *arrive* (a header announcing 128 MiB holds nothing until the bytes come) plus what
  decoding will build, counted before it is built; large frames leave a reserve to ordinary
  requests; a request that finds no room within ``budget_wait_s`` gets an error reply
  (``server busy: ... memory budget ...``), the connection stays in step and open. A request
  body's JSON structure is also counted as it arrives (``framing.py``);
- every observation is checked against the contract (``policy/observation.py``) before the policy
  sees it; ``set_instruction`` text too;
- a per-connection session whose call timed out is dropped: the connection's next request gets a
  fresh session (``PolicySessions.drop_if_stuck``).

Wire behaviour a reference peer can notice is unchanged: a bad length drops the connection
silently; a malformed body or a failing policy gets an error reply (``traceback`` one line unless
``debug``) and the connection stays open.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from robofollow_ros.policy.interface import Policy, PolicyError
from robofollow_ros.policy.observation import validate_instruction, validate_observation
from robofollow_ros.policy.wire.budget import SMALL_REQUEST_BYTES, Hold, MemoryBudgetError, decode_cost
from robofollow_ros.policy.wire.common import PeerClosedError, WireFormatError, describe_error
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message
from robofollow_ros.policy.wire.robofollow.framing import (
    MessageTooComplexError,
    check_frame_length,
    encode_frame,
    recv_body,
    recv_header,
    send_frame,
)
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session, SessionsBusyError
from robofollow_ros.policy.wire.slots import BUSY, HEAD, IDLE, Slot

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
__all__ = ["RoboFollowTcpServer", "ServerBusyError"]
#: Longest a refused connection is kept after its refusal, reading (and dropping) what the client
#: sends until it hangs up, so that closing sends no reset.
REFUSAL_LINGER_S = 5.0
#: Refused connections kept lingering at once; past this the oldest (already answered) is closed.
MAX_REFUSALS_LINGERING = 1024


class ServerBusyError(PolicyError):
    """The server is at its connection limit."""


class _Refusals:
    """Answers refused connections, any number at once, from one thread that never blocks.

    Each socket is made non-blocking and gets the whole framed reply (a few hundred bytes, which an
    empty send buffer always takes), then a half-close (FIN); what the client sends is read and
    dropped until it hangs up or ``linger_s`` pass, and only then is the socket closed, so the
    client reads the refusal instead of a reset.
    """

    def __init__(self, linger_s: float = REFUSAL_LINGER_S, max_lingering: int = MAX_REFUSALS_LINGERING) -> None:
        self.linger_s = linger_s
        self.max_lingering = max_lingering
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, bytes]] = []
        #: socket -> [bytes still to send, deadline]; in arrival order.
        self._open: OrderedDict[socket.socket, list[Any]] = OrderedDict()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="robofollow-tcp-refusals", daemon=True)
        self._thread.start()

    def refuse(self, conn: socket.socket, reply: bytes) -> None:
        with self._lock:
            if self._closed:
                conn.close()
                return
            self._incoming.append((conn, reply))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(10)

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    incoming, self._incoming = self._incoming, []
                    closed = self._closed
                if closed:
                    break
                for conn, reply in incoming:
                    self._start(conn, reply)
                now = time.monotonic()
                for conn in [c for c, (_, deadline) in self._open.items() if deadline <= now]:
                    self._finish(conn)
                timeout = min((d for _, d in self._open.values()), default=now + 60) - now
                for key, events in self._selector.select(max(0.0, timeout)):
                    if key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                        continue
                    if isinstance(key.fileobj, socket.socket) and key.fileobj in self._open:
                        self._serve(key.fileobj, events)
        finally:
            for conn in list(self._open):
                self._finish(conn)
            with self._lock:
                for conn, _ in self._incoming:
                    conn.close()
                self._incoming = []
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _start(self, conn: socket.socket, reply: bytes) -> None:
        while len(self._open) >= self.max_lingering:
            self._finish(next(iter(self._open)))  # the oldest: answered long ago
        conn.setblocking(False)
        frame = encode_frame(reply)
        self._open[conn] = [frame, time.monotonic() + self.linger_s]
        try:
            self._selector.register(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)
        except (OSError, ValueError):
            self._open.pop(conn, None)
            conn.close()
            return
        self._serve(conn, selectors.EVENT_WRITE)

    def _serve(self, conn: socket.socket, events: int) -> None:
        state = self._open[conn]
        try:
            if state[0] and events & selectors.EVENT_WRITE:
                sent = conn.send(state[0])
                state[0] = state[0][sent:]
                if not state[0]:
                    conn.shutdown(socket.SHUT_WR)
                    self._selector.modify(conn, selectors.EVENT_READ)
            if events & selectors.EVENT_READ:
                for _ in range(16):  # a client that keeps sending does not starve the others
                    data = conn.recv(65536)
                    if not data:  # the client hung up: nothing unread, the close is clean
                        if not state[0]:
                            self._finish(conn)
                        else:
                            self._selector.modify(conn, selectors.EVENT_WRITE)
                        return
        except BlockingIOError:
            return
        except OSError:
            self._finish(conn)

    def _finish(self, conn: socket.socket) -> None:
        self._open.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn)
        conn.close()


class RoboFollowTcpServer(PolicyServer):
    """Serve a policy on ``host:port`` (port 0 picks a free port; see :attr:`address`).

    ``policy`` and the keyword arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`);
    ``metadata`` is for logs only, since this protocol has no metadata message. ``stats["refused"]`` counts
    connections over the cap; the charges the memory budget refused are ``memory.refusals``.
    """

    thread_name = "robofollow-tcp-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8999, *,
                 backlog: int = 128, **settings: Unpack[ServerSettings]) -> None:
        super().__init__(policy, stats=("connections", "requests", "errors", "dropped", "refused",
                                        "peak_connections"), **settings)
        self._listener = socket.create_server((host, port), family=socket.AF_INET, backlog=backlog,
                                              reuse_port=False)  # create_server sets SO_REUSEADDR
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._open: dict[socket.socket, threading.Thread] = {}
        self._refusals = _Refusals()

    # ------------------------------------------------------------------ lifecycle
    def serve_forever(self) -> None:
        """Accept connections, each served in its own thread, until :meth:`stop`."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop.is_set():
                ready = [key.fileobj for key, _ in sel.select()]
                if self._wake_r in ready or self._stop.is_set():
                    break
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    continue
                self._admit(conn)

    def _admit(self, conn: socket.socket) -> None:
        with self._lock:
            if self._stop.is_set():
                conn.close()
                return
            slot = self.slots.admit(lambda: _shut(conn))
            if slot is None:
                self.stats["refused"] += 1
                busy = ServerBusyError(f"server busy: {self.max_connections} connections are open, the limit "
                                       "(max_connections / --max-connections), none idle long enough to be "
                                       "reclaimed; try again later")
                self._refusals.refuse(conn, self._error_reply(busy, lock=False))
                return
            thread = threading.Thread(target=self._run_connection, args=(conn, slot), name="robofollow-tcp-conn",
                                      daemon=True)
            self._open[conn] = thread
            self.stats["connections"] += 1
            self.stats["peak_connections"] = max(self.stats["peak_connections"], len(self.slots))
        thread.start()

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop accepting, cut every connection, close the listening socket and the sessions' policies."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._join_serving(join_timeout_s)
        with self._lock:
            open_now = dict(self._open)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in open_now.values():
            thread.join(join_timeout_s)
        self._refusals.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        self.sessions.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    # ------------------------------------------------------------------ one connection
    def _run_connection(self, conn: socket.socket, slot: Slot) -> None:
        session: Session | None = None
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = self._serve_connection(conn, slot)
        finally:
            self.slots.release(slot)
            if session is not None:
                self.sessions.release(session)
            conn.close()
            with self._lock:
                self._open.pop(conn, None)

    def _serve_connection(self, conn: socket.socket, slot: Slot) -> Session | None:
        session: Session | None = None
        while not self._stop.is_set():
            self.slots.mark(slot, IDLE)
            try:
                header = recv_header(conn, self.idle_timeout_s, self.frame_timeout_s,
                                     on_first_byte=lambda: self.slots.mark(slot, HEAD))
            except WireFormatError as exc:  # bad length: drop silently, like the reference
                LOG.warning("dropping connection: %s", exc)
                self._count("dropped")
                return session
            except (PeerClosedError, OSError) as exc:  # timeouts included (and a slot reclaimed mid-header)
                LOG.info("connection ended: %s", exc)
                return session
            if header is None or slot.reclaimed:
                return session
            self.slots.mark(slot, BUSY)
            length, deadline = header
            with self.memory.hold(large=length > SMALL_REQUEST_BYTES) as hold:
                try:
                    body = recv_body(conn, length, deadline, hold=hold, budget_wait_s=self.budget_wait_s)
                except (MessageTooComplexError, MemoryBudgetError) as exc:
                    self._count("requests")
                    reply = self._error_reply(exc)
                except (PeerClosedError, OSError) as exc:
                    LOG.info("connection ended inside a frame: %s", exc)
                    return session
                else:
                    reply, session, keep_open = self._answer(body, session, hold)
                    del body  # an idle connection must not keep its last request's memory
                    if not keep_open:
                        with contextlib.suppress(OSError):
                            send_frame(conn, reply)
                        return session
            try:
                send_frame(conn, reply)
            except OSError as exc:
                LOG.info("client went away before the reply: %s", exc)
                return session
        return session

    def _error_reply(self, exc: BaseException, lock: bool = True) -> bytes:
        if lock:
            self._count("errors")
        else:  # the caller holds the lock
            self.stats["errors"] += 1
        error, trace = describe_error(exc, self.debug)
        LOG.warning("error reply: %s", error)
        return encode_message({"error": error, "traceback": trace})

    def _answer(self, body: bytearray, session: Session | None, hold: Hold) -> tuple[bytes, Session | None, bool]:
        """(reply, the connection's session, keep the connection open)."""
        self._count("requests")
        charged = 0

        def charge_decoding(containers: int, commas: int) -> None:
            # Called by the decoder once the counts passed the JSON limits, before anything is built
            # (over the limits: refused by count, nothing charged); again, for the difference, if
            # it falls back from the skeleton to the whole text.
            nonlocal charged
            cost = decode_cost(len(body), containers, commas, copies=2)
            if cost > charged:
                if not hold.charge(cost - charged, self.budget_wait_s):
                    raise hold.refusal(f"decoding a {len(body):,}-byte request", self.budget_wait_s)
                charged = cost

        try:
            request = decode_message(body, before_parse=charge_decoding)
            if session is None:
                try:
                    session = self.sessions.acquire()
                except SessionsBusyError as exc:
                    return self._error_reply(exc), None, False
            try:
                result = self._dispatch(session, request)
            finally:
                session = self.sessions.drop_if_stuck(session)  # a timed-out session: the next request starts clean
            reply = encode_message({"res": result})
            check_frame_length(len(reply))
            return reply, session, True
        except Exception as exc:
            return self._error_reply(exc), session, True

    @staticmethod
    def _dispatch(session: Session, request: Any) -> Any:
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            raise WireFormatError("request: expected an object with a string 'cmd'")
        cmd, obs = request["cmd"], request.get("obs")
        if cmd == "reset":
            session.reset()
            return None
        if cmd == "set_instruction":
            if obs is not None and not isinstance(obs, str):
                raise WireFormatError(f"request obs: set_instruction needs a string, got {type(obs).__name__}")
            session.set_instruction(validate_instruction(obs or ""))
            return None
        if cmd == "predict":
            if not isinstance(obs, dict):
                raise WireFormatError(f"request obs: predict needs an observation object, got {type(obs).__name__}")
            return session.predict(validate_observation(obs))
        raise PolicyError(f"request cmd: unknown command {cmd[:64]!r}; expected reset, set_instruction or predict")


def _shut(conn: socket.socket) -> None:
    """Reclaim a connection's slot: its handler wakes to an end of stream and ends."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
