"""One memory budget for what a websocket server's library buffers: every read charged as it arrives.

The openpi and vla-eval servers (``websockets``' sync server) read through a :class:`MeteredSocket`: each
``recv`` the library makes is charged to the server's :class:`~robofollow_ros.policy.wire.budget.MemoryBudget`
before it is handed over, attributed to the frames the library parses from it (:class:`Meter`), and released
when the handler is done with their message; so the bytes inside the library's buffers are inside the budget
too (issue 36: vla-eval charged a message only once the library had assembled it, and 64 × 32 MiB messages
took it 385 MiB past its 512 MiB budget). A read that finds no room refuses the connection from the reading
thread: ``refuse(connection, error)`` sends the protocol's refusal (openpi: a text frame; vla-eval: an
``error`` message) and a 1013 close at once, then what the client still sends is read and dropped until it is
quiet, hangs up or :data:`REFUSAL_LINGER_S` pass. :func:`metered_connection_class` builds the connection class
a server hands to ``serve(create_connection=...)``.
"""

from __future__ import annotations

import collections
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State
from websockets.sync.server import ServerConnection

from robofollow_ros.policy.wire.budget import Hold, MemoryBudget, MemoryBudgetError

#: Longest a connection refused for memory is kept reading (and dropping) what its client still sends.
REFUSAL_LINGER_S = 5.0
#: A refused client that has sent nothing for this long has sent its whole request (openpi is lock-step).
_REFUSAL_QUIET_S = 0.2
_DATA_OPCODES = frozenset({Opcode.TEXT, Opcode.BINARY, Opcode.CONT})


#: Copies of a frame the library holds while it parses one: its read buffer, the payload it cuts from it and
#: the unmasked payload. Each byte read is charged this many times (and released as many): charged once,
#: 64 × 32 MiB vla-eval messages went 300 MiB past the budget.
LIBRARY_COPIES = 2


def frame_wire_bytes(payload: int) -> int:
    """Bytes charged for a client frame with ``payload`` bytes: its wire size (clients always mask: 4 bytes),
    :data:`LIBRARY_COPIES` times."""
    return LIBRARY_COPIES * (2 + 4 + (0 if payload < 126 else 2 if payload < 65536 else 8) + payload)


class Meter:
    """One connection's share of the memory budget, and its refusal once the budget had no room.

    The library's reads are charged as they arrive (:class:`MeteredSocket`), attributed to the frames
    the library parses (:meth:`observe`), and released when the handler is done with their message
    (:meth:`message_done`); control frames are released at once, the handshake request when it is
    parsed. A read that was part of the handshake request and of a first frame at once is released
    with the request: the only inexactness, at most one read (64 KiB) per connection.
    """

    def __init__(self, hold: Hold, wait_s: float) -> None:
        self.hold = hold
        self.wait_s = wait_s
        self.refusal: MemoryBudgetError | None = None
        self._frames: collections.deque[tuple[int, bool]] = collections.deque()
        self._decoding = 0
        self._lock = threading.Lock()

    def observe(self, event: object) -> None:
        """The library parsed ``event`` from the bytes charged so far (recv thread)."""
        if not isinstance(event, Frame):  # the handshake request
            self.hold.release()
        elif event.opcode in _DATA_OPCODES:
            with self._lock:
                self._frames.append((frame_wire_bytes(len(event.data)), event.fin))
        else:
            self.hold.release(frame_wire_bytes(len(event.data)))

    def charge_decoding(self, n: int) -> bool:
        if not self.hold.charge(n, self.wait_s):
            return False
        self._decoding += n
        return True

    def message_done(self) -> None:
        """The handler is done with its message: release its frames and its decoding (handler thread)."""
        n, self._decoding = self._decoding, 0
        with self._lock:
            while self._frames:
                size, fin = self._frames.popleft()
                n += size
                if fin:
                    break
        self.hold.release(n)


class MeteredSocket:
    """The socket a websocket connection reads through: every read is charged to the budget.

    A read that finds no room refuses the connection: the text frame and the 1013 close go out at
    once (from this thread, under the connection's protocol lock), then what the client still sends is
    read and dropped until it is quiet, hangs up or ``REFUSAL_LINGER_S`` pass; the library then sees
    the end of the stream and closes. During the opening handshake the bytes pass (the handler
    refuses the connection as soon as it starts).
    """

    def __init__(self, sock: socket.socket, meter: Meter, refuse: Any) -> None:
        self._sock = sock
        self._meter = meter
        self._refuse = refuse
        self.connection: ServerConnection | None = None

    def fileno(self) -> int:
        return self._sock.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def _handshaking(self) -> bool:
        return self.connection is None or self.connection.protocol.state is State.CONNECTING

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        meter = self._meter
        if meter.refusal is not None and not self._handshaking():
            return self._drain()  # refused: nothing more reaches the library
        data = self._sock.recv(bufsize, flags)
        if not data or meter.refusal is not None or meter.hold.charge(LIBRARY_COPIES * len(data), meter.wait_s):
            return data
        meter.refusal = meter.hold.refusal(f"{len(data):,} more bytes of a request", meter.wait_s)
        if self._handshaking():
            return data  # the handler refuses the connection as soon as the handshake is done
        assert self.connection is not None
        self._refuse(self.connection, meter.refusal)
        return self._drain()

    def _drain(self) -> bytes:
        """Read and drop what the refused client still sends; then b"" (the end of the stream)."""
        until = time.monotonic() + REFUSAL_LINGER_S
        while (left := until - time.monotonic()) > 0:
            readable, _, _ = select.select([self._sock], [], [], min(left, _REFUSAL_QUIET_S))
            if not readable:
                break  # quiet: the client sent its whole request and waits for the answer it has
            try:
                if not self._sock.recv(65536):
                    break
            except OSError:
                break
        return b""


def metered_connection_class(memory: MemoryBudget, wait_s: float,
                             refuse: Callable[[ServerConnection, MemoryBudgetError], Any]) -> type[ServerConnection]:
    """A ServerConnection whose reads are charged to ``memory`` (``meter`` on each connection)."""

    class MeteredConnection(ServerConnection):
        def __init__(self, sock: socket.socket, protocol: Protocol, *args: Any, **kwargs: Any) -> None:
            self.meter = Meter(memory.hold(), wait_s)
            metered = MeteredSocket(sock, self.meter, refuse)
            super().__init__(metered, protocol, *args, **kwargs)  # type: ignore[arg-type]
            metered.connection = self

        def process_event(self, event: Any) -> None:
            self.meter.observe(event)
            super().process_event(event)

        def close_socket(self) -> None:
            try:
                super().close_socket()
            finally:
                self.meter.hold.close()

    return MeteredConnection
