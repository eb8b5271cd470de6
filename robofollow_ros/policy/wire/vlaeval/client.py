"""``vla-eval://HOST:PORT``: a policy served by any vla-evaluation-harness model server.

Protocol facts (vla-eval 0.8.0, ``connection.py`` and ``model_servers/serve.py``): the client opens a
websocket and sends ``hello`` (``harness_version``, ``protocol_version``); the server answers ``hello``
with its ``model_server`` name, ``observation_params`` and, usually, ``action_spec`` /
``observation_spec``. An episode is ``episode_start`` ``{"task": {"suite", "episode_idx", "instruction"}}``
(vla-eval's own task keys, less the privileged task id and seed), then one ``observation``
per step, each answered by an ``action`` carrying the observation's ``seq`` (or an ``error`` with
it), then ``episode_end``. One connection serves many episodes; the server keeps per-connection
state. No message waits for a reply except ``hello`` and ``observation``: a failed
``episode_start`` shows up as an ``error`` with that message's seq before the next action.

Unlike vla-eval's own client, every wait here has a deadline, a broken connection is never replayed
behind the caller's back (the server's episode state would be lost), a protocol version other than
ours or specs that disagree with ours refuse the server with one line before the first episode
(``specs.py``), and replies are bounded in size and decoded without compressed images.
"""

from __future__ import annotations

import collections
import inspect
import time
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from robofollow_ros import __version__
from robofollow_ros.policy.interface import Observation, PolicyError
from robofollow_ros.policy.wire.common import WireFormatError, remote_error
from robofollow_ros.policy.wire.vlaeval.codec import (
    ACTION,
    EPISODE_END,
    EPISODE_START,
    ERROR,
    HELLO,
    IMAGE_FORMATS,
    OBSERVATION,
    PROTOCOL_VERSION,
    VLAEVAL_MAX_MESSAGE_BYTES,
    pack_message,
    unpack_message,
)
from robofollow_ros.policy.wire.vlaeval.observation import actions_from_reply, to_vlaeval_observation
from robofollow_ros.policy.wire.vlaeval.specs import check_action_spec, check_observation_spec

#: websockets >= 17 warns unless a long-lived connection says so explicitly; older versions lack the flag.
_LONG_LIVED: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


class ProtocolVersionError(PolicyError, ValueError):
    """The server speaks another version of the vla-eval protocol."""


class VlaEvalPolicy:
    """Client adapter; ``last_timing`` holds the latest ``client_ms`` and ``timings`` the recent ones.

    ``image_format`` (raw, jpeg, png) is how our three cameras travel; by default what the server asks
    for in its ``observation_params`` (``image_format``), else png, as vla-eval's own client sends.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8000, *, timeout_s: float = 300.0,
                 connect_attempts: int = 20, connect_interval_s: float = 1.0, image_format: str | None = None,
                 max_message_bytes: int = VLAEVAL_MAX_MESSAGE_BYTES, timing_history: int = 1000) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        if connect_attempts < 1:
            raise ValueError(f"connect_attempts: expected >= 1, got {connect_attempts!r}")
        if image_format is not None and image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format: {image_format!r} is not one of {IMAGE_FORMATS}")
        self.uri = f"ws://{host}:{port}"
        self.timeout_s = float(timeout_s)
        self.connect_attempts = connect_attempts
        self.connect_interval_s = float(connect_interval_s)
        self.requested_image_format = image_format
        self.image_format = image_format or "png"
        self.max_message_bytes = max_message_bytes
        self.instruction = ""
        self.server_hello: dict[str, Any] = {}
        self.last_timing: dict[str, Any] = {}
        self.last_reply: dict[str, Any] = {}
        self.timings: collections.deque[dict[str, Any]] = collections.deque(maxlen=timing_history)
        self.connections_opened = 0
        self.episodes = 0
        self._ws: ClientConnection | None = None
        self._seq = 0
        self._episode_seq: int | None = None  # seq of this episode's episode_start, while one is open

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        """End the open episode (if any); the next ``predict`` starts one with the instruction then set."""
        if self._ws is not None and self._episode_seq is not None:
            self._episode_seq = None
            try:
                self._send(EPISODE_END, {})
            except (OSError, ConnectionClosed):
                self._drop()

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        payload = to_vlaeval_observation(obs, self.instruction)
        ws = self._connection()
        start = time.perf_counter()
        try:
            if self._episode_seq is None:
                # vla-eval's task keys (benchmarks/robotwin: name, suite, seed, episode_idx, instruction);
                # its model servers read suite (cogact's chunk_size_map). No name or seed: the task id and
                # layout are privileged (the observation contract), and the instruction is no task name.
                task = {"suite": "robofollow", "episode_idx": self.episodes, "instruction": self.instruction}
                self._episode_seq = self._send(EPISODE_START, {"task": task})
                self.episodes += 1
            seq = self._send(OBSERVATION, payload)
            kind, reply, reply_seq = self._receive(ws, start + self.timeout_s, "action")
            if kind == ERROR and reply_seq == self._episode_seq and reply_seq != seq:
                self._drop()  # the observation's answer is still on its way: start the next call afresh
                raise remote_error(f"vla-eval server {self.uri}: episode_start failed: ", _error_text(reply))
        except (OSError, ConnectionClosed) as exc:  # TimeoutError is an OSError
            self._drop()
            raise ConnectionError(f"vla-eval server {self.uri}: predict failed ({exc}); not retried") from exc
        client_ms = 1000 * (time.perf_counter() - start)
        if kind == ERROR:
            raise remote_error(f"vla-eval server {self.uri}: ", _error_text(reply))
        if kind != ACTION or reply_seq != seq:
            self._drop()  # out of step: the next call starts over on a fresh connection
            raise WireFormatError(f"vla-eval server {self.uri}: expected the action for seq {seq}, got {kind} "
                                  f"with seq {reply_seq}")
        actions = actions_from_reply(reply, self.uri)
        self.last_reply = {k: v for k, v in reply.items() if k not in ("actions", "action")}
        self.last_timing = {"client_ms": client_ms}
        self.timings.append(self.last_timing)
        return actions

    def close(self) -> None:
        self.reset()
        self._drop()

    def server_info(self) -> dict[str, Any]:
        """The server's ``hello`` (model server, harness and protocol versions, specs, observation
        params) for run.json; connects (and checks the server) when not connected."""
        self._connection()
        return {"protocol": "vla-eval", "uri": self.uri, "image_format": self.image_format,
                **_json_safe(self.server_hello)}

    # ------------------------------------------------------------------ transport
    def _send(self, kind: str, payload: dict[str, Any]) -> int:
        assert self._ws is not None
        self._seq += 1
        message = pack_message(kind, payload, self._seq, image_format=self.image_format)
        if len(message) > self.max_message_bytes:
            raise WireFormatError(f"{kind}: {len(message)} bytes exceed the limit of {self.max_message_bytes}")
        self._ws.send(message)
        return self._seq

    def _receive(self, ws: ClientConnection, until: float, what: str) -> tuple[str, dict[str, Any], int]:
        left = until - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"no {what} within {self.timeout_s:g} s")
        frame = ws.recv(timeout=left)
        if isinstance(frame, str):
            self._drop()
            raise WireFormatError(f"vla-eval server {self.uri}: a text frame instead of msgpack: {frame[:200]!r}")
        try:
            return unpack_message(frame)
        except WireFormatError as exc:
            self._drop()
            raise WireFormatError(f"vla-eval server {self.uri}: {exc}") from exc

    def _connection(self) -> ClientConnection:
        if self._ws is not None:
            return self._ws
        last: Exception | None = None
        for attempt in range(self.connect_attempts):
            if attempt:
                time.sleep(self.connect_interval_s)  # pacing between attempts, not synchronisation
            try:
                ws = connect(self.uri, compression=None, max_size=self.max_message_bytes, ping_interval=None,
                             open_timeout=self.timeout_s, close_timeout=5, **_LONG_LIVED)
            except InvalidURI as exc:
                raise ValueError(f"vla-eval server: bad address {self.uri!r} ({exc})") from exc
            except (OSError, InvalidHandshake) as exc:
                last = exc
                continue
            self._ws, self._episode_seq = ws, None
            try:
                self._handshake(ws)
            except BaseException:
                self._drop()
                raise
            self.connections_opened += 1
            return ws
        raise ConnectionError(f"vla-eval server {self.uri}: no connection after {self.connect_attempts} attempts "
                              f"({last})")

    def _handshake(self, ws: ClientConnection) -> None:
        try:
            self._send(HELLO, {"harness_version": f"robofollow-{__version__}", "protocol_version": PROTOCOL_VERSION,
                               "benchmark": "robofollow"})
            kind, hello, _ = self._receive(ws, time.perf_counter() + self.timeout_s, "hello")
        except (OSError, ConnectionClosed) as exc:
            raise ConnectionError(f"vla-eval server {self.uri}: no hello ({exc})") from exc
        if kind != HELLO:
            raise WireFormatError(f"vla-eval server {self.uri}: answered hello with {kind} "
                                  f"{_error_text(hello) if kind == ERROR else ''}".rstrip())
        version = hello.get("protocol_version")
        if version != PROTOCOL_VERSION:
            raise ProtocolVersionError(f"vla-eval server {self.uri}: protocol_version {str(version)[:20]} "
                                       f"(harness {str(hello.get('harness_version'))[:40]}); we speak "
                                       f"{PROTOCOL_VERSION}")
        check_action_spec(hello.get("action_spec"), self.uri)
        check_observation_spec(hello.get("observation_spec"), self.uri)
        params = hello.get("observation_params")
        wanted = params.get("image_format") if isinstance(params, dict) else None
        if self.requested_image_format is None and wanted in IMAGE_FORMATS:
            self.image_format = wanted
        self.server_hello = hello

    def _drop(self) -> None:
        self._episode_seq = None
        if self._ws is not None:
            ws, self._ws = self._ws, None
            ws.close()


def _error_text(payload: dict[str, Any]) -> str:
    return str(payload.get("error", payload))[:2000]


def _json_safe(value: Any, depth: int = 0) -> Any:
    """What a server sent, as JSON can hold it (run.json): bytes and arrays summarised, depth bounded."""
    if depth > 8:
        return "..."
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in list(value.items())[:200]}
    if isinstance(value, list | tuple):
        return [_json_safe(v, depth + 1) for v in value[:200]]
    if isinstance(value, np.ndarray):
        return f"<array {value.dtype} {list(value.shape)}>"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, str):
        return value[:2000]
    return value
