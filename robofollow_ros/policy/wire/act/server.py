"""Any RoboFollow policy behind a json_numpy ``POST /act`` server, so openvla-oft-style clients can drive it.

Endpoints: ``POST /act`` takes an openvla-oft ALOHA observation (``full_image``, ``left_wrist_image``,
``right_wrist_image`` uint8 HWC, ``state`` 14 values, ``instruction``), inline json_numpy or
``{"encoded": ...}``, and answers the ``[T, 14]`` chunk (float32, json_numpy; double-encoded to an
encoded request), exactly what openvla-oft's ``run_aloha_eval.get_action_from_server`` reads.
``GET /health`` answers ``{"status": "ok", "protocol": "act", "metadata", "session_header"}``;
``POST /reset`` ends the caller's session (the next request starts a clean episode). Errors are an
HTTP status with ``{"error": one line, "traceback": ...}`` (400 bad request, 411/413 body length,
500 policy failure, 503 busy), never openvla-oft's bare ``"error"`` string, which carries no reason.

Sessions (HTTP has no connection identity): a request's ``X-Session-ID`` header names its episode
(our client sends a fresh token per episode); each distinct token gets its own policy session from
``wire/sessions.py``, and one token's requests run one at a time. Requests without the header
(openvla-oft's, GR00T's clients) share one anonymous session, whose episode restarts whenever the
instruction changes, on ``POST /reset`` and (``episode_per="auto"``) when the joints come back to the
episode's start pose (``wire/episodes.py``; the server logs a warning once: these clients send no
episode signal): run one such client per server. A session's episodes follow the same rules. A token is
the episode's bearer secret (ours: 64 random bits an episode); nothing else names a session. At most
``max_connections`` sessions live at once; a new one takes the place of the least recently used one
only when that one has been idle for ``frame_timeout_s`` (issue 36: 70 requests with other tokens
evicted a client's episode at step 3) — else the request is answered 503 busy — and one idle for
``idle_timeout_s`` is released too.

Bounds: ``max_connections`` connection slots (``wire/slots.py``): when all are taken a new connection
reclaims the longest-idle one (a socket waiting for its next request, or one that never sent
anything), else one that has trickled its request line and headers for over a second; only when every
slot is answering a request is it refused (503). The request line waits ``idle_timeout_s`` for its
first byte; from that byte on, the request line, the headers and the body share one deadline,
``frame_timeout_s`` (issue 36: a header trickle stayed open for 40 s at an 8 s frame timeout). Headers
are also bounded by ``http.server`` (64 KiB a line, 100 lines); the body needs ``Content-Length``, at
most ``max_body_bytes``. A refusal (503, 408, 413, ...) is written, then the rest of the request is read
and dropped (within the deadline, ``max_body_bytes`` at most) before the close, so the client reads the
refusal instead of a broken pipe. Body bytes are charged to the server's memory budget (``wire/budget.py``) as
they arrive, twice (the chunks, then the joined body beside them; the second share is given back after the
join), and what decoding builds before it is decoded. Binds 127.0.0.1 by default;
``stop()`` closes the listener and every open connection, then the policies.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.observation import ObservationError, validate_observation
from robofollow_ros.policy.wire.act.codec import ACT_MAX_BODY_BYTES, decode_body, encode_reply
from robofollow_ros.policy.wire.act.presets import DEFAULT_PRESET, PRESETS, from_request
from robofollow_ros.policy.wire.budget import MemoryBudgetError, decode_cost
from robofollow_ros.policy.wire.common import WireFormatError, describe_error
from robofollow_ros.policy.wire.episodes import EpisodeStarts, check_episode_rule
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session, SessionsBusyError
from robofollow_ros.policy.wire.slots import BUSY, HEAD, IDLE, ConnectionSlots, Slot

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
SESSION_HEADER = "X-Session-ID"
_READ = 256 * 1024
#: Copies of a body charged while it is read: its chunks, then the joined body beside them until they go.
_BODY_COPIES = 2
#: Refusals answered at once, each reading and dropping the refused request for up to 5 s.
_REFUSERS = 64


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Entry:
    session: Session
    episodes: EpisodeStarts
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)


class _SessionTable:
    """Session token → policy session; bounded, least recently used idle ones released first."""

    def __init__(self, sessions: PolicySessions, limit: int, idle_s: float, protect_s: float,
                 episode_per: str = "auto") -> None:
        self.sessions, self.limit, self.idle_s, self.protect_s = sessions, limit, idle_s, protect_s
        self.episode_per = episode_per
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> _Entry:
        released: list[Session] = []
        with self._lock:
            now = time.monotonic()
            for old, entry in list(self._entries.items()):
                if now - entry.used > self.idle_s and not entry.lock.locked():
                    released.append(self._entries.pop(old).session)
            entry_or_none = self._entries.get(key)
            if entry_or_none is not None:
                self._entries.move_to_end(key)
                entry_or_none.used = now
        for session in released:
            self.sessions.release(session)
        if entry_or_none is not None:
            return entry_or_none
        session = self.sessions.acquire()  # may build a policy: outside the table's lock
        with self._lock:
            if key in self._entries:  # another request of this token won the race
                spare, entry = session, self._entries[key]
            else:
                spare, entry = None, _Entry(session, EpisodeStarts(self.episode_per))
                while len(self._entries) >= self.limit:
                    idle = next((k for k, e in self._entries.items()
                                 if not e.lock.locked() and now - e.used > self.protect_s), None)
                    if idle is None:
                        spare = session
                        break
                    released.append(self._entries.pop(idle).session)
                if spare is None:
                    self._entries[key] = entry
        for old_session in released:
            self.sessions.release(old_session)
        if spare is not None:
            self.sessions.release(spare)
            if key not in self._entries:
                raise SessionsBusyError(f"server busy: {self.limit} sessions are in use (each kept "
                                        f"{self.protect_s:g} s after its last request; --max-connections); "
                                        "try again later")
        return entry

    def drop(self, key: str, entry: _Entry | None = None) -> bool:
        with self._lock:
            current = self._entries.get(key)
            if current is None or (entry is not None and current is not entry):
                return False
            del self._entries[key]
        self.sessions.release(current.session)
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class ActPolicyServer(PolicyServer):
    """Serve a policy over json_numpy ``POST /act`` on ``host:port`` (0 = any free port).

    ``policy`` and the keyword arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`);
    ``preset`` names the request layout read (openvla-oft ALOHA by default).
    """

    thread_name = "act-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 8777,
                 *, max_body_bytes: int = ACT_MAX_BODY_BYTES, preset: str = DEFAULT_PRESET,
                 episode_per: str = "auto", **settings: Unpack[ServerSettings]) -> None:
        self.episode_per = check_episode_rule(episode_per)
        self._warned_anonymous = False
        if preset not in PRESETS:
            raise ValueError(f"preset: {preset!r}; expected one of {sorted(PRESETS)}")
        super().__init__(policy, stats=("connections", "requests", "errors", "refused", "timeouts",
                                        "peak_connections"), **settings)
        self.preset = PRESETS[preset]
        self.max_body_bytes = int(max_body_bytes)
        self.table = _SessionTable(self.sessions, self.max_connections, self.idle_timeout_s, self.frame_timeout_s,
                                   self.episode_per)
        self.slots = ConnectionSlots(self.max_connections)
        self._open: dict[socket.socket, Slot] = {}
        self._httpd = _Listener((host, port), _handler_class(self), self)
        self.address: tuple[str, int] = self._httpd.server_address[:2]  # type: ignore[assignment]

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.2)

    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:  # wake handlers waiting on keep-alive connections
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._join_serving(join_timeout_s)
        self.sessions.close()

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    # ------------------------------------------------------------------ connections
    def admit(self, conn: socket.socket) -> bool:
        """A slot for ``conn``: a free one, or one reclaimed from an idle or trickling connection."""
        slot = self.slots.admit(lambda: _shut(conn))
        with self._lock:
            if slot is None:
                self.stats["refused"] += 1
                return False
            self._open[conn] = slot
            self.stats["connections"] += 1
            self.stats["peak_connections"] = max(self.stats["peak_connections"], len(self.slots))
            return True

    def mark(self, conn: socket.socket, state: str) -> None:
        with self._lock:
            slot = self._open.get(conn)
        if slot is not None:
            self.slots.mark(slot, state)

    def leave(self, conn: socket.socket) -> None:
        with self._lock:
            slot = self._open.pop(conn, None)
        if slot is not None:
            self.slots.release(slot)

    # ------------------------------------------------------------------ requests
    def act(self, body: bytes, session_key: str, charge: Any) -> tuple[bytes, bool]:
        """The reply body to one ``/act`` body and whether it is double-encoded."""

        def before_parse(containers: int, commas: int) -> None:
            if not charge(decode_cost(len(body), containers, commas, copies=2)):
                raise MemoryBudgetError(f"server busy: no room within {self.budget_wait_s:g} s in the server's "
                                        f"memory budget to decode a {len(body):,}-byte request; "
                                        f"{self.memory.describe()}; try again later")

        request, encoded = decode_body(body, before_parse)
        obs, instruction = from_request(self.preset, request)
        obs = validate_observation(obs)
        if not session_key and not self._warned_anonymous:
            self._warned_anonymous = True
            LOG.warning("act: requests without %s (openvla-oft's client sends none) share one session; its episode "
                        "starts on a new instruction, POST /reset%s (--episode-per %s)", SESSION_HEADER,
                        ", or the joints back at the start pose" if self.episode_per == "auto" else "",
                        self.episode_per)
        entry = self.table.get(session_key)
        if not entry.lock.acquire(timeout=self.frame_timeout_s):
            raise SessionsBusyError(f"server busy: session {session_key or '(anonymous)'} is still answering an "
                                    "earlier request")
        try:
            if entry.episodes.starts(instruction, obs):
                entry.session.reset()
                entry.session.set_instruction(instruction)
            try:
                actions = entry.session.predict(obs)
            finally:
                if self.sessions.drop_if_stuck(entry.session) is None:
                    self.table.drop(session_key, entry)
            entry.used = time.monotonic()
        finally:
            entry.lock.release()
        return encode_reply(actions, encoded), encoded

    def error_body(self, exc: BaseException) -> bytes:
        self._count("errors")
        error, trace = describe_error(exc, self.debug)
        LOG.warning("error reply: %s", error)
        return json.dumps({"error": error, "traceback": trace}).encode("utf-8")


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    #: The listen backlog: socketserver's 5 dropped the SYNs of a burst of clients, each retried a second later.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: ActPolicyServer) -> None:
        self.owner = owner
        self._refusers = threading.BoundedSemaphore(_REFUSERS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.owner.admit(request):
            # Answered on a thread of its own: the refusal waits for the request it refuses (read and dropped,
            # so the client reads the 503, not a broken pipe), and the listener must not. At most
            # _REFUSERS at once; beyond them a refusal is written and the socket closed at once.
            if self._refusers.acquire(blocking=False):
                threading.Thread(target=self._refuse, args=(request, True), name="act-refusal", daemon=True).start()
            else:
                self._refuse(request, False)
            return
        super().process_request(request, client_address)

    def _refuse(self, request: socket.socket, drain: bool) -> None:
        body = (f'{{"error": "server busy: {self.owner.max_connections} connections are answering requests, the '
                'limit (--max-connections); try again later"}').encode()
        try:
            request.settimeout(1.0)
            request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            if drain:
                _drain_then_close(request, time.monotonic() + min(self.owner.frame_timeout_s, 5.0),
                                  self.owner.max_body_bytes + 65536)
        except OSError:
            pass
        finally:
            if drain:
                self._refusers.release()
        with contextlib.suppress(OSError):
            request.close()

    def shutdown_request(self, request: Any) -> None:
        self.owner.leave(request)
        super().shutdown_request(request)


def _handler_class(owner: ActPolicyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_ref = owner
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "robofollow-act"
    server_ref: ActPolicyServer

    def setup(self) -> None:
        super().setup()
        self._reader = _DeadlineReader(self.connection)
        self.rfile = self._buffered = io.BufferedReader(self._reader, 65536)  # every read under the deadline
        self.deadline = 0.0

    def handle_one_request(self) -> None:
        """Wait ``idle_timeout_s`` for a request's first byte; from it on, everything shares the frame deadline."""
        owner = self.server_ref
        owner.mark(self.connection, IDLE)
        self._reader.deadline = None
        self.connection.settimeout(owner.idle_timeout_s)
        try:
            first = self._buffered.peek(1)
        except (TimeoutError, OSError):
            self.close_connection = True
            return
        if not first:
            self.close_connection = True
            return
        self.deadline = self._reader.deadline = time.monotonic() + owner.frame_timeout_s
        owner.mark(self.connection, HEAD)
        super().handle_one_request()

    def parse_request(self) -> bool:
        ok = super().parse_request()  # the request line and headers, read under the deadline
        self.server_ref.mark(self.connection, BUSY)
        return ok

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.connection.settimeout(self.server_ref.idle_timeout_s)

    def _session_key(self) -> str:
        key = self.headers.get(SESSION_HEADER, "") or ""
        if len(key) > 64 or not all(c.isalnum() or c in "-_." for c in key):
            raise _HttpError(400, f"{SESSION_HEADER}: {key[:70]!r} is not a token of at most 64 letters, digits, -_.")
        return key

    def do_GET(self) -> None:
        owner = self.server_ref
        if self.path.split("?")[0] not in ("/health", "/healthz"):
            self._send(404, owner.error_body(_HttpError(404, f"GET {self.path[:80]}: not found; try /health")))
            return
        self._send(200, json.dumps({"status": "ok", "protocol": "act", "preset": owner.preset.name,
                                    "metadata": owner.metadata, "session_header": SESSION_HEADER,
                                    "sessions": len(owner.table)}).encode())

    def do_POST(self) -> None:
        owner = self.server_ref
        path = self.path.split("?")[0]
        hold = owner.memory.hold()
        try:
            key = self._session_key()
            if path == "/reset":
                self._drain_body(hold)
                dropped = owner.table.drop(key)
                self._send(200, json.dumps({"status": "reset", "session": key or "(anonymous)",
                                            "had_state": dropped}).encode())
                return
            if path != "/act":
                raise _HttpError(404, f"POST {path[:80]}: not found; the endpoints are /act and /reset")
            owner._count("requests")
            body = self._drain_body(hold)
            reply, _ = owner.act(body, key, lambda n: hold.charge(n, owner.budget_wait_s))
            self._send(200, reply)
        except _HttpError as exc:
            self.close_connection = exc.status in (408, 411, 413)
            self._send(exc.status, owner.error_body(exc))
            if self.close_connection:
                self._drop_rest()
        except (MemoryBudgetError, SessionsBusyError) as exc:
            self.close_connection = True
            self._send(503, owner.error_body(exc))
            self._drop_rest()
        except (WireFormatError, ObservationError) as exc:
            self._send(400, owner.error_body(exc))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception as exc:
            self._send(500, owner.error_body(exc))
        finally:
            hold.close()

    def _drop_rest(self) -> None:
        """After a refusal that closes: read and drop what the client is still sending (within the deadline,
        ``max_body_bytes`` at most), so it reads the refusal rather than a reset."""
        deadline = max(self.deadline, time.monotonic() + 1.0)
        self._reader.deadline = deadline
        with contextlib.suppress(OSError):
            self.wfile.flush()
            _drain_then_close(self.connection, deadline, self.server_ref.max_body_bytes + 65536, reader=self.rfile)

    def _drain_body(self, hold: Any) -> bytes:
        """The body, read against the deadline and charged to the budget as it arrives."""
        owner = self.server_ref
        if self.headers.get("Transfer-Encoding"):
            raise _HttpError(411, "Transfer-Encoding: not supported; send Content-Length")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            if self.command == "POST" and self.path.split("?")[0] == "/reset":
                return b""
            raise _HttpError(411, "Content-Length: missing; the body's length is required")
        if not length_text.strip().isdigit():
            raise _HttpError(400, f"Content-Length: {length_text[:40]!r} is not a byte count")
        length = int(length_text)
        if length > owner.max_body_bytes:
            raise _HttpError(413, f"Content-Length: {length:,} bytes exceed the limit of {owner.max_body_bytes:,}")
        parts: list[bytes] = []
        got = 0
        while got < length:
            left = self.deadline - time.monotonic()
            if left <= 0:
                owner._count("timeouts")
                raise _HttpError(408, f"request body: not complete within {owner.frame_timeout_s:g} s "
                                      f"({got:,} of {length:,} bytes)")
            self.connection.settimeout(left)
            try:
                chunk = self.rfile.read1(min(_READ, length - got))
            except TimeoutError:
                continue
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            # Twice: the chunks, then (for a moment) the joined body beside them (issue 36: charged once,
            # 64 × 32 MiB bodies peaked 160-172 MiB past the budget while their chunks were being joined).
            if not hold.charge(_BODY_COPIES * len(chunk), owner.budget_wait_s, time.monotonic() + left):
                raise hold.refusal(f"{len(chunk):,} more bytes of a request", owner.budget_wait_s)
            parts.append(chunk)
            got += len(chunk)
        body = b"".join(parts)
        parts.clear()
        hold.release((_BODY_COPIES - 1) * got)  # the chunks are gone; the body stays charged once
        return body


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each read bounded by what is left of the request's deadline (None: the socket's
    own timeout, the idle wait between requests). ``http.server`` reads the request line and the headers
    in many small reads, each with a fresh timeout: a trickle of one byte a second never timed out."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("request not complete within the frame timeout")
            self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


def _shut(conn: socket.socket) -> None:
    """Reclaim a connection's slot: its handler wakes to an end of stream and ends."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def _drain_then_close(conn: socket.socket, deadline: float, limit: int, reader: Any = None) -> None:
    """Stop writing, then read and drop what the peer still sends until it stops, ``deadline`` or ``limit``
    bytes: a socket closed with unread bytes resets the connection, and the peer may lose the reply."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    got = 0
    while got < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        conn.settimeout(left)
        try:
            chunk = reader.read1(65536) if reader is not None else conn.recv(65536)
        except (TimeoutError, OSError):
            return
        if not chunk:
            return
        got += len(chunk)
