"""``openpi://HOST:PORT[/PATH][?dialect=roboarena&session_id=...]``: a policy served by any openpi
websocket policy server (π0 / π0.5), at a URL path where the server has one (vLLM-Omni serves openpi
at ``/v1/realtime/robot/openpi``).

Protocol facts (peers-bridge.md 1.1): on connect the server sends one binary msgpack frame with
its metadata; then strictly one request in flight: msgpack(ALOHA observation) → msgpack({"actions":
[H, 14], "server_timing": ..., "policy_timing": ...}); a text frame means the server failed.

openpi has no reset or instruction command: the instruction travels as ``prompt`` with every
request, and :meth:`reset` closes the connection so that a server that keeps per-connection state
(ours does) starts the next episode clean. Unlike openpi's own client, every wait is bounded and a
broken connection is never replayed (a stateful server must not advance twice).

``dialect=roboarena`` speaks RoboArena's variant (:mod:`.roboarena`): the handshake is the server's
``PolicyServerConfig``, checked before the first request; every request carries ``endpoint``; an
episode's end is a ``reset`` request on the same connection, answered by the text frame
``"reset successful"``; ``session_id`` (the URL's, else a fresh uuid per episode) travels when the
server needs it or the user gave one. The default dialect's bytes are unchanged.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import threading
import time
import uuid
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError, server_reason
from robofollow_ros.policy.wire.openpi.codec import OPENPI_MAX_MESSAGE_BYTES, packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import OPENPI_IMAGE_SIZE, to_openpi_observation
from robofollow_ros.policy.wire.openpi.roboarena import (
    RESET_REPLY,
    HandshakeRefused,
    check_dialect,
    roboarena_actions,
    roboarena_request,
    roboarena_settings,
)

#: websockets >= 17 warns unless a long-lived connection says so explicitly; older versions lack the flag.
_LONG_LIVED: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


class OpenpiWebsocketPolicy:
    """Client adapter; ``last_timing`` holds the latest ``server_timing`` / ``policy_timing`` /
    ``client_ms`` and ``timings`` the most recent ``timing_history`` of them."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, path: str = "", *, timeout_s: float = 300.0,
                 connect_attempts: int = 20, connect_interval_s: float = 1.0,
                 image_size: int = OPENPI_IMAGE_SIZE, api_key: str | None = None,
                 max_message_bytes: int = OPENPI_MAX_MESSAGE_BYTES, timing_history: int = 1000,
                 dialect: str = "openpi", session_id: str | None = None) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        if path and not path.startswith("/"):
            raise ValueError(f"path: {path!r} must start with '/'")
        # URL query options arrive as strings
        timeout_s = _number("timeout_s", timeout_s)
        connect_interval_s = _number("connect_interval_s", connect_interval_s)
        connect_attempts = int(_number("connect_attempts", connect_attempts))
        image_size = int(_number("image_size", image_size))
        max_message_bytes = int(_number("max_message_bytes", max_message_bytes))
        self.dialect = check_dialect(dialect)
        if session_id is not None and not (isinstance(session_id, str) and 0 < len(session_id) <= 256):
            raise ValueError(f"session_id: {session_id!r} is not a string of 1..256 characters")
        self.session_id = session_id
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        if connect_attempts < 1:
            raise ValueError(f"connect_attempts: expected >= 1, got {connect_attempts!r}")
        self.uri = f"ws://{host}:{port}{path}"
        self.timeout_s = float(timeout_s)
        self.connect_attempts = connect_attempts
        self.connect_interval_s = float(connect_interval_s)
        self.image_size = image_size
        self.api_key = api_key
        self.max_message_bytes = max_message_bytes
        self.prompt = ""
        self.server_metadata: dict[str, Any] = {}
        self.last_timing: dict[str, Any] = {}
        self.timings: collections.deque[dict[str, Any]] = collections.deque(maxlen=timing_history)
        self.connections_opened = 0
        self._ws: ClientConnection | None = None
        self._closing = threading.Event()
        self._arena: dict[str, Any] = {}  # the roboarena handshake's settings
        self._session: str | None = None  # the roboarena episode's session id
        self._episode_requests = 0

    @property
    def peer(self) -> str:
        """Who answers, in error lines: ``openpi server`` or ``roboarena server``."""
        return f"{self.dialect} server"

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        """Start the next episode on a fresh connection (openpi has no reset message); RoboArena: end the
        episode with a ``reset`` request (when it made any) on the same connection."""
        if self.dialect == "openpi":
            self._drop()
            return
        self._end_episode()

    def set_instruction(self, text: str) -> None:
        self.prompt = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        if self.dialect == "openpi":
            request = packb(to_openpi_observation(obs, self.prompt, self.image_size))
        else:
            self._connection()  # the handshake says what to send
            if self._session is None:
                self._session = self.session_id or uuid.uuid4().hex
            send_id = self._arena["needs_session_id"] or self.session_id is not None
            request = packb(roboarena_request(obs, self.prompt, self._arena, self._session if send_id else None))
        if len(request) > self.max_message_bytes:
            raise WireFormatError(f"request: {len(request)} bytes exceed the limit of {self.max_message_bytes}")
        ws = self._connection()
        start = time.perf_counter()
        try:
            ws.send(request)
            reply = ws.recv(timeout=self.timeout_s)
        except (OSError, ConnectionClosed) as exc:  # TimeoutError is an OSError
            self._drop()
            raise ConnectionError(f"{self.peer} {self.uri}: predict failed ({exc}); not retried") from exc
        client_ms = 1000 * (time.perf_counter() - start)
        if isinstance(reply, str):
            self._drop()  # openpi servers close after an error frame
            raise RemotePolicyError(f"{self.peer} {self.uri}: predict failed: {server_reason(reply)}", reply)
        response = unpackb(reply)
        self._episode_requests += 1
        if self.dialect == "roboarena":
            actions = roboarena_actions(response, self.uri)
        elif not isinstance(response, dict) or "actions" not in response:
            raise WireFormatError(f"response: expected a map with 'actions', got {_keys(response)}")
        else:
            actions = np.asarray(response["actions"])
        timing = response if isinstance(response, dict) else {}  # RoboArena: maybe a bare array
        self.last_timing = {"client_ms": client_ms,
                            "server_timing": timing.get("server_timing", {}),
                            "policy_timing": timing.get("policy_timing", {})}
        self.timings.append(self.last_timing)
        return actions

    def close(self) -> None:
        self._closing.set()
        if self.dialect == "roboarena" and self._ws is not None:
            with contextlib.suppress(ConnectionError, RemotePolicyError, WireFormatError):  # closing anyway
                self._end_episode()
        self._drop()

    def server_info(self) -> dict[str, Any]:
        """The server's own metadata: the frame it sends first on every connection (openpi's handshake).

        Connects when not connected (with the client's attempts and timeouts; ``ConnectionError`` when the
        server cannot be reached), so that a caller can learn what serves it before the first episode, e.g.
        to record it in run.json. The connection stays open for the next ``predict``; ``reset`` drops it."""
        self._connection()
        return dict(self.server_metadata)

    # ------------------------------------------------------------------ transport
    def _connection(self) -> ClientConnection:
        if self._ws is not None:
            return self._ws
        self._closing.clear()
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        last: Exception | None = None
        for attempt in range(self.connect_attempts):
            if attempt and self._closing.wait(self.connect_interval_s):
                break
            try:
                ws = connect(self.uri, compression=None, max_size=self.max_message_bytes,
                             open_timeout=self.timeout_s, close_timeout=5, additional_headers=headers, **_LONG_LIVED)
            except InvalidURI as exc:
                raise ValueError(f"openpi server: bad address {self.uri!r} ({exc})") from exc
            except (OSError, InvalidHandshake) as exc:
                last = exc
                continue
            try:
                metadata = unpackb(_binary(ws.recv(timeout=self.timeout_s), "metadata"))
            except (OSError, ConnectionClosed, WireFormatError) as exc:
                ws.close()
                raise ConnectionError(f"{self.peer} {self.uri}: no valid metadata frame ({exc})") from exc
            if self.dialect == "roboarena":
                try:
                    self._arena = roboarena_settings(metadata, self.uri, self.image_size)
                except HandshakeRefused:
                    ws.close()
                    raise
            self.server_metadata = metadata if isinstance(metadata, dict) else {}
            self._episode_requests = 0
            self.connections_opened += 1
            self._ws = ws
            return ws
        raise ConnectionError(f"{self.peer} {self.uri}: no connection after {self.connect_attempts} attempts "
                              f"({last})")

    def _end_episode(self) -> None:
        """RoboArena's ``reset`` endpoint, answered by the text frame ``"reset successful"``."""
        requests, self._episode_requests = self._episode_requests, 0
        session, self._session = self._session, None
        if self._ws is None or not requests:
            return
        message: dict[str, Any] = {"endpoint": "reset"}
        if session is not None and (self._arena.get("needs_session_id") or self.session_id is not None):
            message["session_id"] = session
        try:
            self._ws.send(packb(message))
            reply = self._ws.recv(timeout=self.timeout_s)
        except (OSError, ConnectionClosed) as exc:
            self._drop()
            raise ConnectionError(f"roboarena server {self.uri}: reset failed ({exc}); not retried") from exc
        if reply != RESET_REPLY:
            self._drop()
            if isinstance(reply, str):
                raise RemotePolicyError(f"roboarena server {self.uri}: reset failed: {server_reason(reply)}", reply)
            raise WireFormatError(f"roboarena server {self.uri}: reset answered with a {len(reply)}-byte binary "
                                  f"frame, expected the text {RESET_REPLY!r}")

    def _drop(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            ws.close()


def _number(name: str, value: Any) -> float:
    """A number given in the URL (a string) or in --kwargs; range checks stay with the caller."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return number


def _binary(frame: str | bytes, what: str) -> bytes:
    if isinstance(frame, str):
        raise WireFormatError(f"{what}: expected a binary frame, got text {frame[:200]!r}")
    return frame


def _keys(value: Any) -> str:
    return f"keys {sorted(map(str, value))[:5]}" if isinstance(value, dict) else type(value).__name__
