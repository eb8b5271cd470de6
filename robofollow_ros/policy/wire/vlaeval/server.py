"""Any RoboFollow policy as a vla-eval model server (``robofollow serve --protocol vla-eval``), so that
vla-evaluation-harness (its ``Connection`` client and orchestrator) can evaluate our policies.

Per connection, as vla-eval's ``model_servers/serve.py`` does: ``hello`` is answered with ours
(``harness_version``, ``protocol_version``, ``model_server``, ``observation_params``, our
``action_spec`` / ``observation_spec`` from ``specs.py``, the served SPEC under ``robofollow``); a
client announcing another protocol version gets an ``error`` and the close. ``episode_start``
resets the connection's policy session and sets its instruction (``task.instruction``, else
``task.task_description`` / ``task.name``); each ``observation`` is answered with ``action``
``{"actions": float32 [T, 14], "policy_timing": {"infer_ms"}}`` carrying its ``seq``; an
``observation``'s ``task_description`` that differs from the instruction in use sets it (vla-eval
sends it with every step). An observation before any ``episode_start`` starts an episode.
``episode_end`` ends it. A failed call is answered with ``error`` ``{"error": one line}`` (the
traceback only with ``--debug``) and the connection stays open, as vla-eval's server does; a
message that is not the protocol gets the ``error`` and the close (1007). ``GET /health`` answers
200 ``{"status": "ok"}`` (vla-eval's readiness probe); there is no ``/config``: vla-eval's changes
server attributes without authentication. Binds 127.0.0.1 by default.

Bounds, as the openpi server's: one policy session per connection (``wire/sessions.py``; a session
whose call timed out is dropped, the next observation gets a fresh one), ``max_connections`` (the
next is closed with 1013 and a reason naming the limit), ``idle_timeout_s`` for the next message, a
deadline of ``frame_timeout_s`` for a message once its first bytes arrived (1008),
``max_message_bytes`` per message (1009), :data:`~.codec.VLAEVAL_MAX_OBJECTS` msgpack values per
message. Memory, one budget across connections (``max_pending_bytes``, ``wire/budget.py``), as the
openpi server's: every read the websocket library makes is charged as it arrives
(``wire/websocket_meter.py``; issue 36: charged only once assembled, 64 × 32 MiB messages took the
server 385 MiB past its budget), then what decoding a message builds before it is unpacked, then its
png/jpeg images' pixels before they are inflated (only our three cameras are ever inflated). No room
within ``budget_wait_s``: an ``error`` ``server busy ...`` and a close with 1013 (from the reading
thread when the bytes themselves found no room; what the client still sends is read and dropped).
"""

from __future__ import annotations

import http
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.sync.server import Server, ServerConnection, serve

from robofollow_ros import __version__
from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.observation import validate_observation
from robofollow_ros.policy.wire.budget import MemoryBudgetError, decode_cost
from robofollow_ros.policy.wire.common import WireFormatError, describe_error
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session
from robofollow_ros.policy.wire.vlaeval.codec import (
    ACTION,
    ALL_IMAGE_FORMATS,
    EPISODE_END,
    EPISODE_START,
    ERROR,
    HELLO,
    OBSERVATION,
    PROTOCOL_VERSION,
    VLAEVAL_MAX_MESSAGE_BYTES,
    VLAEVAL_MAX_OBJECTS,
    EncodedImage,
    count_objects,
    pack_message,
    unpack_message,
)
from robofollow_ros.policy.wire.vlaeval.observation import from_vlaeval_observation
from robofollow_ros.policy.wire.vlaeval.specs import ACTION_SPEC, OBSERVATION_SPEC
from robofollow_ros.policy.wire.websocket_meter import Meter, metered_connection_class
from robofollow_ros.policy.wire.websocket_receive import bound_sends, receive_message, shut

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
MEMORY_REFUSAL_REASON = "server busy: memory budget full (max_pending_bytes); try again later"


class _Episode:
    """One connection's state: its policy session and the instruction in use."""

    def __init__(self) -> None:
        self.session: Session | None = None
        self.instruction: str | None = None


class VlaEvalPolicyServer(PolicyServer):
    """Serve a policy as a vla-eval model server on ``host:port`` (0 = any free port).

    ``policy`` and the keyword arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`).
    """

    thread_name = "vlaeval-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8000,
                 *, max_message_bytes: int = VLAEVAL_MAX_MESSAGE_BYTES, **settings: Unpack[ServerSettings]) -> None:
        super().__init__(policy, stats=("connections", "requests", "episodes", "errors", "refused", "timeouts",
                                        "peak_connections"), **settings)
        self._open = 0
        self._stopping = threading.Event()
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=max_message_bytes,
                                     max_queue=1, ping_interval=None, process_request=self._health,
                                     create_connection=metered_connection_class(self.memory, self.budget_wait_s,
                                                                                self._refuse_memory))
        self.address: tuple[str, int] = self._server.socket.getsockname()[:2]

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop accepting, close every connection (1001) once its handler is between messages, close the policies."""
        self._stopping.set()
        self._server.shutdown()
        self._join_serving(join_timeout_s)
        self.sessions.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return self._open

    def hello(self) -> dict[str, Any]:
        """Our ``hello`` payload (vla-eval's ``make_hello_payload`` fields, plus the served SPEC)."""
        return {"harness_version": f"robofollow-{__version__}", "protocol_version": PROTOCOL_VERSION,
                "model_server": "robofollow", "capabilities": {}, "observation_params": {},
                "action_spec": ACTION_SPEC, "observation_spec": OBSERVATION_SPEC, "robofollow": self.metadata}

    # ------------------------------------------------------------------ handlers
    @staticmethod
    def _health(connection: ServerConnection, request: Request) -> Response | None:
        if request.path in ("/health", "/healthz"):
            response = connection.respond(http.HTTPStatus.OK, json.dumps({"status": "ok"}) + "\n")
            response.headers["Content-Type"] = "application/json"
            return response
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
        episode = _Episode()
        meter: Meter = ws.meter  # type: ignore[attr-defined]
        try:
            if meter.refusal is not None:  # refused for memory during the handshake: as over the cap
                self._count("errors")
                ws.close(CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON)
                return
            self._serve(ws, episode, meter)
        finally:
            if episode.session is not None:
                self.sessions.release(episode.session)
            self.slots.release(slot)
            with self._lock:
                self._open -= 1

    def _receive(self, ws: ServerConnection) -> str | bytes | None:
        """The next message, or None once the connection is closed (by the peer, idleness, a deadline, stop)."""

        meter: Meter | None = getattr(ws, "meter", None)

        def stopping() -> bool:
            if meter is not None and meter.refusal is not None:
                return True  # refused for memory: the reading thread has told the client and ends the stream
            if self._stopping.is_set():
                ws.close(CloseCode.GOING_AWAY, "server stopping")
                return True
            return False

        return receive_message(ws, self.idle_timeout_s, self.frame_timeout_s, interrupted=stopping,
                               on_deadline=lambda: self._count("timeouts"),
                               mark=lambda state: self.slots.mark(ws.slot, state))  # type: ignore[attr-defined]

    def _refuse_memory(self, ws: ServerConnection, refusal: MemoryBudgetError) -> bool:
        """From the reading thread: the ``error`` message and the 1013 close, at once. True once sent."""
        self._count("errors")
        error, trace = describe_error(refusal, self.debug)
        LOG.warning("error reply: %s", error)
        try:
            with ws.protocol_mutex:
                if ws.protocol.state is not State.OPEN:
                    return False
                ws.protocol.send_binary(pack_message(ERROR, {"error": error, "traceback": trace}, 0))
                ws.protocol.send_close(CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON)
                ws.send_data()
        except Exception as exc:  # the peer is gone: nothing left to tell it
            LOG.info("memory refusal not delivered: %s", exc)
            return False
        return True

    def _serve(self, ws: ServerConnection, episode: _Episode, meter: Meter) -> None:
        while (message := self._receive(ws)) is not None:
            self._count("requests")
            outcome = self._answer(ws, message, episode, meter)
            # Nothing of the message outlives its charge (issue 36): the message, its unpacked payload and
            # any exception whose traceback would keep them are gone before the budget gets its bytes back;
            # the reply (or error) is sent afterwards. Kept past the release (during a close handshake, or
            # until the next message arrived), they took the server 437-480 MiB past its 512 MiB budget.
            del message
            meter.message_done()
            if outcome is None:
                return  # the client has gone
            reply, error = outcome
            try:
                if reply is not None:
                    ws.send(reply)
                elif error is not None:
                    self._send_error(ws, *error)
                    if error[3]:
                        return
            except ConnectionClosed:
                return

    def _answer(self, ws: ServerConnection, message: str | bytes, episode: _Episode, meter: Meter
                ) -> tuple[bytes | None, tuple[int, str, str, bool, bool] | None] | None:
        """One message's reply, or its error ``(seq, error, traceback, close, busy)``; None when the client has
        gone. Returns only plain values: no reference to the message or what was unpacked from it."""
        seq = 0
        close = True  # not the protocol, or no memory: tell the client, then close
        try:
            if isinstance(message, str):
                raise WireFormatError("message: expected a binary msgpack frame, got a text frame")
            objects = count_objects(message, VLAEVAL_MAX_OBJECTS)
            if not meter.charge_decoding(decode_cost(len(message), objects, copies=2)):
                if ws.protocol.state is not State.OPEN:
                    return None  # the client has gone (its budget share closed with it): nothing to answer
                raise meter.hold.refusal(f"a {len(message):,}-byte message of {objects:,} msgpack values",
                                         self.budget_wait_s)
            kind, payload, seq = unpack_message(message, image_formats=ALL_IMAGE_FORMATS, counted=True)
            close = False
            return self._dispatch(kind, payload, seq, episode, meter), None
        except ConnectionClosed:
            return None
        except _Close as exc:
            return None, self._error(seq, exc.error, close=True)
        except Exception as exc:
            if not close and episode.session is not None:
                episode.session = self.sessions.drop_if_stuck(episode.session)
            return None, self._error(seq, exc, close=close)

    def _error(self, seq: int, exc: BaseException, *, close: bool) -> tuple[int, str, str, bool, bool]:
        self._count("errors")
        error, trace = describe_error(exc, self.debug)
        LOG.warning("error reply: %s", error)
        return seq, error, trace, close, isinstance(exc, MemoryBudgetError)

    def _dispatch(self, kind: str, payload: dict[str, Any], seq: int, episode: _Episode,
                  meter: Meter) -> bytes | None:
        if kind == HELLO:
            version = payload.get("protocol_version", PROTOCOL_VERSION)
            if version != PROTOCOL_VERSION:
                raise _Close(WireFormatError(f"hello: protocol_version {str(version)[:20]}; this server speaks "
                                             f"{PROTOCOL_VERSION}"))
            return pack_message(HELLO, self.hello(), seq)
        if kind == EPISODE_START:
            given = payload.get("task")
            task: dict[str, Any] = given if isinstance(given, dict) else {}
            text = next((task[k] for k in ("instruction", "task_description", "name") if isinstance(task.get(k), str)),
                        "")
            self._start_episode(episode, text)
            return None
        if kind == OBSERVATION:
            return self._observation(payload, seq, episode, meter)
        if kind == EPISODE_END:
            return None
        if kind == ERROR:
            LOG.warning("client error: %s", str(payload.get("error", payload))[:500])
            return None
        raise WireFormatError(f"message type: a client sends no {kind!r}")

    def _start_episode(self, episode: _Episode, instruction: str) -> Session:
        if episode.session is None:
            episode.session = self.sessions.acquire()
        episode.session.reset()
        episode.session.set_instruction(instruction)
        episode.instruction = instruction
        self._count("episodes")
        return episode.session

    def _observation(self, payload: dict[str, Any], seq: int, episode: _Episode, meter: Meter) -> bytes:
        obs, task = from_vlaeval_observation(payload)
        encoded = [c for c in obs["observation"].values() if isinstance(c["rgb"], EncodedImage)]
        pixels = sum(c["rgb"].nbytes for c in encoded)
        if pixels and not meter.charge_decoding(pixels):
            raise _Close(meter.hold.refusal(f"{pixels:,} bytes of decoded images", self.budget_wait_s))
        for camera in encoded:
            camera["rgb"] = camera["rgb"].decode()
        obs = validate_observation(obs)
        session = episode.session
        if session is None or episode.instruction is None:
            session = self._start_episode(episode, task or episode.instruction or "")
        elif task is not None and task != episode.instruction:
            session.set_instruction(task)
            episode.instruction = task
        start = time.perf_counter()
        actions = session.predict(obs)
        infer_ms = 1000 * (time.perf_counter() - start)
        return pack_message(ACTION, {"actions": np.asarray(actions, dtype=np.float32),
                                     "policy_timing": {"infer_ms": infer_ms}}, seq)

    def _send_error(self, ws: ServerConnection, seq: int, error: str, trace: str, close: bool, busy: bool) -> None:
        """The ``error`` message; then, if ``close``, the close (1013 when refused for memory, else 1007)."""
        ws.send(pack_message(ERROR, {"error": error, "traceback": trace}, seq))
        if close:
            ws.close(*((CloseCode.TRY_AGAIN_LATER, MEMORY_REFUSAL_REASON) if busy
                       else (CloseCode.INVALID_DATA, _reason(f"not the vla-eval protocol: {error}"))))


def _reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8 (the error message before it says everything)."""
    return text.encode("utf-8")[:120].decode("utf-8", "ignore")


class _Close(Exception):
    """Answer with an error, then close the connection."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
