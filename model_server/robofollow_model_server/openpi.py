"""openpi's websocket protocol, server side: what ``robofollow eval --policy openpi://HOST:PORT`` and
openpi-client speak.

On connect the server sends one binary msgpack frame of metadata; then each msgpack ALOHA request
(``state`` [14], ``images.cam_high`` / ``cam_left_wrist`` / ``cam_right_wrist`` as uint8 CHW or HWC,
``prompt``) is answered with ``{"actions": [T, 14], "policy_timing": {"infer_ms"}, "server_timing":
{"infer_ms", "prev_total_ms"}}``. A failure is answered as openpi does: a text frame, then a close
with 1011 (INTERNAL_ERROR). openpi has no reset message: a connection's episode starts (``reset`` +
``set_instruction``) on its first request and whenever its prompt changes. ``GET /healthz`` is 200.

Bounds: ``max_message_bytes`` per message (1009 past it), at most one queued message per connection,
``idle_timeout_s`` for the whole next message (``recv``'s timeout covers a trickle too), the codec's
msgpack value count, ``max_connections`` (1013 past it), the contract check before the policy.
"""

from __future__ import annotations

import http
import logging
import threading
import time
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

from robofollow_model_server.contract import CAMERAS, ContractError, check_image, check_instruction, check_vector
from robofollow_model_server.serving import DEFAULT_IDLE_TIMEOUT_S, THREAD_PREFIX, PolicyHost, describe_error
from robofollow_model_server.wire import WireError, packb, unpackb

LOG = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
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
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, max_connections: int = 8,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, metadata: dict[str, Any] | None = None) -> None:
        self.host = host
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self.metadata = dict(metadata or {})
        self._lock = threading.Lock()
        self._open = 0
        self._server = serve(self._handle, address, port, compression=None, max_size=max_message_bytes,
                             max_queue=1, process_request=self._health)
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
        with self._lock:
            admitted = self._open < self.max_connections
            self._open += admitted
        if not admitted:
            ws.close(CloseCode.TRY_AGAIN_LATER, f"server busy: {self.max_connections} connections are open, "
                                                "the limit (--max-connections)")
            return
        owner = object()
        holding = False
        try:
            ws.send(packb({**self.metadata, **self.host.info()}))
            prompt_in_use: str | None = None
            prev_total_ms: float | None = None
            while True:
                try:
                    message = ws.recv(timeout=self.idle_timeout_s)
                except TimeoutError:
                    ws.close(CloseCode.NORMAL_CLOSURE, f"idle for {self.idle_timeout_s:g} s")
                    return
                start = time.perf_counter()
                try:
                    if isinstance(message, str):
                        raise WireError("message: expected a binary msgpack frame, got a text frame")
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
                    error, trace = describe_error(exc, self.debug)
                    LOG.warning("error reply: %s", error)
                    ws.send(trace)
                    ws.close(CloseCode.INTERNAL_ERROR, "Internal server error. Traceback included in previous frame.")
                    return
                timing = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                ws.send(packb({"actions": actions, "policy_timing": {"infer_ms": infer_ms}, "server_timing": timing}))
                prev_total_ms = 1000 * (time.perf_counter() - start)
        except ConnectionClosed:
            return
        finally:
            if holding:
                self.host.release(owner)
            with self._lock:
                self._open -= 1
