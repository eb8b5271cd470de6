"""Any RoboFollow policy behind openpi's websocket protocol, so openpi clients can drive it.

Per connection the server sends the metadata frame, then answers each msgpack ALOHA observation
with ``{"actions": [T, 14], "policy_timing": {"infer_ms"}, "server_timing": {"infer_ms",
"prev_total_ms"}}``. A failure is answered as openpi does: a text frame, then a close with
INTERNAL_ERROR; the text is one line unless ``debug``. ``GET /healthz`` answers 200 "OK" for
readiness probes. Binds 127.0.0.1 by default.

Many clients at once (issue 16): each connection has its own policy session
(``wire/sessions.py``); its episode starts (``reset`` + ``set_instruction``) on its first
request and whenever its prompt changes, so one connection's prompt never reaches another's
policy. Bounds: ``max_connections`` (the next connection is closed with 1013 TRY_AGAIN_LATER and a
reason naming the limit), ``idle_timeout_s`` for the next message, a deadline of
``frame_timeout_s`` for a message once its first bytes arrived (a trickle does not extend it; 1008
POLICY_VIOLATION), ``max_message_bytes`` per message (1009) and ``OPENPI_MAX_OBJECTS`` msgpack
values per message.
"""

from __future__ import annotations

import http
import logging
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.wire.common import (
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    WireFormatError,
    describe_error,
)
from robofollow_ros.policy.wire.openpi.codec import OPENPI_MAX_MESSAGE_BYTES, packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import from_openpi_observation
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session

LOG = logging.getLogger(__name__)
INTERNAL_ERROR_REASON = "Internal server error. Traceback included in previous frame."
#: How often a waiting handler looks whether a message has started arriving (its deadline starts then).
_POLL_S = 0.25


def _message_in_progress(ws: ServerConnection) -> bool:
    """True while part of a message has arrived: bytes of an unfinished frame, or earlier fragments.

    Reads the protocol's buffer and fragment size (websockets 13-17); if a future version renames
    them this answers False and only the idle timeout bounds a trickle (test_protocol_serving
    would notice).
    """
    protocol = ws.protocol
    reader = getattr(protocol, "reader", None)
    if reader is not None and len(getattr(reader, "buffer", b"")) > 0:
        return True
    return bool(getattr(protocol, "current_size", None) or getattr(protocol, "cur_size", None))


class OpenpiPolicyServer:
    """Serve a policy as an openpi websocket policy server on ``host:port`` (0 = any free port).

    ``policy`` is what :class:`~robofollow_ros.policy.wire.robofollow.server.RoboFollowTcpServer` takes too: a
    :class:`PolicySessions`, a factory, a shareable policy, or one plain policy object.
    """

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8000,
                 *, debug: bool = False, metadata: dict[str, Any] | None = None,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_message_bytes: int = OPENPI_MAX_MESSAGE_BYTES) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections: expected >= 1, got {max_connections}")
        self.sessions = PolicySessions.coerce(policy)
        self.debug = debug
        self.metadata = dict(metadata or {})
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._open = 0
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=max_message_bytes,
                                     process_request=self._health)
        self.address: tuple[str, int] = self._server.socket.getsockname()[:2]
        self._thread: threading.Thread | None = None
        self.stats = {"connections": 0, "requests": 0, "errors": 0, "refused": 0, "timeouts": 0,
                      "peak_connections": 0}

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    # ------------------------------------------------------------------ lifecycle
    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> OpenpiPolicyServer:
        self._thread = threading.Thread(target=self.serve_forever, name="openpi-server", daemon=True)
        self._thread.start()
        return self

    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._server.shutdown()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(join_timeout_s)
        self.sessions.close()

    def __enter__(self) -> OpenpiPolicyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return self._open

    # ------------------------------------------------------------------ handlers
    @staticmethod
    def _health(connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        with self._lock:
            admitted = self._open < self.max_connections
            if admitted:
                self._open += 1
                self.stats["connections"] += 1
                self.stats["peak_connections"] = max(self.stats["peak_connections"], self._open)
            else:
                self.stats["refused"] += 1
        if not admitted:
            ws.close(CloseCode.TRY_AGAIN_LATER, f"server busy: {self.max_connections} connections are open, "
                                                "the limit (--max-connections); try again later")
            return
        session: Session | None = None
        try:
            session = self._serve(ws)
        finally:
            if session is not None:
                self.sessions.release(session)
            with self._lock:
                self._open -= 1

    def _receive(self, ws: ServerConnection) -> str | bytes | None:
        """The next message, or None once the connection is closed (by the peer, idleness or a deadline)."""
        idle_until = time.monotonic() + self.idle_timeout_s
        message_until: float | None = None
        while True:
            now = time.monotonic()
            if message_until is None and _message_in_progress(ws):
                message_until = now + self.frame_timeout_s
            until = idle_until if message_until is None else message_until
            if now >= until:
                if message_until is None:
                    ws.close(CloseCode.NORMAL_CLOSURE, f"idle for {self.idle_timeout_s:g} s")
                else:
                    self._count("timeouts")
                    ws.close(CloseCode.POLICY_VIOLATION, f"message not complete within {self.frame_timeout_s:g} s")
                return None
            try:
                return ws.recv(timeout=min(_POLL_S, until - now))
            except TimeoutError:
                continue
            except ConnectionClosed:
                return None

    def _serve(self, ws: ServerConnection) -> Session | None:
        session: Session | None = None
        try:
            ws.send(packb(self.metadata))
        except ConnectionClosed:
            return None
        prompt_in_use: str | None = None
        prev_total_ms: float | None = None
        while (message := self._receive(ws)) is not None:
            start = time.perf_counter()
            self._count("requests")
            try:
                if isinstance(message, str):
                    raise WireFormatError("message: expected a binary msgpack frame, got a text frame")
                obs, prompt = from_openpi_observation(unpackb(message))
                del message
                if session is None:
                    session = self.sessions.acquire()
                if prompt != prompt_in_use:
                    session.reset()
                    session.set_instruction(prompt)
                    prompt_in_use = prompt
                infer_start = time.perf_counter()
                actions = session.predict(obs)
                infer_ms = 1000 * (time.perf_counter() - infer_start)
                timing: dict[str, float] = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                ws.send(packb({"actions": actions, "policy_timing": {"infer_ms": infer_ms},
                               "server_timing": timing}))
            except ConnectionClosed:
                return session
            except Exception as exc:
                self._count("errors")
                error, trace = describe_error(exc, self.debug)
                LOG.warning("error reply: %s", error)
                try:
                    ws.send(trace)  # one line unless debug; openpi clients raise it
                    ws.close(CloseCode.INTERNAL_ERROR, INTERNAL_ERROR_REASON)
                except ConnectionClosed:
                    pass
                return session
            prev_total_ms = 1000 * (time.perf_counter() - start)
        return session
