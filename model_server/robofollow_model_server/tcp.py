"""RoboFollow's TCP protocol, server side: what ``robofollow eval --policy tcp://HOST:PORT`` and the
official ``remote_policy.py`` speak.

Requests ``{"cmd": "reset" | "set_instruction" | "predict", "obs": ...}`` answered with
``{"res": ...}`` (``None``, ``None``, the float32 ``[T, 14]`` chunk) or ``{"error", "traceback"}``
(the connection stays open). A bad frame length drops the connection silently, as the reference does.

Bounds: ``max_connections`` reclaimable slots (``bounds.py``: silent or trickling sockets give theirs
to a newcomer; a refused connection reads its error reply, then the rest of what it sends is dropped
before the close); ``idle_timeout_s`` for a request's first byte, then one deadline of
``frame_timeout_s`` for the whole frame (a trickle does not extend it); frames of at most
``max_frame_bytes``, buffered only as they arrive and charged to one memory budget across connections
(``max_pending_bytes``: the body as it arrives plus what decoding builds, twice its size); the codec's
limits (``wire.py``); the observation reduced to the contract (``contract.py``) before the policy sees it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from robofollow_model_server.bounds import (
    BUSY,
    DEFAULT_BUDGET_WAIT_S,
    DEFAULT_MAX_PENDING_BYTES,
    HEAD,
    IDLE,
    ConnectionSlots,
    MemoryBudget,
    MemoryBudgetError,
    Slot,
    bound_heap,
)
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
#: Refused connections answered at once, each reading (and dropping) what its client sends for up to 5 s.
_REFUSERS = 64


class _Closed(Exception):
    """The peer hung up, a wait ran out, or the server is stopping."""


def _recv_exact(sock: socket.socket, n: int, deadline: float | None,
                charge: Callable[[int], bool] = lambda n: True) -> bytearray | None:
    """``n`` bytes before ``deadline``; None if ``charge`` refused a chunk (the rest is read and dropped)."""
    buf: bytearray | None = bytearray()
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Closed("frame not complete before its deadline")
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(_CHUNK, n - got))
        except TimeoutError as exc:
            raise _Closed("frame not complete before its deadline") from exc
        if not chunk:
            raise _Closed(f"peer closed after {got} of {n} bytes")
        got += len(chunk)
        if buf is not None and charge(len(chunk)):
            buf += chunk
        else:
            buf = None  # refused: keep reading, so the next frame starts in step
    return buf


class TcpServer:
    """Serve ``host`` (a :class:`PolicyHost`) on ``address:port`` (0 picks a free port)."""

    def __init__(self, host: PolicyHost, address: str = "127.0.0.1", port: int = 8999, *, debug: bool = False,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, frame_timeout_s: float = DEFAULT_FRAME_TIMEOUT_S,
                 max_connections: int = 8, max_frame_bytes: int = MAX_FRAME_BYTES,
                 max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 budget_wait_s: float = DEFAULT_BUDGET_WAIT_S) -> None:
        self.host = host
        self.debug = debug
        self.idle_timeout_s = idle_timeout_s
        self.frame_timeout_s = frame_timeout_s
        self.max_connections = max_connections
        self.max_frame_bytes = min(max_frame_bytes, MAX_FRAME_BYTES)
        self.slots = ConnectionSlots(max_connections, protect_s=frame_timeout_s)
        self.memory = MemoryBudget(max_pending_bytes, budget_wait_s)
        bound_heap()
        self._refusers = threading.BoundedSemaphore(_REFUSERS)
        self._listener = socket.create_server((address, port), backlog=128)
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
            slot = None if self._stopping.is_set() else self.slots.admit(functools.partial(_shut, conn))
            if slot is None:
                self._refuse(conn, f"server busy: {self.max_connections} connections are open, the limit "
                                   "(--max-connections)" if not self._stopping.is_set() else "server shutting down")
                continue
            with self._lock:
                thread = threading.Thread(target=self._serve, args=(conn, slot), name=f"{THREAD_PREFIX}connection",
                                          daemon=True)
                self._open[conn] = thread
            thread.start()

    def _refuse(self, conn: socket.socket, error: str) -> None:
        """The error reply, then (on a thread of its own, at most ``_REFUSERS`` at once) what the client still
        sends is read and dropped before the close, so the client reads the reply rather than a reset."""
        reply = frame(encode_json({"error": error, "traceback": f"ServerBusyError: {error}"}))
        drain = self._refusers.acquire(blocking=False)

        def answer() -> None:
            try:
                conn.settimeout(1.0)
                conn.sendall(reply)
                if drain:
                    _drain_then_close(conn, time.monotonic() + min(self.frame_timeout_s, 5.0), self.max_frame_bytes)
            except OSError:
                pass
            finally:
                if drain:
                    self._refusers.release()
                conn.close()

        if drain:
            threading.Thread(target=answer, name="model-refusal", daemon=True).start()
        else:
            answer()

    def _serve(self, conn: socket.socket, slot: Slot) -> None:
        owner = object()
        holding = False
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self._stopping.is_set():
                self.slots.mark(slot, IDLE)
                request_memory = object()
                try:
                    body = self._read_frame(conn, slot, request_memory)
                except (WireError, _Closed, OSError) as exc:
                    self.memory.release(request_memory)
                    LOG.info("connection ended: %s", exc)
                    return
                if body is None:
                    return
                request: Any = None
                try:
                    if isinstance(body, Exception):
                        raise body
                    self.memory.charge(request_memory, 2 * len(body))  # what decoding builds
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
                finally:
                    request = body = None  # an idle connection keeps nothing of its last request
                    self.memory.release(request_memory)
                try:
                    conn.settimeout(self.frame_timeout_s)
                    conn.sendall(frame(reply))
                except (OSError, WireError) as exc:
                    LOG.info("client went away before the reply: %s", exc)
                    return
        finally:
            self.slots.release(slot)
            if holding:
                self.host.release(owner)
            conn.close()
            with self._lock:
                self._open.pop(conn, None)

    def _read_frame(self, conn: socket.socket, slot: Slot, memory_owner: object) -> bytearray | Exception | None:
        """The next frame's body; None at a clean close (or a reclaimed slot); the budget's refusal if it had
        no room (the frame was read and dropped, so the connection stays in step)."""
        conn.settimeout(self.idle_timeout_s)
        first = conn.recv(4)
        if not first or slot.reclaimed:
            return None
        self.slots.mark(slot, HEAD)
        deadline = time.monotonic() + self.frame_timeout_s  # the clock starts at the frame's first byte
        header = bytes(first) + bytes(_recv_exact(conn, 4 - len(first), deadline) or b"")
        length = frame_length(header, self.max_frame_bytes)
        self.slots.mark(slot, BUSY)
        refusal: list[Exception] = []

        def charge(n: int) -> bool:
            try:
                self.memory.charge(memory_owner, n, deadline)
            except MemoryBudgetError as exc:
                refusal.append(exc)
                return False
            return True

        body = _recv_exact(conn, length, deadline, charge)
        return body if body is not None else refusal[0]

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


def _shut(conn: socket.socket) -> None:
    """Reclaim a connection's slot: its handler wakes to an end of stream and ends."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def _drain_then_close(conn: socket.socket, deadline: float, limit: int) -> None:
    """Stop writing, then read and drop what the peer still sends until it stops, ``deadline`` or ``limit``
    bytes: a socket closed with unread bytes resets the connection, and the peer may lose the reply."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    got = 0
    while got < limit and (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except OSError:
            return
        if not chunk:
            return
        got += len(chunk)
