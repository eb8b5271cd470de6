"""The RoboFollow policy server (spec section f): policies behind length-prefixed JSON on TCP.

Unlike the reference server (one connection at a time, one policy shared by all), every
connection is served in its own thread with its own policy session (``wire/sessions.py``), so
many evaluator workers can share one server without changing each other's scores, and an idle
client blocks nobody. Bounds a hostile or broken peer cannot stretch:

- ``max_connections`` open at once; the next one gets an error reply naming the limit, then a close;
- ``idle_timeout_s`` for the first byte of a request, then a deadline of ``frame_timeout_s`` for the
  whole frame (a trickle of bytes does not extend it);
- memory: a request body grows only as bytes arrive, its JSON structure is counted as it arrives
  (``framing.py``), and all connections together hold at most ``max_pending_bytes`` of
  request bodies (a frame waits for room within its own deadline).

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
from typing import Any

from robofollow_ros.policy.interface import Policy, PolicyError
from robofollow_ros.policy.wire.common import (
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    PeerClosedError,
    WireFormatError,
    describe_error,
)
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message
from robofollow_ros.policy.wire.robofollow.framing import (
    FrameBudget,
    MessageTooComplexError,
    check_frame_length,
    recv_body,
    recv_header,
    send_frame,
)
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session, SessionsBusyError

LOG = logging.getLogger(__name__)
DEFAULT_MAX_PENDING_BYTES = 512 * 1024 * 1024
#: How long a refused connection is kept to read the client's request and let it read the refusal.
REFUSAL_LINGER_S = 5.0
#: Refusals answered at once; a flood beyond this is closed without a message.
MAX_REFUSALS_IN_FLIGHT = 16


class ServerBusyError(PolicyError):
    """The server is at its connection limit."""


class RoboFollowTcpServer:
    """Serve a policy on ``host:port`` (port 0 picks a free port; see :attr:`address`).

    ``policy`` is a :class:`PolicySessions`, a factory (one policy per connection, e.g. a class), a
    policy declaring ``shareable = True`` (one object for all), or a plain policy object (one
    connection at a time; others are refused while it is in use).
    """

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8999, *,
                 debug: bool = False, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, backlog: int = 128,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections: expected >= 1, got {max_connections}")
        self.sessions = PolicySessions.coerce(policy)
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_connections = max_connections
        self._budget = FrameBudget(max_pending_bytes)
        self._listener = socket.create_server((host, port), family=socket.AF_INET, backlog=backlog,
                                              reuse_port=False)  # create_server sets SO_REUSEADDR
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()
        self._open: dict[socket.socket, threading.Thread] = {}
        self._refusals = threading.BoundedSemaphore(MAX_REFUSALS_IN_FLIGHT)
        self._thread: threading.Thread | None = None
        #: Counters for logs and tests.
        self.stats = {"connections": 0, "requests": 0, "errors": 0, "dropped": 0, "refused": 0,
                      "peak_connections": 0}

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

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
            if len(self._open) >= self.max_connections:
                self.stats["refused"] += 1
                if not self._refusals.acquire(blocking=False):
                    conn.close()
                    return
                busy = ServerBusyError(f"server busy: {len(self._open)} connections are open, the limit "
                                       f"(max_connections / --max-connections); try again later")
                threading.Thread(target=self._refuse, args=(conn, busy), name="robofollow-tcp-refusal",
                                 daemon=True).start()
                return
            thread = threading.Thread(target=self._run_connection, args=(conn,), name="robofollow-tcp-conn",
                                      daemon=True)
            self._open[conn] = thread
            self.stats["connections"] += 1
            self.stats["peak_connections"] = max(self.stats["peak_connections"], len(self._open))
        thread.start()

    def start(self) -> RoboFollowTcpServer:
        """Serve in a daemon thread; returns ``self`` so ``with RoboFollowTcpServer(...).start()`` reads well."""
        self._thread = threading.Thread(target=self.serve_forever, name="robofollow-tcp-server", daemon=True)
        self._thread.start()
        return self

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop accepting, cut every connection, close the listening socket and the sessions' policies."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(join_timeout_s)
        with self._lock:
            open_now = dict(self._open)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in open_now.values():
            thread.join(join_timeout_s)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        self.sessions.close()

    def __enter__(self) -> RoboFollowTcpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    # ------------------------------------------------------------------ one connection
    def _refuse(self, conn: socket.socket, busy: ServerBusyError) -> None:
        """Answer a connection over the limit with one error reply, then close without a reset."""
        try:
            with conn:
                send_frame(conn, self._error_reply(busy))
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(REFUSAL_LINGER_S)  # read (and drop) the request so closing sends no RST
                deadline = time.monotonic() + REFUSAL_LINGER_S
                while conn.recv(65536) and time.monotonic() < deadline:
                    pass
        except OSError:
            pass
        finally:
            self._refusals.release()

    def _run_connection(self, conn: socket.socket) -> None:
        session: Session | None = None
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = self._serve_connection(conn)
        finally:
            if session is not None:
                self.sessions.release(session)
            conn.close()
            with self._lock:
                self._open.pop(conn, None)

    def _serve_connection(self, conn: socket.socket) -> Session | None:
        session: Session | None = None
        while not self._stop.is_set():
            try:
                header = recv_header(conn, self.idle_timeout_s, self.frame_timeout_s)
            except WireFormatError as exc:  # bad length: drop silently, like the reference
                LOG.warning("dropping connection: %s", exc)
                self._count("dropped")
                return session
            except (PeerClosedError, OSError) as exc:  # timeouts included
                LOG.info("connection ended: %s", exc)
                return session
            if header is None:
                return session
            length, deadline = header
            with self._budget.hold(length, deadline) as admitted:
                if not admitted:
                    LOG.warning("dropping connection: no room for a %d-byte frame before its deadline", length)
                    self._count("dropped")
                    return session
                try:
                    body = recv_body(conn, length, deadline)
                except MessageTooComplexError as exc:
                    self._count("requests")
                    reply = self._error_reply(exc)
                except (PeerClosedError, OSError) as exc:
                    LOG.info("connection ended inside a frame: %s", exc)
                    return session
                else:
                    reply, session, keep_open = self._answer(body, session)
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

    def _error_reply(self, exc: BaseException) -> bytes:
        self._count("errors")
        error, trace = describe_error(exc, self.debug)
        LOG.warning("error reply: %s", error)
        return encode_message({"error": error, "traceback": trace})

    def _answer(self, body: bytearray, session: Session | None) -> tuple[bytes, Session | None, bool]:
        """(reply, the connection's session, keep the connection open)."""
        self._count("requests")
        try:
            request = decode_message(body)
            if session is None:
                try:
                    session = self.sessions.acquire()
                except SessionsBusyError as exc:
                    return self._error_reply(exc), None, False
            result = self._dispatch(session, request)
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
            session.set_instruction(obs or "")
            return None
        if cmd == "predict":
            if not isinstance(obs, dict):
                raise WireFormatError(f"request obs: predict needs an observation object, got {type(obs).__name__}")
            return session.predict(obs)
        raise PolicyError(f"request cmd: unknown command {cmd[:64]!r}; expected reset, set_instruction or predict")
