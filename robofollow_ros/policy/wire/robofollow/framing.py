"""RoboFollow's TCP framing: a 4-byte unsigned big-endian length ``N`` (1 ≤ N ≤ 128 MiB), then ``N`` bytes.

Reading is where a server meets hostile peers, so every wait has a bound that the peer cannot
stretch: ``idle_timeout_s`` for the first byte of a frame, then one *deadline* for the whole frame
(a trickle of one byte a second does not extend it). The body buffer grows as bytes arrive (a
header that announces 128 MiB costs nothing until the bytes come; a body of at most
:data:`CHUNK_BYTES`, the size of one read, is read straight into a buffer of its size, which is
what the read buffer of a larger one costs anyway); with a
:class:`~robofollow_ros.policy.wire.budget.Hold`, each chunk is charged to the server's memory
budget as it arrives, so a frame holds exactly what it delivered. The structural characters
of a large JSON body are counted chunk by chunk, so a body with more containers or elements than
:data:`~robofollow_ros.policy.wire.robofollow.codec.WIRE_JSON_LIMITS` allows is refused after a few MB.
A refused frame (too complex, or no room in the budget) is freed at once, the rest of it is read
and discarded (keeping the connection in step), then the error names the bound
(:class:`MessageTooComplexError`, :class:`~robofollow_ros.policy.wire.budget.MemoryBudgetError`).

Sending: the prefix and the body (or the pieces of the body, :func:`send_frame`) go to the kernel in
one ``sendmsg`` call, so a frame costs one system call and reaches the peer as one segment where it
fits (with TCP_NODELAY, which both sides set, two writes meant two segments and two wake-ups).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Sequence

from robofollow_ros.jsonlimits import JsonLimits, structure_counts
from robofollow_ros.policy.interface import PolicyError
from robofollow_ros.policy.wire.budget import DEFAULT_BUDGET_WAIT_S, Hold
from robofollow_ros.policy.wire.common import PeerClosedError, WireFormatError
from robofollow_ros.policy.wire.robofollow.codec import MAX_FRAME_BYTES, WIRE_JSON_LIMITS

_HEADER = struct.Struct(">I")
#: Bytes asked of the kernel per read.
CHUNK_BYTES = 1 << 20
#: Bodies up to this size are only counted once, by the decoder (a real observation is ~1 MB);
#: larger ones are also counted as they arrive, so a hostile one is refused before it is buffered.
COUNT_WHILE_RECEIVING_ABOVE = 8 << 20


class MessageTooComplexError(WireFormatError):
    """A frame body with more JSON containers or elements than the limits; the frame was consumed."""


class FrameTimeoutError(TimeoutError):
    """A frame did not complete before its deadline."""


def check_frame_length(length: int) -> None:
    if not 1 <= length <= MAX_FRAME_BYTES:
        raise WireFormatError(f"frame length: {length} is outside 1..{MAX_FRAME_BYTES}")


def encode_frame(body: bytes) -> bytes:
    """Prefix and body of one frame as one bytes object (for a non-blocking send)."""
    check_frame_length(len(body))
    return _HEADER.pack(len(body)) + body


#: Most buffers handed to one ``sendmsg`` (the kernel's IOV_MAX is 1024); more are joined first.
MAX_SEND_BUFFERS = 64


def send_frame(sock: socket.socket, body: bytes | Sequence[bytes]) -> None:
    """Send one frame whose body is ``body``, or the concatenation of the pieces in ``body``.

    One ``sendmsg`` of the prefix and the pieces (no copy into one buffer); what the kernel did not
    take at once follows in further calls. The socket's timeout bounds the whole frame, as it
    bounds a ``sendall``.
    """
    pieces = [body] if isinstance(body, bytes | bytearray | memoryview) else list(body)
    length = sum(len(piece) for piece in pieces)
    check_frame_length(length)
    if len(pieces) >= MAX_SEND_BUFFERS:
        pieces = [b"".join(pieces)]
    send_buffers(sock, [_HEADER.pack(length), *pieces])


def send_buffers(sock: socket.socket, buffers: list[bytes | bytearray | memoryview]) -> None:
    """``sendall`` of the buffers' concatenation, in as few ``sendmsg`` calls as the kernel allows."""
    views = [memoryview(buf).cast("B") for buf in buffers if len(buf)]
    timeout = sock.gettimeout()
    deadline = None if not timeout else time.monotonic() + timeout
    first = calls = 0
    try:
        while first < len(views):
            if deadline is not None and calls:  # later calls wait only what is left of the timeout
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("timed out")
                sock.settimeout(remaining)
            sent = sock.sendmsg(views[first:])
            calls += 1
            while first < len(views) and sent >= len(views[first]):
                sent -= len(views[first])
                first += 1
            if sent:
                views[first] = views[first][sent:]
    finally:
        if deadline is not None and calls > 1:
            sock.settimeout(timeout)


class FrameDeadline:
    """The moment a frame must be complete; every read of the frame waits at most until then."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.at = None if timeout_s is None else time.monotonic() + timeout_s

    def recv_into(self, sock: socket.socket, view: memoryview) -> int:
        if self.at is not None:
            remaining = self.at - time.monotonic()
            if remaining <= 0:
                raise FrameTimeoutError(f"frame: not complete within {self.timeout_s:g} s")
            sock.settimeout(remaining)
        try:
            return sock.recv_into(view)
        except TimeoutError as exc:
            raise FrameTimeoutError(f"frame: not complete within {self.timeout_s:g} s") from exc


def recv_header(sock: socket.socket, idle_timeout_s: float | None, frame_timeout_s: float | None,
                on_first_byte: Callable[[], None] | None = None) -> tuple[int, FrameDeadline] | None:
    """The validated length of the next frame and its deadline, or ``None`` on a clean close.

    ``on_first_byte`` is called once the frame's first byte came (a server marks its connection slot: from
    then on the connection is asking for something, ``wire/slots.py``)."""
    sock.settimeout(idle_timeout_s)
    header = bytearray(_HEADER.size)
    view = memoryview(header)
    got = sock.recv_into(view)
    if got == 0:
        return None
    deadline = FrameDeadline(frame_timeout_s)  # the clock starts at the frame's first byte
    if on_first_byte is not None:
        on_first_byte()
    while got < _HEADER.size:
        n = deadline.recv_into(sock, view[got:])
        if n == 0:
            raise PeerClosedError(f"peer closed the connection after {got} of {_HEADER.size} bytes of the header")
        got += n
    (length,) = _HEADER.unpack(header)
    check_frame_length(length)
    return length, deadline


def recv_body(sock: socket.socket, length: int, deadline: FrameDeadline,
              limits: JsonLimits | None = WIRE_JSON_LIMITS, hold: Hold | None = None,
              budget_wait_s: float = DEFAULT_BUDGET_WAIT_S) -> bytearray:
    """Read ``length`` bytes before ``deadline``; with ``limits``, count JSON structure as it arrives;
    with ``hold``, charge every chunk to the memory budget as it arrives."""
    direct = length <= CHUNK_BYTES  # one read's worth: read straight into the body, no second copy
    body = bytearray(length if direct else 0)
    scratch = body if direct else bytearray(min(length, CHUNK_BYTES))
    view = memoryview(scratch)
    got = containers = commas = 0
    refused: PolicyError | None = None
    if length <= COUNT_WHILE_RECEIVING_ABOVE:
        limits = None
    try:
        while got < length:
            into = view[got:] if direct else view[:min(len(scratch), length - got)]
            n = deadline.recv_into(sock, into)
            if n == 0:
                raise PeerClosedError(f"peer closed the connection after {got} of {length} bytes of the body")
            got += n
            if refused is not None:
                continue  # discard the rest of a refused frame, so the next frame starts in step
            if limits is not None:
                counted = structure_counts(view[:n])
                containers += counted[0]
                commas += counted[1]
                if containers > limits.max_containers:
                    refused = MessageTooComplexError(
                        f"message: more than {limits.max_containers:,} objects/arrays (the limit)")
                elif commas > limits.max_commas:
                    refused = MessageTooComplexError(f"message: more than {limits.max_commas:,} elements (the limit)")
            if refused is None and hold is not None and not hold.charge(n, budget_wait_s, deadline.at):
                refused = hold.refusal(f"the body of a {length:,}-byte frame ({got - n:,} bytes in)", budget_wait_s)
            if refused is not None:
                if direct:  # the rest is read into a scratch buffer and dropped
                    direct = False
                    view.release()
                    scratch = bytearray(min(length - got, CHUNK_BYTES) or 1)
                    view = memoryview(scratch)
                body = bytearray()  # free what was kept
                if hold is not None:
                    hold.release()
                continue
            if not direct:
                body += view[:n]
    finally:
        view.release()
    if refused is not None:
        raise refused
    return body


def recv_frame(sock: socket.socket, idle_timeout_s: float | None = None, frame_timeout_s: float | None = None,
               limits: JsonLimits | None = WIRE_JSON_LIMITS) -> bytearray | None:
    """Read one frame body, or return ``None`` when the peer closed cleanly before a new frame.

    ``idle_timeout_s`` bounds the wait for the frame's first byte; ``frame_timeout_s`` is then a
    deadline for the whole frame. The length is validated before anything is allocated.
    """
    header = recv_header(sock, idle_timeout_s, frame_timeout_s)
    if header is None:
        return None
    length, deadline = header
    return recv_body(sock, length, deadline, limits)
