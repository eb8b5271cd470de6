"""RoboFollow's TCP protocol, server side: what ``robofollow eval --policy tcp://HOST:PORT`` and the
official ``remote_policy.py`` speak.

Requests ``{"cmd": "reset" | "set_instruction" | "predict", "obs": ...}`` answered with
``{"res": ...}`` (``None``, ``None``, the float32 ``[T, 14]`` chunk) or ``{"error", "traceback"}``
(the connection stays open). A bad frame length drops the connection silently, as the reference does.

Bounds: ``max_connections`` threads; ``idle_timeout_s`` for a request's first byte, then one
deadline of ``frame_timeout_s`` for the whole frame (a trickle does not extend it); frames of at
most ``max_frame_bytes``, buffered only as they arrive; the codec's limits (``wire.py``); the
observation reduced to the contract (``contract.py``) before the policy sees it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from robofollow_model_server.contract import check_observation
from robofollow_model_server.serving import (
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    THREAD_PREFIX,
    PolicyHost,
    describe_error,
)
from robofollow_model_server.wire import MAX_FRAME_BYTES, WireError, decode_json, encode_json, frame, frame_length

LOG = logging.getLogger(__name__)
_CHUNK = 1 << 20


class _Closed(Exception):
    """The peer hung up, a wait ran out, or the server is stopping."""


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Closed("frame not complete before its deadline")
            sock.settimeout(left)
        chunk = sock.recv(min(_CHUNK, n - len(buf)))
        if not chunk:
            raise _Closed(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


class TcpServer:
    """Serve ``host`` (a :class:`PolicyHost`) on ``address:port`` (0 picks a free port)."""

    def __init__(self, host: PolicyHost, address: str = "127.0.0.1", port: int = 8999, *, debug: bool = False,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = 8, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.host = host
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_connections = max_connections
        self.max_frame_bytes = min(max_frame_bytes, MAX_FRAME_BYTES)
        self._listener = socket.create_server((address, port))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._open: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TcpServer:
        self._thread = threading.Thread(target=self._accept_loop, name=f"{THREAD_PREFIX}accept", daemon=True)
        self._thread.start()
        return self

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, cut every connection, and join their threads (each finishes a policy call in progress)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        self._listener.close()
        if self._thread is not None:
            self._thread.join(grace_s)
        with self._lock:
            open_now = dict(self._open)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + grace_s
        for thread in open_now.values():
            thread.join(max(0.0, deadline - time.monotonic()))

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._stopping.is_set() or len(self._open) >= self.max_connections:
                    busy = len(self._open) >= self.max_connections
                    self._refuse(conn, f"server busy: {self.max_connections} connections are open, the limit "
                                       "(--max-connections)" if busy else "server shutting down")
                    continue
                thread = threading.Thread(target=self._serve, args=(conn,), name=f"{THREAD_PREFIX}connection",
                                          daemon=True)
                self._open[conn] = thread
            thread.start()

    def _refuse(self, conn: socket.socket, error: str) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.sendall(frame(encode_json({"error": error, "traceback": f"ServerBusyError: {error}"})))
        conn.close()

    def _serve(self, conn: socket.socket) -> None:
        owner = object()
        holding = False
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._stopping.is_set():
                try:
                    body = self._read_frame(conn)
                except (WireError, _Closed, OSError) as exc:
                    LOG.info("connection ended: %s", exc)
                    return
                if body is None:
                    return
                try:
                    request = decode_json(body)
                    del body
                    if not holding:
                        self.host.acquire(owner)
                        holding = True
                    reply = encode_json({"res": self._dispatch(request)})
                except Exception as exc:
                    error, trace = describe_error(exc, self.debug)
                    LOG.warning("error reply: %s", error)
                    reply = encode_json({"error": error, "traceback": trace})
                try:
                    conn.settimeout(self.frame_timeout_s)
                    conn.sendall(frame(reply))
                except (OSError, WireError) as exc:
                    LOG.info("client went away before the reply: %s", exc)
                    return
        finally:
            if holding:
                self.host.release(owner)
            conn.close()
            with self._lock:
                self._open.pop(conn, None)

    def _read_frame(self, conn: socket.socket) -> bytearray | None:
        conn.settimeout(self.idle_timeout_s)
        first = conn.recv(4)
        if not first:
            return None
        deadline = time.monotonic() + self.frame_timeout_s  # the clock starts at the frame's first byte
        header = bytes(first) + bytes(_recv_exact(conn, 4 - len(first), deadline))
        return _recv_exact(conn, frame_length(header, self.max_frame_bytes), deadline)

    def _dispatch(self, request: Any) -> Any:
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            raise WireError("request: expected an object with a string 'cmd'")
        cmd, obs = request["cmd"], request.get("obs")
        if cmd == "reset":
            self.host.reset()
            return None
        if cmd == "set_instruction":
            self.host.set_instruction(obs)
            return None
        if cmd == "predict":
            return self.host.predict(check_observation(obs))
        raise WireError(f"request cmd: unknown command {cmd[:64]!r}; expected reset, set_instruction or predict")
