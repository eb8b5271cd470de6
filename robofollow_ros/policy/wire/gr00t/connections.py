"""The GR00T server's hold on the TCP connections libzmq accepts, so that a request libzmq drops is still refused.

libzmq drops a peer whose message is over ``ZMQ_MAXMSGSIZE`` by closing its connection: nothing of ours sees
the message, and the client (a REQ socket) waits for a reply until its own timeout (issue 36: "refusals always
delivered" did not hold there). Here each accepted connection's descriptor is duplicated, so the kernel keeps
the connection open after libzmq closes its own descriptor. When libzmq ends a connection that had finished its
ZMTP handshake (the peer sent more than its 64-byte greeting: the kernel's count of bytes received; libzmq's
handshake event does not say which connection it is) and whose peer has not closed it (no end of stream
waiting), libzmq dropped it: the refusal is
written on the duplicate as a ZMTP reply (an empty delimiter frame, then the msgpack ``{"error": ...}``, what a
REQ socket expects), the write side is shut, and what the peer still sends is read and discarded for at most
``drain_s`` on a thread of its own, then the connection is closed.

A peer that closed its connection (an end of stream waiting), or one this server shut itself, is closed without a
word. Duplicates are compared by inode with libzmq's descriptor on every sweep, so a connection whose close event
the monitor lost is still let go. The duplicate is taken when the accept is read; a connection that libzmq closes
and whose descriptor number is reused in the microseconds between accepting and duplicating would be held under
the wrong connection (the accept's close event is then already queued, and such a connection is not held).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass

LOG = logging.getLogger(__name__)
#: The most a dropped peer's unread bytes are read and discarded for, after its refusal (s).
DEFAULT_DRAIN_S = 2.0
#: At most this many refused connections are drained at once; beyond, one is closed at once after its refusal.
MAX_DRAINING = 64
_DRAIN_CHUNK = 1 << 16
#: A ZMTP 3 greeting's length: a peer that sent more has begun (a client: finished) its handshake.
GREETING_BYTES = 64
#: Where Linux's ``struct tcp_info`` keeps ``tcpi_bytes_received`` (a u64, since Linux 4.1).
_TCPI_BYTES_RECEIVED = 128


def zmtp_reply(body: bytes, delimiter: bool = True) -> bytes:
    """A ZMTP 3 message as its frames on the wire: an empty delimiter frame (what a ROUTER sends a REQ peer
    first), then ``body`` (short frames up to 255 bytes, long ones with an 8-byte size)."""
    frames = b"\x01\x00" if delimiter else b""
    if len(body) < 256:
        return frames + bytes((0, len(body))) + body
    return frames + b"\x02" + struct.pack(">Q", len(body)) + body


@dataclass
class _Held:
    dup: socket.socket
    fd: int
    inode: int
    shut: bool = False  # shut by this server: ended without a word


class HeldConnections:
    """Duplicates of the connections libzmq accepted, by ``(descriptor, which accept on it)``."""

    def __init__(self, drain_s: float = DEFAULT_DRAIN_S) -> None:
        self.drain_s = drain_s
        self._held: dict[tuple[int, int], _Held] = {}
        self._draining = threading.BoundedSemaphore(MAX_DRAINING)

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, key: tuple[int, int], fd: int) -> None:
        """Duplicate the descriptor libzmq accepted ``key`` on (it must still be open: the caller checked)."""
        try:
            dup = socket.socket(fileno=os.dup(fd))
            inode = os.fstat(dup.fileno()).st_ino
        except OSError:  # closed meanwhile
            return
        self._held[key] = _Held(dup, fd, inode)

    def handshaken(self, key: tuple[int, int]) -> bool:
        """Whether the peer of ``key`` has sent more than a ZMTP greeting (True when the kernel does not say)."""
        held = self._held.get(key)
        return held is not None and _bytes_received(held.dup) > GREETING_BYTES

    def shut(self, key: tuple[int, int]) -> bool:
        """Shut the connection down (libzmq sees its end and closes it); False when it is not held."""
        held = self._held.get(key)
        if held is None:
            return False
        held.shut = True
        with contextlib.suppress(OSError):
            held.dup.shutdown(socket.SHUT_RDWR)
        return True

    def ended(self, key: tuple[int, int], refusal: bytes) -> bool:
        """libzmq ended ``key``: refuse with ``refusal`` (a packed reply) if libzmq dropped a live, handshaken peer,
        else just close. True when the refusal was written."""
        held = self._held.pop(key, None)
        if held is None:
            return False
        if held.shut or _bytes_received(held.dup) <= GREETING_BYTES or _peer_closed(held.dup):
            held.dup.close()
            return False
        try:
            held.dup.setblocking(False)
            sent = held.dup.send(zmtp_reply(refusal))
            held.dup.shutdown(socket.SHUT_WR)
        except OSError:
            held.dup.close()
            return False
        if self._draining.acquire(blocking=False):
            threading.Thread(target=_drain, args=(held.dup, self.drain_s, self._draining), name="gr00t-drain",
                             daemon=True).start()
        else:
            held.dup.close()
        return bool(sent)

    def sweep(self, refusal: bytes) -> list[tuple[tuple[int, int], bool]]:
        """End every held connection whose descriptor libzmq has closed (or reused) without a close event read;
        each key ended, and whether it was refused (:meth:`ended`)."""
        gone = []
        for key, held in list(self._held.items()):
            try:
                same = os.fstat(held.fd).st_ino == held.inode
            except OSError:
                same = False
            if not same:
                gone.append((key, self.ended(key, refusal)))
        return gone

    def close(self) -> None:
        for held in self._held.values():
            held.dup.close()
        self._held.clear()


def _bytes_received(sock: socket.socket) -> int:
    """The bytes the kernel has received on ``sock`` (a large number where it cannot say)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return 1 << 62
    if len(info) < _TCPI_BYTES_RECEIVED + 8:
        return 1 << 62
    return int(struct.unpack_from("=Q", info, _TCPI_BYTES_RECEIVED)[0])


def _peer_closed(sock: socket.socket) -> bool:
    """Whether the peer's end of stream (or a reset) is waiting: it closed the connection itself."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing unread: libzmq read a whole message and dropped it
    except OSError:
        return True


def _drain(sock: socket.socket, drain_s: float, draining: threading.BoundedSemaphore) -> None:
    """Read and discard what the peer still sends until it closes or ``drain_s`` passes, then close: closing with
    unread bytes would reset the connection, and the peer could lose the refusal."""
    deadline = time.monotonic() + drain_s
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(_DRAIN_CHUNK):
                break
    except OSError:
        pass
    finally:
        sock.close()
        draining.release()
