"""Any RoboFollow policy behind openpi's websocket protocol, so openpi clients can drive it.

Per connection the server sends the metadata frame, then answers each msgpack ALOHA observation
with ``{"actions": [T, 14], "policy_timing": {"infer_ms"}, "server_timing": {"infer_ms",
"prev_total_ms"}}``. A failure is answered as openpi does: a text frame, then a close with
INTERNAL_ERROR; the text is one line unless ``debug``. ``GET /healthz`` answers 200 "OK" for
readiness probes. Binds 127.0.0.1 by default.

Many clients at once (issue 16): each connection has its own policy session
(``wire/sessions.py``); its episode starts (``reset`` + ``set_instruction``) on its first
request, whenever its prompt changes and (``episode_per="auto"``) when the joints come back to the
episode's start pose (``wire/episodes.py``: openpi's clients keep one connection for every episode),
so one connection's prompt never reaches another's policy. Bounds: ``max_connections`` (the next
connection is closed with 1013 TRY_AGAIN_LATER and a
reason naming the limit), ``idle_timeout_s`` for the next message, a deadline of
``frame_timeout_s`` for a message once its first bytes arrived (a trickle does not extend it; 1008
POLICY_VIOLATION), ``max_message_bytes`` per message (1009) and ``OPENPI_MAX_OBJECTS`` msgpack
values per message.

One memory bound across connections (issue 23, ``wire/budget.py``; ``wire/websocket_meter.py``): every
read the websocket library makes from a socket is charged to the server's budget
(``max_pending_bytes``) as it arrives (twice: the library's buffer and the unmasked payload),
attributed to the frames the library parses from it, and released when the handler is
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

import http
import logging
import time
from typing import TYPE_CHECKING

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.sync.server import Server, ServerConnection, serve

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.observation import validate_observation
from robofollow_ros.policy.wire.budget import MemoryBudgetError, decode_cost
from robofollow_ros.policy.wire.common import WireFormatError, describe_error
from robofollow_ros.policy.wire.episodes import EpisodeStarts, check_episode_rule
from robofollow_ros.policy.wire.openpi.codec import (
    OPENPI_MAX_MESSAGE_BYTES,
    check_object_count,
    packb,
    unpackb,
)
from robofollow_ros.policy.wire.openpi.observation import from_openpi_observation
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session
from robofollow_ros.policy.wire.websocket_meter import Meter, metered_connection_class
from robofollow_ros.policy.wire.websocket_receive import bound_sends, receive_message, shut

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
INTERNAL_ERROR_REASON = "Internal server error. Traceback included in previous frame."
#: The close reason of a memory refusal (a close reason has at most 123 bytes; the text frame says more).
MEMORY_REFUSAL_REASON = "server busy: memory budget full (max_pending_bytes); try again later"


class OpenpiPolicyServer(PolicyServer):
    """Serve a policy as an openpi websocket policy server on ``host:port`` (0 = any free port).

    ``policy`` and the keyword arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`).
    """

    thread_name = "openpi-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8000,
                 *, max_message_bytes: int = OPENPI_MAX_MESSAGE_BYTES, episode_per: str = "auto",
                 **settings: Unpack[ServerSettings]) -> None:
        self.episode_per = check_episode_rule(episode_per)
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
        """A ServerConnection that reads through a metered socket charging this server's budget."""
        return metered_connection_class(self.memory, self.budget_wait_s, self._refuse_memory)

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
        slot = self.admit_connection(lambda: shut(ws))
        if slot is None:
            ws.close(CloseCode.TRY_AGAIN_LATER, f"server busy: {self.max_connections} connections are open, "
                                                "the limit (--max-connections); try again later")
            return
        ws.slot = slot  # type: ignore[attr-defined]
        bound_sends(ws, self.frame_timeout_s)
        with self._lock:
            self._open += 1
        session: Session | None = None
        try:
            session = self._serve(ws)
        finally:
            if session is not None:
                self.sessions.release(session)
            self.slots.release(slot)
            with self._lock:
                self._open -= 1

    def _receive(self, ws: ServerConnection) -> str | bytes | None:
        """The next message, or None once the connection is closed (by the peer, idleness or a deadline)."""
        meter: Meter | None = getattr(ws, "meter", None)
        # interrupted once refused for memory: the reading thread has told the client and ends the stream
        return receive_message(ws, self.idle_timeout_s, self.frame_timeout_s,
                               interrupted=lambda: meter is not None and meter.refusal is not None,
                               on_deadline=lambda: self._count("timeouts"),
                               mark=lambda state: self.slots.mark(ws.slot, state))  # type: ignore[attr-defined]

    def _serve(self, ws: ServerConnection) -> Session | None:
        session: Session | None = None
        meter: Meter = ws.meter  # type: ignore[attr-defined]
        try:
            if meter.refusal is not None:  # refused for memory during the handshake: as over the cap
                self._count("errors")
                LOG.warning("refusing a connection: %s", meter.refusal)
                ws.close(CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON)
                return None
            ws.send(packb(self.metadata))
        except ConnectionClosed:
            return None
        episodes = EpisodeStarts(self.episode_per)
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
                if episodes.starts(prompt, obs):
                    session.reset()
                    session.set_instruction(prompt)
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
