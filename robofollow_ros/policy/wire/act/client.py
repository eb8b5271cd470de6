"""``act+http://HOST:PORT[/PATH][?preset=...&KEY=VALUE]``: a policy behind a json_numpy ``POST /act`` server.

Peers: openvla-oft's ``deploy.py`` (``preset=openvla-oft-aloha``, the default), X-VLA
(``preset=xvla``, refused unless told the checkpoint outputs joints), GR00T's ``http_server.py``
(``preset=gr00t-http``), AutoEval-style servers and anything else through the key map
(``presets.py``). The path defaults to ``/act``.

Transport: the standard library's ``http.client``, one connection per request (as openvla-oft's
``requests.post`` does; uvicorn drops idle keep-alive connections after 5 s, and a request is never
replayed on a stale one because a stateful server must not advance twice). Bounds: a connect
deadline, a deadline for the whole reply (``timeout_s``, from the request's first byte to the
reply's last), a reply of at most ``max_reply_bytes`` (announced or counted), redirects never
followed (a 3xx is an error naming where it pointed). No pickle anywhere.

Errors, one line each naming the server: the JSON string ``"error"`` with HTTP 200 (openvla-oft's
failure reply; its reason is only in the server's log), any other status with the body's
``error`` / ``detail`` text (X-VLA's 400 ``{"error"}``, FastAPI's ``{"detail"}``, ours), a reply the
preset cannot read.

Sessions: each episode sends a fresh ``X-Session-ID`` header (a random token; ``reset`` makes a new
one). Peers ignore it; ``robofollow serve --protocol act`` keys its policy sessions on it, so an
episode's state stays its own even with many evaluators on one server. The instruction travels with
every request, as every peer of this family expects.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import secrets
import socket
import time
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.act.codec import ACT_MAX_BODY_BYTES, decode_reply, encode_body, loads
from robofollow_ros.policy.wire.act.presets import DEFAULT_PRESET, build_preset, from_reply, to_request
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError, remote_error, server_reason

SESSION_HEADER = "X-Session-ID"
_READ = 256 * 1024


class ActHttpPolicy:
    """Client adapter; ``last_timing`` holds the latest ``client_ms`` and ``timings`` the recent ones."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8777, path: str = "/act", *,
                 preset: str = DEFAULT_PRESET, timeout_s: float | str = 300.0,
                 connect_timeout_s: float | str = 10.0, max_reply_bytes: int | str = ACT_MAX_BODY_BYTES,
                 domain_id: Any = None, timing_history: int = 1000, **key_map: Any) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port: {port!r} is not a TCP port (1..65535)")
        self.timeout_s = _positive("timeout_s", timeout_s)
        self.connect_timeout_s = _positive("connect_timeout_s", connect_timeout_s)
        try:
            self.max_reply_bytes = int(max_reply_bytes)
        except (TypeError, ValueError):
            raise ValueError(f"max_reply_bytes: {max_reply_bytes!r} is not an integer") from None
        if self.max_reply_bytes < 1024:
            raise ValueError(f"max_reply_bytes: {self.max_reply_bytes} is below 1024")
        if not path.startswith("/") or any(c in path for c in " \r\n"):
            raise ValueError(f"path: {path!r} is not a URL path")
        self.preset = build_preset(preset, key_map, domain_id)
        self.host, self.port, self.path = host, port, path
        netloc = f"[{host}]" if ":" in host else host
        self.url = f"http://{netloc}:{port}{path}"
        self.instruction = ""
        self.session_id = secrets.token_hex(8)
        self.session_used = False
        #: Whether the server ends a session on ``POST /reset`` (ours says so at ``/health``); None: not asked yet.
        self.ends_sessions: bool | None = None
        self.requests = 0
        self.last_timing: dict[str, Any] = {}
        self.timings: collections.deque[dict[str, Any]] = collections.deque(maxlen=timing_history)

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        """A new episode: a new session token (our server gives it a fresh policy session); the old one is ended."""
        self._end_session()
        self.session_id = secrets.token_hex(8)

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        request = to_request(self.preset, obs, obs.get("instruction") or self.instruction)
        body = encode_body(request, self.preset.encoded)
        start = time.perf_counter()
        self.session_used = True
        status, reply_body = self._post(self.path, body)
        client_ms = 1000 * (time.perf_counter() - start)
        self.requests += 1
        reply = self._reply(status, reply_body)
        chunk = from_reply(self.preset, reply, f"act server {self.url}")
        self.last_timing = {"client_ms": client_ms, "request_bytes": len(body), "reply_bytes": len(reply_body)}
        self.timings.append(self.last_timing)
        return chunk

    def close(self) -> None:
        """End the session on a server that keeps one per token (ours: issue 36, 70 short-lived clients held 64
        sessions for the frame timeout and locked the next ones out); nothing else is held between requests."""
        self._end_session()

    def _end_session(self) -> None:
        """``POST /reset`` for the session in use, where the server ends sessions that way; best effort."""
        if not self.session_used:
            return
        self.session_used = False
        if self.ends_sessions is None:
            self.ends_sessions = "session_header" in self.server_info().get("health", {})
        if self.ends_sessions:
            with contextlib.suppress(Exception):
                self._post(_sibling(self.path, "reset"), b"")

    def server_info(self) -> dict[str, Any]:
        """What the server says at ``GET /health`` (GR00T's and ours answer; openvla-oft has none: {}).

        Recorded in run.json; a server without the endpoint is not an error."""
        try:
            status, body = self._request("GET", _sibling(self.path, "health"), None)
            info = loads(body, "health") if status == 200 else None
        except (OSError, WireFormatError, RemotePolicyError):
            return {"url": self.url, "preset": self.preset.name}
        return {"url": self.url, "preset": self.preset.name, **({"health": info} if isinstance(info, dict) else {})}

    # ------------------------------------------------------------------ transport
    def _reply(self, status: int, body: bytes) -> Any:
        where = f"act server {self.url}"
        if 300 <= status < 400:
            raise RemotePolicyError(f"{where}: HTTP {status} redirect; not followed (give the final URL)")
        if status != 200:
            raise RemotePolicyError(f"{where}: HTTP {status}: {server_reason(_error_text(body))}",
                                    _traceback_text(body) or _error_text(body))
        reply = decode_reply(body, self.preset.encoded)
        if isinstance(reply, str):
            if reply != "error":
                raise RemotePolicyError(f"{where}: answered the string {reply[:200]!r}, not actions")
            raise RemotePolicyError(f"{where}: answered \"error\" (the request failed on the server; its log has "
                                    "the traceback)")
        if isinstance(reply, dict) and "error" in reply and not (
                self.preset.reply_key and all(k in reply for k in self.preset.reply_key)):
            raise remote_error(f"{where}: ", reply["error"])
        return reply

    def _post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        where = f"act server {self.url}"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout_s)
        try:
            try:
                conn.connect()
            except OSError as exc:
                raise ConnectionError(f"{where}: cannot connect ({exc})") from exc
            deadline = time.monotonic() + self.timeout_s
            sock = conn.sock
            assert sock is not None
            sock.settimeout(self.timeout_s)
            headers = {SESSION_HEADER: self.session_id, "Connection": "close", "Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, self._read(response, sock, deadline)
            except TimeoutError as exc:
                raise TimeoutError(f"{where}: no complete reply within {self.timeout_s:g} s") from exc
            except (OSError, http.client.HTTPException) as exc:
                raise ConnectionError(f"{where}: {method} {path} failed ({type(exc).__name__}: {exc}); "
                                      "not retried") from exc
        finally:
            conn.close()

    def _read(self, response: http.client.HTTPResponse, sock: socket.socket, deadline: float) -> bytes:
        announced = response.getheader("Content-Length")
        if announced is not None and announced.isdigit() and int(announced) > self.max_reply_bytes:
            raise WireFormatError(f"act server {self.url}: reply of {int(announced):,} bytes exceeds the limit "
                                  f"of {self.max_reply_bytes:,} (max_reply_bytes)")
        parts: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"act server {self.url}: no complete reply within {self.timeout_s:g} s")
            sock.settimeout(left)
            chunk = response.read1(_READ)
            if not chunk:
                return b"".join(parts)
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise WireFormatError(f"act server {self.url}: reply exceeds the limit of {self.max_reply_bytes:,} "
                                      "bytes (max_reply_bytes)")
            parts.append(chunk)


def _sibling(path: str, name: str) -> str:
    """``/act`` → ``/health``; ``/v1/act`` → ``/v1/health``."""
    return path.rsplit("/", 1)[0] + "/" + name


def _error_text(body: bytes) -> str:
    try:
        value = json.loads(body[:65536].decode("utf-8", "replace"))
    except ValueError:
        return body[:65536].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(value, dict):
        for key in ("error", "detail", "message"):
            if key in value:
                return str(value[key])[:65536]
    return str(value)[:65536]


def _traceback_text(body: bytes) -> str:
    try:
        value = json.loads(body[:1 << 20].decode("utf-8", "replace"))
    except ValueError:
        return ""
    return str(value.get("traceback", "")) if isinstance(value, dict) else ""


def _positive(name: str, value: float | str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {value!r} is not a number of seconds") from None
    if not number > 0:
        raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
    return number
