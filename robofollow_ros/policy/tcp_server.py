"""The RoboFollow policy server (spec section f): one policy behind length-prefixed JSON on TCP.

Like the reference server it serves one connection at a time (later clients wait in the listen
backlog) and shares one policy across connections without resetting it. Differences that a
reference peer cannot notice: a malformed body or a failing policy gets an error reply instead of a
dropped connection; waits are bounded (``idle_timeout_s`` between frames, ``frame_timeout_s``
inside one); error replies keep the ``traceback`` key but carry one line unless ``debug``.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from typing import Any

from robofollow_ros.policy.errors_reply import describe_error
from robofollow_ros.policy.interface import Policy, PolicyError, ValidatedPolicy
from robofollow_ros.policy.robofollow_wire import (
    PeerClosedError,
    WireFormatError,
    check_frame_length,
    decode_message,
    encode_message,
    recv_frame,
    send_frame,
)

LOG = logging.getLogger(__name__)


class RoboFollowTcpServer:
    """Serve ``policy`` on ``host:port`` (port 0 picks a free port; see :attr:`address`)."""

    def __init__(self, policy: Policy, host: str = "127.0.0.1", port: int = 8999, *, debug: bool = False,
                 idle_timeout_s: float = 1800.0, frame_timeout_s: float = 60.0, backlog: int = 8) -> None:
        self.policy = ValidatedPolicy.wrap(policy)
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self._listener = socket.create_server((host, port), family=socket.AF_INET, backlog=backlog,
                                              reuse_port=False)  # create_server sets SO_REUSEADDR
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._conn: socket.socket | None = None
        self._conn_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Counters for logs and tests: connections accepted, requests answered, error replies.
        self.stats = {"connections": 0, "requests": 0, "errors": 0, "dropped": 0}

    # ------------------------------------------------------------------ lifecycle
    def serve_forever(self) -> None:
        """Accept and serve connections one after the other until :meth:`stop`."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stop.is_set():
                ready = [key.fileobj for key, _ in sel.select()]
                if self._wake_r in ready or self._stop.is_set():
                    break
                try:
                    conn, _ = self._listener.accept()
                except OSError:
                    continue
                with self._conn_lock:
                    if self._stop.is_set():
                        conn.close()
                        break
                    self._conn = conn
                try:
                    self._serve_connection(conn)
                finally:
                    with self._conn_lock:
                        self._conn = None
                    conn.close()

    def start(self) -> RoboFollowTcpServer:
        """Serve in a daemon thread; returns ``self`` so ``with RoboFollowTcpServer(...).start()`` reads well."""
        self._thread = threading.Thread(target=self.serve_forever, name="robofollow-tcp-server", daemon=True)
        self._thread.start()
        return self

    def stop(self, join_timeout_s: float = 10.0) -> None:
        """Stop accepting, cut the current connection and close the listening socket."""
        self._stop.set()
        self._wake_w.send(b"x")
        with self._conn_lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(join_timeout_s)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> RoboFollowTcpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ one connection
    def _serve_connection(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stats["connections"] += 1
        while not self._stop.is_set():
            try:
                body = recv_frame(conn, self.idle_timeout_s, self.frame_timeout_s)
            except WireFormatError as exc:  # bad length: drop silently, like the reference
                LOG.warning("dropping connection: %s", exc)
                self.stats["dropped"] += 1
                return
            except (PeerClosedError, OSError) as exc:  # timeouts included
                LOG.info("connection ended: %s", exc)
                return
            if body is None:
                return
            reply = self._answer(body)
            try:
                send_frame(conn, reply)
            except OSError as exc:
                LOG.info("client went away before the reply: %s", exc)
                return

    def _answer(self, body: bytearray) -> bytes:
        self.stats["requests"] += 1
        try:
            request = decode_message(body)
            result = self._dispatch(request)
            reply = encode_message({"res": result})
            check_frame_length(len(reply))
            return reply
        except Exception as exc:
            self.stats["errors"] += 1
            error, trace = describe_error(exc, self.debug)
            LOG.warning("error reply: %s", error)
            return encode_message({"error": error, "traceback": trace})

    def _dispatch(self, request: Any) -> Any:
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            raise WireFormatError("request: expected an object with a string 'cmd'")
        cmd, obs = request["cmd"], request.get("obs")
        if cmd == "reset":
            self.policy.reset()
            return None
        if cmd == "set_instruction":
            if obs is not None and not isinstance(obs, str):
                raise WireFormatError(f"request obs: set_instruction needs a string, got {type(obs).__name__}")
            self.policy.set_instruction(obs or "")
            return None
        if cmd == "predict":
            if not isinstance(obs, dict):
                raise WireFormatError(f"request obs: predict needs an observation object, got {type(obs).__name__}")
            return self.policy.predict(obs)
        raise PolicyError(f"request cmd: unknown command {cmd[:64]!r}; expected reset, set_instruction or predict")
