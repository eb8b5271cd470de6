"""How the websocket servers (openpi, vla-eval) wait for a connection's next message, within bounds.

``websockets`` gives a receive timeout but no deadline for a message that has started to arrive, so a client
trickling one byte at a time would hold a handler forever. :func:`receive_message` polls: a connection idle
for ``idle_timeout_s`` is closed normally (1000, naming the timeout); once part of a message has arrived
(:func:`message_in_progress`), the whole of it must be there within ``frame_timeout_s`` — the trickle does
not extend it — or the connection is closed with 1008 POLICY_VIOLATION.

Connection slots (``wire/slots.py``): ``mark`` is told what the connection is doing, so that idle and
trickling connections give their slot to a newcomer: ``IDLE`` while nothing of a message has arrived,
``HEAD`` while less than :data:`HEAD_BYTES` of one have (a real client sends a frame's header and its first
bytes at once), ``BUSY`` past that and while the handler answers. :func:`shut` is how a slot is reclaimed;
:func:`bound_sends` bounds the replies' writes, which the library leaves unbounded.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.protocol import State
from websockets.sync.server import ServerConnection

from robofollow_ros.policy.wire.slots import BUSY, HEAD, IDLE

#: How often a waiting handler looks whether a message has started arriving (its deadline starts then).
POLL_S = 0.25
#: Bytes of a message after which its connection is busy (never reclaimed), not merely opening a message.
HEAD_BYTES = 64 * 1024


def bound_sends(ws: ServerConnection, seconds: float) -> None:
    """Every send on the connection gives up after ``seconds`` (``SO_SNDTIMEO``): the library writes with no
    timeout, so a client that sends requests and never reads the replies would, once its window is full,
    hold its handler (and its slot, busy) forever. A send that times out raises, and the connection ends."""
    whole = int(seconds)
    with contextlib.suppress(OSError, AttributeError, OverflowError):
        ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                             struct.pack("ll", whole, int((seconds - whole) * 1_000_000)))


RECLAIMED_REASON = "server busy: slot reclaimed from this idle connection (the server is full); reconnect"
#: Seconds a reclaimed connection is left to read its close frame before its socket is shut both ways.
RECLAIM_LINGER_S = 2.0


def shut(ws: ServerConnection) -> None:
    """Reclaim a connection's slot: a close frame (1013 and :data:`RECLAIMED_REASON`, so a client learns why)
    and a half-close at once, then, :data:`RECLAIM_LINGER_S` later, the socket shut both ways; the handler sees
    the connection closed and ends. Never waits for the peer. (Shut both ways at once, a client that was
    still sending got a reset instead of the close frame.)"""
    with contextlib.suppress(Exception), ws.protocol_mutex:
        if ws.protocol.state is State.OPEN:
            ws.protocol.send_close(CloseCode.TRY_AGAIN_LATER, RECLAIMED_REASON)
            ws.send_data()
    with contextlib.suppress(OSError):
        ws.socket.shutdown(socket.SHUT_WR)
    timer = threading.Timer(RECLAIM_LINGER_S, _shut_both, args=(ws,))
    timer.daemon = True
    timer.start()


def _shut_both(ws: ServerConnection) -> None:
    with contextlib.suppress(OSError):
        ws.socket.shutdown(socket.SHUT_RDWR)


def message_progress(ws: ServerConnection) -> int:
    """Bytes of the next message that have arrived (unparsed bytes plus earlier fragments; 0 if unknown)."""
    protocol = ws.protocol
    reader = getattr(protocol, "reader", None)
    buffered = len(getattr(reader, "buffer", b"")) if reader is not None else 0
    return buffered + int(getattr(protocol, "current_size", None) or getattr(protocol, "cur_size", None) or 0)


def message_in_progress(ws: ServerConnection) -> bool:
    """True while part of a message has arrived: bytes of an unfinished frame, or earlier fragments.

    Reads the protocol's buffer and fragment size (websockets 13-17); if a future version renames
    them this answers False and only the idle timeout bounds a trickle (test_protocol_serving
    would notice).
    """
    protocol = ws.protocol
    reader = getattr(protocol, "reader", None)
    if reader is not None and len(getattr(reader, "buffer", b"")) > 0:
        return True
    return bool(getattr(protocol, "current_size", None) or getattr(protocol, "cur_size", None))


def receive_message(ws: ServerConnection, idle_timeout_s: float, frame_timeout_s: float, *,
                    interrupted: Callable[[], bool] = lambda: False,
                    on_deadline: Callable[[], None] = lambda: None,
                    mark: Callable[[str], None] = lambda state: None) -> str | bytes | None:
    """The next message, or None once the connection is closed: by the peer, by idleness, by a message
    overrunning its deadline (``on_deadline`` is called first, e.g. to count it), or because
    ``interrupted()`` answered True at a poll (it closes the connection itself, or has had it refused).
    ``mark`` gets the connection's slot state (module docstring)."""
    idle_until = time.monotonic() + idle_timeout_s
    message_until: float | None = None
    state = IDLE
    mark(IDLE)
    while True:
        if interrupted():
            return None
        now = time.monotonic()
        if message_until is None and message_in_progress(ws):
            message_until = now + frame_timeout_s
        if message_until is not None and state != BUSY:
            now_state = BUSY if message_progress(ws) >= HEAD_BYTES else HEAD
            if now_state != state:
                state = now_state
                mark(state)
        until = idle_until if message_until is None else message_until
        if now >= until:
            if message_until is None:
                ws.close(CloseCode.NORMAL_CLOSURE, f"idle for {idle_timeout_s:g} s")
            else:
                on_deadline()
                ws.close(CloseCode.POLICY_VIOLATION, f"message not complete within {frame_timeout_s:g} s")
            return None
        try:
            message = ws.recv(timeout=min(POLL_S, until - now))
        except TimeoutError:
            continue
        except ConnectionClosed:
            return None
        mark(BUSY)
        return message
