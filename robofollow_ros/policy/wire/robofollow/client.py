"""``tcp://HOST:PORT``: a policy that lives in a RoboFollow policy server (spec section f).

Behaviour follows the reference client, because a stateful model must never see a command twice:
connect lazily with ``connect_attempts`` tries ``connect_interval_s`` apart; one timeout bounds
connect, send, the wait for a reply and (as a deadline) the whole reply; on a socket error or
timeout the socket is closed and only ``reset`` is replayed (once, after reconnecting);
``predict`` and ``set_instruction`` raise :class:`ConnectionError` and the next call reconnects.

A timed-out call never leaves a stale session behind (issue 23): when the client's own timeout
fires the socket is closed (above), and when the server answers that the policy timed out or is
still busy with a call that did (``PolicyTimeoutError`` / ``PolicyBusyError`` in its reply), the
client closes the connection too, so the next trial starts on a fresh connection, and so a fresh
session, even on a server that does not drop stuck sessions itself (ours does).

The predict request is the observation contract (``policy.observation.contract_observation``): three
RGB images, the joint vector and the instruction, as the official ``remote_policy.py`` sends them.
``obs["privileged"]`` is forwarded only by a client built with ``forward_privileged=True``, which
``spec.load_policy`` sets from the run's ``--privileged`` and nothing else.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import contract_observation
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError, server_reason
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message_parts
from robofollow_ros.policy.wire.robofollow.framing import check_frame_length, recv_frame, send_frame


def wire_observation(obs: Observation, instruction: str, *, forward_privileged: bool = False) -> dict[str, Any]:
    """The predict payload: the contract's three RGB images, the joint vector and the instruction
    (``obs``'s own, else ``instruction``), and ``obs["privileged"]`` only with ``forward_privileged``.

    Depth, segmentation and any other simulator keys are left out (the request stays about 0.92 MB at
    320×240); a vector that is not 14 finite floats is refused here, before anything is sent.
    """
    privileged = obs.get("privileged") if forward_privileged else None
    return contract_observation(obs, obs.get("instruction") or instruction or "", privileged=privileged)


class RoboFollowTcpPolicy:
    """Client adapter for ``robofollow serve`` and for the published RoboFollow ``serve.py``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8999, *, timeout_s: float = 120.0,
                 connect_attempts: int = 20, connect_interval_s: float = 1.0,
                 reset_cmd: str = "reset", set_instruction_cmd: str = "set_instruction",
                 predict_cmd: str = "predict", forward_privileged: bool = False) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        if connect_attempts < 1:
            raise ValueError(f"connect_attempts: expected >= 1, got {connect_attempts!r}")
        self.host, self.port = host, port
        self.timeout_s = float(timeout_s)
        self.connect_attempts = connect_attempts
        self.connect_interval_s = float(connect_interval_s)
        self.commands = {"reset": reset_cmd, "set_instruction": set_instruction_cmd, "predict": predict_cmd}
        self.instruction = ""
        #: Forward ``obs["privileged"]`` (set by ``load_policy`` from the run's ``--privileged`` only).
        self.forward_privileged = bool(forward_privileged)
        self._sock: socket.socket | None = None
        self._closing = threading.Event()
        #: Connections opened so far (tests and logs use it to see reconnects).
        self.connections_opened = 0

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        self._call("reset", None, replay=True)

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""
        self._call("set_instruction", self.instruction, replay=False)

    def predict(self, obs: Observation) -> np.ndarray:
        payload = wire_observation(obs, self.instruction, forward_privileged=self.forward_privileged)
        result = self._call("predict", payload, replay=False)
        if not isinstance(result, np.ndarray):
            raise WireFormatError(f"response: predict returned {type(result).__name__}, expected an encoded array")
        return result

    def close(self) -> None:
        self._closing.set()
        self._drop()

    # ------------------------------------------------------------------ transport
    def _connect(self) -> socket.socket:
        last: OSError | None = None
        for attempt in range(self.connect_attempts):
            if attempt and self._closing.wait(self.connect_interval_s):
                break
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            except OSError as exc:
                last = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections_opened += 1
            return sock
        raise ConnectionError(f"policy server tcp://{self.host}:{self.port}: no connection after "
                              f"{self.connect_attempts} attempts ({last})")

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _exchange(self, body: list[bytes]) -> Any:
        if self._sock is None:
            self._sock = self._connect()
        sock = self._sock
        send_frame(sock, body)  # the pieces of the body, sent without joining them
        try:
            reply = recv_frame(sock, idle_timeout_s=self.timeout_s, frame_timeout_s=self.timeout_s)
        except WireFormatError:
            self._drop()  # a bad response length: the stream is out of sync
            raise
        if reply is None:
            raise ConnectionResetError("policy server closed the connection without answering")
        return decode_message(reply)

    def _call(self, name: str, obs: Any, *, replay: bool) -> Any:
        cmd = self.commands[name]
        body = encode_message_parts({"cmd": cmd, "obs": obs})
        check_frame_length(sum(map(len, body)))  # oversized request: ValueError before anything is sent
        self._closing.clear()
        try:
            response = self._exchange(body)
        except WireFormatError:
            raise
        except OSError as exc:  # timeouts, resets, refused: ConnectionError and TimeoutError included
            self._drop()
            if not replay:
                raise ConnectionError(f"policy server tcp://{self.host}:{self.port}: {name} failed ({exc}); "
                                      "not retried, a replay could advance the policy twice") from exc
            try:
                response = self._exchange(body)
            except OSError as again:
                self._drop()
                raise ConnectionError(f"policy server tcp://{self.host}:{self.port}: {name} failed after "
                                      f"one reconnect ({again})") from again
        try:
            return _result_of(name, response, f"tcp://{self.host}:{self.port}")
        except RemotePolicyError as exc:
            if _STUCK_SESSION.search(exc.remote_traceback):
                self._drop()  # the server's session is stuck in a timed-out call: start the next one afresh
            raise


#: How a server's error reply names a policy call that timed out (or one refused behind it).
_STUCK_SESSION = re.compile(r"\b(PolicyTimeoutError|PolicyBusyError)\b")


def _result_of(name: str, response: Any, where: str = "") -> Any:
    if not isinstance(response, dict):
        raise WireFormatError(f"response: expected a JSON object, got {type(response).__name__}")
    if "error" in response:
        error = str(response["error"])
        trace = str(response.get("traceback") or "")
        server = f"policy server {where}" if where else "policy server"
        raise RemotePolicyError(f"{server}: {name} failed: {server_reason(error)}", trace or error)
    if "res" not in response:
        raise WireFormatError(f"response: no 'res' key in the answer to {name} (keys: {sorted(response)[:5]})")
    return response["res"]
