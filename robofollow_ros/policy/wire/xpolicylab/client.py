"""``xpolicylab://HOST:PORT[/PATH]``: a policy served by XPolicyLab's websocket policy server.

Protocol facts (XPolicyLab ``client_server/ws/``; default port 19000): binary msgpack frames in the
envelope of :mod:`.messages`; the evaluator says ``hello`` once per connection, ``prepare_case`` per
action case, ``reset`` per trial, ``infer`` with ``{"observation": ...}`` per step (answered with
``{"actions", "latency_ms"}``), ``trial_end`` after a trial and ``close`` before leaving. Their server
answers a failure with an ``error`` frame ``{"code", "message", "details"}``; it ignores text and
undecodable frames without answering, so every wait here has a deadline.

Our policy calls map onto that lifecycle lazily, so that ``reset()`` alone (the evaluator's probe)
sends nothing: the first ``predict`` after a ``reset`` sends ``prepare_case`` when the instruction
differs from the prepared case's (the case id counts cases, its payload carries the instruction),
then ``reset`` for a new trial id, then ``infer`` with ``step`` counting from 0; the next ``reset`` or
``close`` ends the trial with ``trial_end`` (no result: scores stay on our side). One request is in
flight at a time; a reply must carry the request's ``message_id``. A timeout or a broken connection
drops the connection and is never replayed: the next call reconnects, says ``hello`` and starts a
fresh trial (their model's state is per server, so a half-finished episode must not continue).
"""

from __future__ import annotations

import collections
import inspect
import itertools
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection, connect

from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError, remote_error
from robofollow_ros.policy.wire.xpolicylab import messages as msg
from robofollow_ros.policy.wire.xpolicylab.codec import (
    XPOLICYLAB_MAX_REPLY_BYTES,
    XPOLICYLAB_MAX_REQUEST_BYTES,
    packb,
    unpackb,
)
from robofollow_ros.policy.wire.xpolicylab.observation import (
    camera_map,
    from_xpolicylab_actions,
    to_xpolicylab_observation,
)

#: websockets >= 17 warns unless a long-lived connection says so explicitly; older versions lack the flag.
_LONG_LIVED: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


class XPolicyLabPolicy:
    """Client adapter; ``last_timing`` holds the latest ``latency_ms`` (the server's) and ``client_ms``,
    ``timings`` the most recent ``timing_history`` of them."""

    def __init__(self, host: str = "127.0.0.1", port: int = 19000, path: str = "", *,
                 timeout_s: float | str = 120.0, connect_timeout_s: float | str = 30.0,
                 connect_attempts: int | str = 10, connect_interval_s: float | str = 1.0,
                 evaluation_id: str | None = None, cameras: Mapping[str, str] | str | None = None,
                 max_message_bytes: int | str = XPOLICYLAB_MAX_REQUEST_BYTES,
                 max_reply_bytes: int | str = XPOLICYLAB_MAX_REPLY_BYTES, timing_history: int = 1000) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        self.timeout_s = _positive("timeout_s", timeout_s)
        self.connect_timeout_s = _positive("connect_timeout_s", connect_timeout_s)
        self.connect_interval_s = _positive("connect_interval_s", connect_interval_s, allow_zero=True)
        self.connect_attempts = int(_positive("connect_attempts", connect_attempts))
        self.max_message_bytes = int(_positive("max_message_bytes", max_message_bytes))
        self.max_reply_bytes = int(_positive("max_reply_bytes", max_reply_bytes))
        self.cameras = camera_map(cameras)
        self.uri = f"ws://{host}:{port}{path}"
        self.evaluation_id = evaluation_id or f"robofollow-{uuid.uuid4().hex[:12]}"
        self.instruction = ""
        self.hello_ack: dict[str, Any] = {}
        self.last_timing: dict[str, Any] = {}
        self.timings: collections.deque[dict[str, Any]] = collections.deque(maxlen=timing_history)
        self.connections_opened = 0
        self._ws: ClientConnection | None = None
        self._closing = threading.Event()
        self._ids = itertools.count()
        self._cases = itertools.count()
        self._trials = itertools.count()
        self._case: tuple[str, str] | None = None  # (case id, instruction) the server has prepared
        self._repeat = 0
        self._trial: str | None = None  # the open trial's id
        self._step = 0

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        """End the open trial (``trial_end``); the next ``predict`` starts a new one."""
        self._end_trial()

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        observation = to_xpolicylab_observation(obs, self.instruction, self.cameras)
        if self._trial is None:
            self._start_trial(observation["instruction"])
        assert self._trial is not None and self._case is not None
        start = time.perf_counter()
        reply = self._request(msg.INFER, {"observation": observation}, trial_id=self._trial, step=self._step)
        client_ms = 1000 * (time.perf_counter() - start)
        self._step += 1
        payload = reply["payload"]
        if "actions" not in payload:
            raise WireFormatError(f"xpolicylab server {self.uri}: infer_result has no 'actions' "
                                  f"(keys {sorted(map(str, payload))[:5]})")
        try:
            actions = from_xpolicylab_actions(payload["actions"])
        except ValueError as exc:
            raise WireFormatError(f"xpolicylab server {self.uri}: infer_result {exc}") from exc
        latency = payload.get("latency_ms")
        self.last_timing = {"client_ms": client_ms,
                            "latency_ms": float(latency) if isinstance(latency, int | float) else None}
        self.timings.append(self.last_timing)
        return actions

    def close(self) -> None:
        self._closing.set()
        if self._ws is not None:
            try:
                self._end_trial()
                self._ws.send(packb(self._envelope(msg.CLOSE, {"reason": "robofollow client closing"})))
            except (OSError, ConnectionClosed, RemotePolicyError, WireFormatError):
                pass  # closing anyway
        self._drop()

    def server_info(self) -> dict[str, Any]:
        """What the server said about itself (the ``hello_ack`` payload) and the ids this run sends, for
        run.json. Connects when not connected (``ConnectionError`` when it cannot)."""
        self._connection()
        return {"protocol": "xpolicylab", "hello_ack": dict(self.hello_ack), "evaluation_id": self.evaluation_id}

    # ------------------------------------------------------------------ lifecycle
    def _start_trial(self, instruction: str) -> None:
        if self._case is None or self._case[1] != instruction:
            case_id = f"case-{next(self._cases)}"
            self._request(msg.PREPARE_CASE, {"action_case_id": case_id, "instruction": instruction},
                          action_case_id=case_id)
            self._case, self._repeat = (case_id, instruction), 0
        else:
            self._repeat += 1
        trial_id = f"trial-{next(self._trials)}"
        self._request(msg.RESET, {"trial_id": trial_id}, trial_id=trial_id)
        self._trial, self._step = trial_id, 0

    def _end_trial(self) -> None:
        trial, self._trial = self._trial, None
        if trial is not None and self._ws is not None:
            self._request(msg.TRIAL_END, {"trial_id": trial}, trial_id=trial)

    def _envelope(self, kind: str, payload: dict[str, Any], *, trial_id: str | None = None,
                  step: int = 0, action_case_id: str | None = None) -> dict[str, Any]:
        case = action_case_id or (self._case[0] if self._case else None)
        return msg.envelope(kind, f"{self.evaluation_id}-{next(self._ids)}", self.evaluation_id, payload,
                            action_case_id=case, trial_id=trial_id,
                            repeat_index=self._repeat if trial_id is not None else None, step=step)

    def _request(self, kind: str, payload: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """Send one request and wait (at most ``timeout_s``) for its answer; an ``error`` answer raises
        :class:`RemotePolicyError` with the server's code and message on one line."""
        frame = self._envelope(kind, payload, **fields)
        data = packb(frame)
        if len(data) > self.max_message_bytes:
            raise WireFormatError(f"{kind} request: {len(data)} bytes exceed the limit of {self.max_message_bytes}")
        ws = self._connection() if kind != msg.HELLO else self._ws
        assert ws is not None
        try:
            ws.send(data)
            raw = ws.recv(timeout=self.timeout_s)
        except TimeoutError as exc:
            self._lost()
            raise TimeoutError(f"xpolicylab server {self.uri}: no {msg.REPLY_TO[kind]} within {self.timeout_s:g} s; "
                               "connection dropped, not retried") from exc
        except (OSError, ConnectionClosed) as exc:
            self._lost()
            raise ConnectionError(f"xpolicylab server {self.uri}: {kind} failed ({exc}); not retried") from exc
        try:
            if isinstance(raw, str):
                raise WireFormatError(f"expected a binary frame, got text {raw[:120]!r}")
            reply = msg.check_reply(unpackb(raw))
            if reply["message_id"] != frame["message_id"]:
                raise WireFormatError(f"{reply['message_type']} answers message_id {reply['message_id'][:60]!r}, "
                                      f"not {frame['message_id']!r}")
        except WireFormatError as exc:
            self._lost()
            raise WireFormatError(f"xpolicylab server {self.uri}: bad answer to {kind}: {exc}") from exc
        if reply["message_type"] == msg.ERROR:
            error = reply["payload"]
            code, text = str(error.get("code", "internal"))[:60], str(error.get("message", ""))
            if kind == msg.RESET or kind == msg.PREPARE_CASE:
                self._trial = None
            raise remote_error(f"xpolicylab server {self.uri}: {kind} failed: {code}: ", text, 500)
        if reply["message_type"] != msg.REPLY_TO[kind]:
            self._lost()
            raise WireFormatError(f"xpolicylab server {self.uri}: {kind} answered with {reply['message_type']}, "
                                  f"expected {msg.REPLY_TO[kind]}")
        return reply

    # ------------------------------------------------------------------ transport
    def _connection(self) -> ClientConnection:
        if self._ws is not None:
            return self._ws
        self._closing.clear()
        last: Exception | None = None
        for attempt in range(self.connect_attempts):
            if attempt and self._closing.wait(self.connect_interval_s):
                break
            try:
                ws = connect(self.uri, compression=None, max_size=self.max_reply_bytes,
                             open_timeout=self.connect_timeout_s, close_timeout=5, **_LONG_LIVED)
            except InvalidURI as exc:
                raise ValueError(f"xpolicylab server: bad address {self.uri!r} ({exc})") from exc
            except (OSError, InvalidHandshake) as exc:
                last = exc
                continue
            self._ws = ws
            try:
                self.hello_ack = dict(self._request(msg.HELLO, {})["payload"])
            except Exception:
                self._drop()
                raise
            self.connections_opened += 1
            return ws
        raise ConnectionError(f"xpolicylab server {self.uri}: no connection after {self.connect_attempts} attempts "
                              f"({last})")

    def _lost(self) -> None:
        """The connection is unusable: drop it; the server's case and trial state are no longer ours."""
        self._case, self._trial = None, None
        self._drop()

    def _drop(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            ws.close()


def _positive(name: str, value: Any, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not (number >= 0 if allow_zero else number > 0) or number != number or number == float("inf"):
        raise ValueError(f"{name}: expected a positive number, got {value!r}")
    return number
