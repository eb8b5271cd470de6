"""``gr00t://HOST:PORT``: a policy served by an NVIDIA Isaac-GR00T policy server (N1.5, N1.6, N1.7).

Protocol facts (``gr00t/policy/server_client.py`` N1.6, ``gr00t/eval/service.py`` N1.5): ZMQ REQ/REP,
one msgpack frame each way; a request is ``{"endpoint", "data", "api_token"?}``; the endpoints used
here are ``ping``, ``reset``, ``get_action`` and ``get_modality_config`` — never ``kill`` (any client
past the token check may stop a GR00T server with it; :data:`ENDPOINTS` is the allow-list every call
goes through). N1.6 takes ``data={"observation", "options"}`` and answers ``[action, info]``; N1.5
takes the flat observation as ``data`` and answers the action map, and has no ``reset`` (``api``).
An ``{"error": ...}`` reply or the bytes ``b"ERROR"`` become a one-line :class:`RemotePolicyError`
naming the server.

ZMQ's REQ socket wedges after a lost reply (it will not send again until it receives), so every
receive has a deadline (``poll``), and a timeout closes the socket (linger 0) and opens a fresh one:
the next call starts clean. ``ZMQ_MAXMSGSIZE`` caps what the socket accepts (libzmq drops a peer
that sends more, so an oversize reply ends in the same timeout), and a request over the limit is
refused before it is sent. The first call asks the server for its modality config, records it for
run.json (:meth:`server_info`) and checks the key map against it (one line on a mismatch).
"""

from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np
import zmq

from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError, remote_error
from robofollow_ros.policy.wire.gr00t.codec import ARRAY_FORMS, GR00T_MAX_MESSAGE_BYTES, packb, unpackb
from robofollow_ros.policy.wire.gr00t.observation import (
    APIS,
    check_modality_config,
    from_gr00t_action,
    key_map,
    to_gr00t_observation,
)

#: The only endpoints this client ever calls.
ENDPOINTS = frozenset({"ping", "reset", "get_action", "get_modality_config"})


class Gr00tTimeoutError(TimeoutError, ConnectionError):
    """No reply within the deadline; the socket was replaced, the call was not retried."""


class Gr00tZmqPolicy:
    """Client adapter; ``--kwargs`` take the key map (``preset``, ``video``, ``state``, ``action``,
    ``language``, ``image_size``, ``gripper_range``; see ``observation.py``), ``api`` (``n1.6`` /
    ``n1.5``), ``array_form`` (``npy`` / ``msgpack-numpy``), ``api_token``, ``timeout_s`` and
    ``max_message_bytes``. ``last_timing`` / ``timings`` hold the client-side milliseconds per call."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5555, *, preset: str = "aloha_agilex",
                 video: Any = None, state: Any = None, action: Any = None, language: Any = None,
                 image_size: Any = None, gripper_range: Any = None, api: str = "n1.6", array_form: str = "npy",
                 api_token: str | None = None, timeout_s: float = 60.0,
                 max_message_bytes: int = GR00T_MAX_MESSAGE_BYTES, check_modality: bool = True,
                 timing_history: int = 1000) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        if not isinstance(timeout_s, int | float) or not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        if api not in APIS:
            raise ValueError(f"api: {api!r} is not one of {', '.join(APIS)}")
        if array_form not in ARRAY_FORMS:
            raise ValueError(f"array_form: {array_form!r} is not one of {', '.join(ARRAY_FORMS)}")
        if type(max_message_bytes) is not int or max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes: expected an integer >= 1024, got {max_message_bytes!r}")
        self.keys = key_map(preset, video=video, state=state, action=action, language=language,
                            image_size=image_size, gripper_range=gripper_range)
        host_part = f"[{host}]" if ":" in host else host
        self.address = f"tcp://{host_part}:{port}"
        self.server = f"gr00t://{host_part}:{port}"
        self.api = api
        self.array_form = array_form
        self.api_token = api_token
        self.timeout_s = float(timeout_s)
        self.max_message_bytes = max_message_bytes
        self.check_modality = check_modality
        self.instruction = ""
        self.modality_config: Any = None
        self.last_timing: dict[str, float] = {}
        self.timings: collections.deque[dict[str, float]] = collections.deque(maxlen=timing_history)
        self.sockets_opened = 0
        self._checked = False
        self._context = zmq.Context()
        self._socket: zmq.Socket[bytes] | None = None

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        self._ensure_checked()
        if self.api == "n1.6":  # N1.5 servers register no reset endpoint
            self.call("reset", {"options": None})

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        self._ensure_checked()
        observation = to_gr00t_observation(obs, self.instruction, self.keys, self.api)
        data = {"observation": observation, "options": None} if self.api == "n1.6" else observation
        reply = self.call("get_action", data)
        try:
            return from_gr00t_action(reply, self.keys)
        except ValueError as exc:
            raise WireFormatError(f"GR00T server {self.server}: {exc}") from None

    def close(self) -> None:
        self._drop()
        self._context.term()

    def server_info(self) -> dict[str, Any]:
        """What run.json records: the server, the api and array form, its modality config, the key map."""
        self._ensure_checked()
        return {"protocol": "gr00t", "server": self.server, "api": self.api, "array_form": self.array_form,
                "modality_config": self.modality_config, "key_map": self.keys.describe()}

    # ------------------------------------------------------------------ transport
    def call(self, endpoint: str, data: Any = None) -> Any:
        """One request and its reply; bounded in size and time."""
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint: {endpoint!r} is not one this client calls ({', '.join(sorted(ENDPOINTS))})")
        request: dict[str, Any] = {"endpoint": endpoint}
        if data is not None:
            request["data"] = data
        if self.api_token:
            request["api_token"] = self.api_token
        message = packb(request, self.array_form)
        if len(message) > self.max_message_bytes:
            raise WireFormatError(f"GR00T server {self.server}: {endpoint} request of {len(message):,} bytes exceeds "
                                  f"the limit of {self.max_message_bytes:,} (max_message_bytes)")
        sock = self._connection()
        start = time.perf_counter()
        deadline = time.monotonic() + self.timeout_s
        try:
            if not sock.poll(self._left_ms(deadline), zmq.POLLOUT):
                raise self._timeout(endpoint, "could not send")
            sock.send(message, zmq.NOBLOCK, copy=False)
            if not sock.poll(self._left_ms(deadline), zmq.POLLIN):
                raise self._timeout(endpoint, "no reply")
            reply = sock.recv(zmq.NOBLOCK, copy=True)
        except zmq.ZMQError as exc:
            self._drop()
            raise ConnectionError(f"GR00T server {self.server}: {endpoint} failed ({exc}); not retried") from exc
        timing = {"client_ms": 1000 * (time.perf_counter() - start)}
        self.last_timing = timing
        self.timings.append(timing)
        if reply == b"ERROR":
            raise RemotePolicyError(f"GR00T server {self.server}: {endpoint} answered b'ERROR' (is it a GR00T "
                                    "policy server?)")
        try:
            response = unpackb(reply, max_bytes=self.max_message_bytes)
        except WireFormatError as exc:
            raise WireFormatError(f"GR00T server {self.server}: {endpoint} reply: {exc}") from None
        if isinstance(response, dict) and "error" in response:
            raise remote_error(f"GR00T server {self.server}: {endpoint} failed: ", response["error"], 500)
        return response

    def _ensure_checked(self) -> None:
        if self._checked:
            return
        self.modality_config = self.call("get_modality_config")
        if self.check_modality:
            try:
                check_modality_config(self.modality_config, self.keys, self.server)
            except ValueError as exc:
                raise RemotePolicyError(str(exc)) from None
        self._checked = True

    @staticmethod
    def _left_ms(deadline: float) -> int:
        return max(0, int(1000 * (deadline - time.monotonic())))

    def _timeout(self, endpoint: str, what: str) -> Gr00tTimeoutError:
        self._drop()  # a REQ socket that lost its reply never sends again: open a fresh one next time
        return Gr00tTimeoutError(f"GR00T server {self.server}: {endpoint}: {what} within {self.timeout_s:g} s "
                                 "(socket reopened; not retried)")

    def _connection(self) -> zmq.Socket[bytes]:
        if self._socket is None:
            sock = self._context.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
            sock.setsockopt(zmq.RCVHWM, 2)
            sock.connect(self.address)
            self._socket = sock
            self.sockets_opened += 1
        return self._socket

    def _drop(self) -> None:
        if self._socket is not None:
            sock, self._socket = self._socket, None
            sock.close(linger=0)
