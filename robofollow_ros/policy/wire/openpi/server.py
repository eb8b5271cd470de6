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

One memory bound across connections (issue 23, ``wire/budget.py``): every read the websocket
library makes from a socket is charged to the server's budget (``max_pending_bytes``) as it
arrives, attributed to the frames the library parses from it, and released when the handler is
done with their message (control frames at once); before a message is unpacked, what unpacking
will build is charged too (:func:`~robofollow_ros.policy.wire.budget.decode_cost` of its msgpack
values, counted first). The library queues at most one unread message per connection
(``max_queue=1``). A request that finds no room within ``budget_wait_s`` is refused the openpi way:
a text frame (``server busy: ... memory budget ...``; openpi clients raise it), then a close with
1013 TRY_AGAIN_LATER; what the client still sends is read and dropped, so the close carries no
reset. A connection whose opening handshake found no room is closed like one over the cap: 1013
and the reason, right after the handshake. The converted observation is checked against the
contract (``policy/observation.py``) before the policy sees it; a per-connection session whose call
timed out is released with the connection (an error closes it), so it never serves again.
"""

from __future__ import annotations

import collections
import http
import logging
import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import Protocol, State
from websockets.sync.server import Server, ServerConnection, serve

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.observation import validate_observation
from robofollow_ros.policy.wire.budget import Hold, MemoryBudgetError, decode_cost
from robofollow_ros.policy.wire.common import WireFormatError, describe_error
from robofollow_ros.policy.wire.openpi.codec import (
    OPENPI_MAX_MESSAGE_BYTES,
    check_object_count,
    packb,
    unpackb,
)
from robofollow_ros.policy.wire.openpi.observation import from_openpi_observation
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session
from robofollow_ros.policy.wire.websocket_receive import receive_message

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
INTERNAL_ERROR_REASON = "Internal server error. Traceback included in previous frame."
#: Longest a connection refused for memory is kept reading (and dropping) what its client still sends.
REFUSAL_LINGER_S = 5.0
#: A refused client that has sent nothing for this long has sent its whole request (openpi is lock-step).
_REFUSAL_QUIET_S = 0.2
#: The close reason of a memory refusal (a close reason has at most 123 bytes; the text frame says more).
MEMORY_REFUSAL_REASON = "server busy: memory budget full (max_pending_bytes); try again later"
_DATA_OPCODES = frozenset({Opcode.TEXT, Opcode.BINARY, Opcode.CONT})


def _frame_wire_bytes(payload: int) -> int:
    """Bytes a client frame with ``payload`` bytes occupies on the wire (clients always mask: 4 bytes)."""
    return 2 + 4 + (0 if payload < 126 else 2 if payload < 65536 else 8) + payload


class _Meter:
    """One connection's share of the memory budget, and its refusal once the budget had no room.

    The library's reads are charged as they arrive (:class:`_MeteredSocket`), attributed to the frames
    the library parses (:meth:`observe`), and released when the handler is done with their message
    (:meth:`message_done`); control frames are released at once, the handshake request when it is
    parsed. A read that was part of the handshake request and of a first frame at once is released
    with the request: the only inexactness, at most one read (64 KiB) per connection.
    """

    def __init__(self, hold: Hold, wait_s: float) -> None:
        self.hold = hold
        self.wait_s = wait_s
        self.refusal: MemoryBudgetError | None = None
        self._frames: collections.deque[tuple[int, bool]] = collections.deque()
        self._decoding = 0
        self._lock = threading.Lock()

    def observe(self, event: object) -> None:
        """The library parsed ``event`` from the bytes charged so far (recv thread)."""
        if not isinstance(event, Frame):  # the handshake request
            self.hold.release()
        elif event.opcode in _DATA_OPCODES:
            with self._lock:
                self._frames.append((_frame_wire_bytes(len(event.data)), event.fin))
        else:
            self.hold.release(_frame_wire_bytes(len(event.data)))

    def charge_decoding(self, n: int) -> bool:
        if not self.hold.charge(n, self.wait_s):
            return False
        self._decoding += n
        return True

    def message_done(self) -> None:
        """The handler is done with its message: release its frames and its decoding (handler thread)."""
        n, self._decoding = self._decoding, 0
        with self._lock:
            while self._frames:
                size, fin = self._frames.popleft()
                n += size
                if fin:
                    break
        self.hold.release(n)


class _MeteredSocket:
    """The socket a websocket connection reads through: every read is charged to the budget.

    A read that finds no room refuses the connection: the text frame and the 1013 close go out at
    once (from this thread, under the connection's protocol lock), then what the client still sends is
    read and dropped until it is quiet, hangs up or ``REFUSAL_LINGER_S`` pass; the library then sees
    the end of the stream and closes. During the opening handshake the bytes pass (the handler
    refuses the connection as soon as it starts).
    """

    def __init__(self, sock: socket.socket, meter: _Meter, refuse: Any) -> None:
        self._sock = sock
        self._meter = meter
        self._refuse = refuse
        self.connection: ServerConnection | None = None

    def fileno(self) -> int:
        return self._sock.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def _handshaking(self) -> bool:
        return self.connection is None or self.connection.protocol.state is State.CONNECTING

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        meter = self._meter
        if meter.refusal is not None and not self._handshaking():
            return self._drain()  # refused: nothing more reaches the library
        data = self._sock.recv(bufsize, flags)
        if not data or meter.refusal is not None or meter.hold.charge(len(data), meter.wait_s):
            return data
        meter.refusal = meter.hold.refusal(f"{len(data):,} more bytes of a request", meter.wait_s)
        if self._handshaking():
            return data  # the handler refuses the connection as soon as the handshake is done
        assert self.connection is not None
        self._refuse(self.connection, meter.refusal)
        return self._drain()

    def _drain(self) -> bytes:
        """Read and drop what the refused client still sends; then b"" (the end of the stream)."""
        until = time.monotonic() + REFUSAL_LINGER_S
        while (left := until - time.monotonic()) > 0:
            readable, _, _ = select.select([self._sock], [], [], min(left, _REFUSAL_QUIET_S))
            if not readable:
                break  # quiet: the client sent its whole request and waits for the answer it has
            try:
                if not self._sock.recv(65536):
                    break
            except OSError:
                break
        return b""


class OpenpiPolicyServer(PolicyServer):
    """Serve a policy as an openpi websocket policy server on ``host:port`` (0 = any free port).

    ``policy`` and the keyword arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`).
    """

    thread_name = "openpi-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8000,
                 *, max_message_bytes: int = OPENPI_MAX_MESSAGE_BYTES, **settings: Unpack[ServerSettings]) -> None:
        super().__init__(policy, stats=("connections", "requests", "errors", "refused", "timeouts",
                                        "peak_connections"), **settings)
        self._open = 0
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=max_message_bytes,
                                     max_queue=1, process_request=self._health,
                                     create_connection=self._connection_class())
        self.address: tuple[str, int] = self._server.socket.getsockname()[:2]

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._server.shutdown()
        self._join_serving(join_timeout_s)
        self.sessions.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return self._open

    # ------------------------------------------------------------------ memory
    def _connection_class(self) -> type[ServerConnection]:
        """A ServerConnection that reads through a :class:`_MeteredSocket` charging this server's budget."""
        server = self

        class MeteredConnection(ServerConnection):
            def __init__(self, sock: socket.socket, protocol: Protocol, *args: Any, **kwargs: Any) -> None:
                self.meter = _Meter(server.memory.hold(), server.budget_wait_s)
                metered = _MeteredSocket(sock, self.meter, server._refuse_memory)
                super().__init__(metered, protocol, *args, **kwargs)  # type: ignore[arg-type]
                metered.connection = self

            def process_event(self, event: Any) -> None:
                self.meter.observe(event)
                super().process_event(event)

            def close_socket(self) -> None:
                try:
                    super().close_socket()
                finally:
                    self.meter.hold.close()

        return MeteredConnection

    def _refusal_text(self, exc: BaseException) -> str:
        self._count("errors")
        error, trace = describe_error(exc, self.debug)
        LOG.warning("error reply: %s", error)
        return trace  # one line unless debug; openpi clients raise it

    def _refuse_memory(self, ws: ServerConnection, refusal: MemoryBudgetError) -> bool:
        """From the reading thread: the text frame and the 1013 close, at once. True once sent."""
        text = self._refusal_text(refusal)
        try:
            with ws.protocol_mutex:
                if ws.protocol.state is not State.OPEN:
                    return False
                ws.protocol.send_text(text.encode("utf-8"))
                ws.protocol.send_close(CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON)
                ws.send_data()
        except Exception as exc:  # the peer is gone: nothing left to tell it
            LOG.info("memory refusal not delivered: %s", exc)
            return False
        return True

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
        meter: _Meter | None = getattr(ws, "meter", None)
        # interrupted once refused for memory: the reading thread has told the client and ends the stream
        return receive_message(ws, self.idle_timeout_s, self.frame_timeout_s,
                               interrupted=lambda: meter is not None and meter.refusal is not None,
                               on_deadline=lambda: self._count("timeouts"))

    def _serve(self, ws: ServerConnection) -> Session | None:
        session: Session | None = None
        meter: _Meter = ws.meter  # type: ignore[attr-defined]
        try:
            if meter.refusal is not None:  # refused for memory during the handshake: as over the cap
                self._count("errors")
                LOG.warning("refusing a connection: %s", meter.refusal)
                ws.close(CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON)
                return None
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
                objects = check_object_count(message)
                if not meter.charge_decoding(decode_cost(len(message), objects)):
                    raise meter.hold.refusal(f"unpacking a {len(message):,}-byte request of {objects:,} msgpack "
                                             "values", self.budget_wait_s)
                obs, prompt = from_openpi_observation(unpackb(message, counted=True))
                del message
                obs = validate_observation(obs)
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
                busy = isinstance(exc, MemoryBudgetError)
                try:
                    ws.send(self._refusal_text(exc))
                    ws.close(*((CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON) if busy
                               else (CloseCode.INTERNAL_ERROR, INTERNAL_ERROR_REASON)))
                except ConnectionClosed:
                    pass
                return session
            finally:
                meter.message_done()
            prev_total_ms = 1000 * (time.perf_counter() - start)
        return session
