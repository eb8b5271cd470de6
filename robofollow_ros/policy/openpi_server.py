"""Any RoboFollow policy behind openpi's websocket protocol, so openpi clients can drive it.

Per connection the server sends the metadata frame, then answers each msgpack ALOHA observation
with ``{"actions": [T, 14], "policy_timing": {"infer_ms"}, "server_timing": {"infer_ms",
"prev_total_ms"}}``. The policy's episode starts (``reset`` + ``set_instruction``) on the first
request of a connection and whenever the prompt changes. A failure is answered as openpi does: a
text frame, then a close with INTERNAL_ERROR; the text is one line unless ``debug``.
``GET /healthz`` answers 200 "OK" for readiness probes. Binds 127.0.0.1 by default.
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

from robofollow_ros.policy.errors_reply import describe_error
from robofollow_ros.policy.interface import Policy, ValidatedPolicy
from robofollow_ros.policy.msgpack_wire import OPENPI_MAX_MESSAGE_BYTES, packb, unpackb
from robofollow_ros.policy.openpi_adapter import from_openpi_observation
from robofollow_ros.policy.robofollow_wire import WireFormatError

LOG = logging.getLogger(__name__)
INTERNAL_ERROR_REASON = "Internal server error. Traceback included in previous frame."


class OpenpiPolicyServer:
    """Serve ``policy`` as an openpi websocket policy server on ``host:port`` (0 = any free port)."""

    def __init__(self, policy: Policy, host: str = "127.0.0.1", port: int = 8000, *, debug: bool = False,
                 metadata: dict[str, Any] | None = None, idle_timeout_s: float = 1800.0,
                 max_message_bytes: int = OPENPI_MAX_MESSAGE_BYTES) -> None:
        self.policy = ValidatedPolicy.wrap(policy)
        self.debug = debug
        self.metadata = dict(metadata or {})
        self.idle_timeout_s = idle_timeout_s
        self._policy_lock = threading.Lock()  # connections run in threads; the policy is shared
        self._server: Server = serve(self._handle, host, port, compression=None, max_size=max_message_bytes,
                                     process_request=self._health)
        self.address: tuple[str, int] = self._server.socket.getsockname()[:2]
        self._thread: threading.Thread | None = None
        self.stats = {"connections": 0, "requests": 0, "errors": 0}

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

    def __enter__(self) -> OpenpiPolicyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ handlers
    @staticmethod
    def _health(connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        return None

    def _handle(self, ws: ServerConnection) -> None:
        self.stats["connections"] += 1
        ws.send(packb(self.metadata))
        prompt_in_use: str | None = None
        prev_total_ms: float | None = None
        while True:
            try:
                message = ws.recv(timeout=self.idle_timeout_s)
            except (ConnectionClosed, TimeoutError):
                ws.close()
                return
            start = time.perf_counter()
            self.stats["requests"] += 1
            try:
                if isinstance(message, str):
                    raise WireFormatError("message: expected a binary msgpack frame, got a text frame")
                obs, prompt = from_openpi_observation(unpackb(message))
                with self._policy_lock:
                    if prompt != prompt_in_use:
                        self.policy.reset()
                        self.policy.set_instruction(prompt)
                        prompt_in_use = prompt
                    infer_start = time.perf_counter()
                    actions = self.policy.predict(obs)
                    infer_ms = 1000 * (time.perf_counter() - infer_start)
                timing: dict[str, float] = {"infer_ms": infer_ms}
                if prev_total_ms is not None:
                    timing["prev_total_ms"] = prev_total_ms
                ws.send(packb({"actions": actions, "policy_timing": {"infer_ms": infer_ms},
                               "server_timing": timing}))
            except ConnectionClosed:
                return
            except Exception as exc:
                self.stats["errors"] += 1
                error, trace = describe_error(exc, self.debug)
                LOG.warning("error reply: %s", error)
                try:
                    ws.send(trace)  # one line unless debug; openpi clients raise it
                    ws.close(CloseCode.INTERNAL_ERROR, INTERNAL_ERROR_REASON)
                except ConnectionClosed:
                    pass
                return
            prev_total_ms = 1000 * (time.perf_counter() - start)

