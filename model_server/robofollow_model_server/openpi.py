"""openpi's websocket protocol, server side: what ``robofollow eval --policy openpi://HOST:PORT`` and
openpi-client speak.

On connect the server sends one binary msgpack frame of metadata; then each msgpack ALOHA request
(``state`` [14], ``images.cam_high`` / ``cam_left_wrist`` / ``cam_right_wrist`` as uint8 CHW or HWC,
``prompt``) is answered with ``{"actions": [T, 14], "policy_timing": {"infer_ms"}, "server_timing":
{"infer_ms", "prev_total_ms"}}``. A failure is answered as openpi does: a text frame, then a close
with 1011 (INTERNAL_ERROR). openpi has no reset message: a connection's episode starts (``reset`` +
``set_instruction``) on its first request and whenever its prompt changes. ``GET /healthz`` is 200.

Bounds: ``max_message_bytes`` per message (1009 past it), at most one queued message per connection,
``idle_timeout_s`` for the next message's first bytes, then ``frame_timeout_s`` for the whole of it (a
trickle does not extend it; 1008), the codec's msgpack value count, ``max_connections`` reclaimable slots
(``bounds.py``: a connection that never sent a message, or one trickling the start of one, gives its
slot to a newcomer; 1013 with the reason when none can), one memory budget across connections
(``max_pending_bytes``: each message and what unpacking builds, charged before it is unpacked; no room:
the text frame ``server busy ...`` and 1013), the contract check before the policy.
"""

from __future__ import annotations

import contextlib
import http
import logging
import socket
import struct
import threading
import time
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.sync.server import ServerConnection, serve

from robofollow_model_server.bounds import (
    BUSY,
    DEFAULT_BUDGET_WAIT_S,
    DEFAULT_MAX_PENDING_BYTES,
    HEAD,
    IDLE,
    ConnectionSlots,
    MemoryBudget,
    MemoryBudgetError,
    bound_heap,
)
from robofollow_model_server.contract import CAMERAS, ContractError, check_image, check_instruction, check_vector
from robofollow_model_server.serving import (
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    THREAD_PREFIX,
    PolicyHost,
    describe_error,
)
from robofollow_model_server.wire import WireError, packb, unpackb

LOG = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: How often a waiting handler looks whether a message has started arriving (its deadline starts then).
POLL_S = 0.25
#: Bytes of a message after which its connection is busy (never reclaimed), not merely opening one.
HEAD_BYTES = 64 * 1024
#: openpi ALOHA camera name -> RoboFollow camera key (head, left wrist, right wrist).
OPENPI_CAMERAS = dict(zip(("cam_high", "cam_left_wrist", "cam_right_wrist"), CAMERAS, strict=True))


def from_openpi(request: Any) -> dict[str, Any]:
    """RoboFollow's observation from an ALOHA request: CHW images back to HWC, missing wrist cameras
    black frames of the head camera's size, unknown camera names refused (``cam_low`` ignored)."""
    if not isinstance(request, dict):
        raise ContractError(f"request: expected a map, got {type(request).__name__}")
    images = request.get("images")
    if not isinstance(images, dict) or "cam_high" not in images:
        raise ContractError("images.cam_high: missing; it is mandatory")
    unknown = set(images) - set(OPENPI_CAMERAS) - {"cam_low"}
    if unknown:
        raise ContractError(f"images: unknown camera names {sorted(map(str, unknown))}; "
                            f"expected {list(OPENPI_CAMERAS)}")
    hwc = {name: _hwc(images[name], f"images.{name}") for name in OPENPI_CAMERAS if name in images}
    cameras = {key: {"rgb": hwc.get(name, np.zeros_like(hwc["cam_high"]))} for name, key in OPENPI_CAMERAS.items()}
    prompt = check_instruction(request.get("prompt"), "prompt")
    return {"observation": cameras, "joint_action": {"vector": check_vector(request.get("state"), "state")},
            "instruction": prompt}


def _hwc(value: Any, field: str) -> np.ndarray:
    if isinstance(value, np.ndarray) and value.ndim == 3 and value.shape[0] == 3 and value.shape[-1] != 3:
        value = np.ascontiguousarray(value.transpose(1, 2, 0))
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        value = (255 * value).astype(np.uint8)  # openpi's convert_to_uint8 for float images in [0, 1]
    return check_image(value, field)


class OpenpiServer:
    """Serve ``host`` (a :class:`PolicyHost`) as an openpi websocket policy server (port 0: any free port)."""

    def __init__(self, host: PolicyHost, address: str = "127.0.0.1", port: int = 8000, *, debug: bool = False,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = 8, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 metadata: dict[str, Any] | None = None, max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 budget_wait_s: float = DEFAULT_BUDGET_WAIT_S) -> None:
        self.host = host
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_connections = max_connections
        self.slots = ConnectionSlots(max_connections, protect_s=frame_timeout_s)
        self.memory = MemoryBudget(max_pending_bytes, budget_wait_s)
        bound_heap()
        self.metadata = dict(metadata or {})
        self._lock = threading.Lock()
        self._open = 0
        self._server = serve(self._handle, address, port, compression=None, max_size=max_message_bytes,
                             max_queue=1, process_request=self._health, open_timeout=min(10.0, frame_timeout_s))
        self.address: tuple[str, int] = self._server.socket.getsockname()[:2]
        self._thread: threading.Thread | None = None

    def start(self) -> OpenpiServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"{THREAD_PREFIX}accept",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, grace_s: float = 10.0) -> None:
        """Close the listener and every connection (1001), then wait for the handlers (websockets joins them)."""
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(grace_s)

    @staticmethod
    def _health(connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        slot = self.slots.admit(lambda: _shut(ws))
        if slot is None:
            ws.close(CloseCode.TRY_AGAIN_LATER, f"server busy: {self.max_connections} connections are open, "
                                                "the limit (--max-connections)")
            return
        whole = int(self.frame_timeout_s)  # every reply's write bounded (the library's has no timeout)
        with contextlib.suppress(OSError, OverflowError):
            ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                                 struct.pack("ll", whole, int((self.frame_timeout_s - whole) * 1_000_000)))
        with self._lock:
            self._open += 1
        owner = object()
        holding = False
        try:
            ws.send(packb({**self.metadata, **self.host.info()}))
            prompt_in_use: str | None = None
            prev_total_ms: float | None = None
            while True:
                self.slots.mark(slot, IDLE)
                message = self._receive(ws, lambda state: self.slots.mark(slot, state))
                if message is None:
                    return
                start = time.perf_counter()
                try:
                    if isinstance(message, str):
                        raise WireError("message: expected a binary msgpack frame, got a text frame")
                    self.memory.charge(owner, 3 * len(message))  # the message, unpacked arrays, images made HWC
                    obs = from_openpi(unpackb(message))
                    del message
                    if not holding:
                        self.host.acquire(owner)
                        holding = True
                    if obs["instruction"] != prompt_in_use:
                        self.host.reset()
                        self.host.set_instruction(obs["instruction"])
                        prompt_in_use = obs["instruction"]
                    infer_start = time.perf_counter()
                    actions = self.host.predict(obs)
                    infer_ms = 1000 * (time.perf_counter() - infer_start)
                except Exception as exc:
                    self.memory.release(owner)
                    error, trace = describe_error(exc, self.debug)
                    LOG.warning("error reply: %s", error)
                    ws.send(trace)
                    if isinstance(exc, MemoryBudgetError):
                        ws.close(CloseCode.TRY_AGAIN_LATER, "server busy: memory budget full; try again later")
                    else:
                        ws.close(CloseCode.INTERNAL_ERROR,
                                 "Internal server error. Traceback included in previous frame.")
                    return
                del obs
                self.memory.release(owner)
                timing = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                ws.send(packb({"actions": actions, "policy_timing": {"infer_ms": infer_ms}, "server_timing": timing}))
                prev_total_ms = 1000 * (time.perf_counter() - start)
        except ConnectionClosed:
            return
        finally:
            self.memory.release(owner)
            self.slots.release(slot)
            if holding:
                self.host.release(owner)
            with self._lock:
                self._open -= 1

    def _receive(self, ws: ServerConnection, mark: Any) -> str | bytes | None:
        """The next message, or None once closed: by the peer, idle for ``idle_timeout_s`` (1000), or a
        message not complete ``frame_timeout_s`` after its first bytes (1008). ``mark`` gets the slot state."""
        idle_until, message_until, state = time.monotonic() + self.idle_timeout_s, None, IDLE
        while True:
            now = time.monotonic()
            progress = _progress(ws)
            if message_until is None and progress:
                message_until = now + self.frame_timeout_s
            if message_until is not None and state != BUSY:
                new = BUSY if progress >= HEAD_BYTES else HEAD
                if new != state:
                    state = new
                    mark(state)
            until = idle_until if message_until is None else message_until
            if now >= until:
                if message_until is None:
                    ws.close(CloseCode.NORMAL_CLOSURE, f"idle for {self.idle_timeout_s:g} s")
                else:
                    ws.close(CloseCode.POLICY_VIOLATION, f"message not complete within {self.frame_timeout_s:g} s")
                return None
            try:
                message = ws.recv(timeout=min(POLL_S, until - now))
            except TimeoutError:
                continue
            mark(BUSY)
            return message


def _progress(ws: ServerConnection) -> int:
    """Bytes of the next message that have arrived (websockets 13-17's buffer and fragment size)."""
    protocol = ws.protocol
    reader = getattr(protocol, "reader", None)
    buffered = len(getattr(reader, "buffer", b"")) if reader is not None else 0
    return buffered + int(getattr(protocol, "current_size", None) or getattr(protocol, "cur_size", None) or 0)


def _shut(ws: ServerConnection) -> None:
    """Reclaim a connection's slot: a 1013 close frame saying why and a half-close at once, then, 2 s later, the
    socket shut both ways (never waiting for the peer); the handler sees the connection closed and ends."""
    with contextlib.suppress(Exception), ws.protocol_mutex:
        if ws.protocol.state is State.OPEN:
            ws.protocol.send_close(CloseCode.TRY_AGAIN_LATER, "server busy: slot reclaimed from this idle "
                                                              "connection (the server is full); reconnect")
            ws.send_data()
    with contextlib.suppress(OSError):
        ws.socket.shutdown(socket.SHUT_WR)
    timer = threading.Timer(2.0, _shut_both, args=(ws,))
    timer.daemon = True
    timer.start()


def _shut_both(ws: ServerConnection) -> None:
    with contextlib.suppress(OSError):
        ws.socket.shutdown(socket.SHUT_RDWR)
