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
instruction changes or on ``POST /reset``: run one such client per server. At most
``max_connections`` sessions live at once; the least recently used idle one is released for a new
one, and one idle for ``idle_timeout_s`` is released too.

Bounds: ``max_connections`` open connections (the next one gets 503 and is closed); each read of
the request line and headers waits at most ``idle_timeout_s`` / ``frame_timeout_s`` (headers are
also bounded by ``http.server``: 64 KiB a line, 100 lines); the body needs ``Content-Length``, at
most ``max_body_bytes``, and must arrive within ``frame_timeout_s`` of the headers (a deadline, not
an idle timeout). Body bytes are charged to the server's memory budget (``wire/budget.py``) as
they arrive, and what decoding builds before it is decoded. Binds 127.0.0.1 by default;
``stop()`` closes the listener and every open connection, then the policies.
"""

from __future__ import annotations

import contextlib
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
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session, SessionsBusyError

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
SESSION_HEADER = "X-Session-ID"
_READ = 256 * 1024


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Entry:
    session: Session
    lock: threading.Lock = field(default_factory=threading.Lock)
    instruction: str | None = None
    used: float = field(default_factory=time.monotonic)


class _SessionTable:
    """Session token → policy session; bounded, least recently used idle ones released first."""

    def __init__(self, sessions: PolicySessions, limit: int, idle_s: float) -> None:
        self.sessions, self.limit, self.idle_s = sessions, limit, idle_s
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
                spare, entry = None, _Entry(session)
                while len(self._entries) >= self.limit:
                    idle = next((k for k, e in self._entries.items() if not e.lock.locked()), None)
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
                raise SessionsBusyError(f"server busy: {self.limit} sessions are running requests "
                                        "(--max-connections); try again later")
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
                 **settings: Unpack[ServerSettings]) -> None:
        if preset not in PRESETS:
            raise ValueError(f"preset: {preset!r}; expected one of {sorted(PRESETS)}")
        super().__init__(policy, stats=("connections", "requests", "errors", "refused", "timeouts",
                                        "peak_connections"), **settings)
        self.preset = PRESETS[preset]
        self.max_body_bytes = int(max_body_bytes)
        self.table = _SessionTable(self.sessions, self.max_connections, self.idle_timeout_s)
        self._open: set[socket.socket] = set()
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
        with self._lock:
            if len(self._open) >= self.max_connections:
                self.stats["refused"] += 1
                return False
            self._open.add(conn)
            self.stats["connections"] += 1
            self.stats["peak_connections"] = max(self.stats["peak_connections"], len(self._open))
            return True

    def leave(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.discard(conn)

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
        entry = self.table.get(session_key)
        if not entry.lock.acquire(timeout=self.frame_timeout_s):
            raise SessionsBusyError(f"server busy: session {session_key or '(anonymous)'} is still answering an "
                                    "earlier request")
        try:
            if instruction != entry.instruction:
                entry.session.reset()
                entry.session.set_instruction(instruction)
                entry.instruction = instruction
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

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: ActPolicyServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.owner.admit(request):
            body = (f'{{"error": "server busy: {self.owner.max_connections} connections are open, the limit '
                    '(--max-connections); try again later"}').encode()
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

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
        self.connection.settimeout(self.server_ref.idle_timeout_s)  # waiting for the next request line

    def parse_request(self) -> bool:
        self.connection.settimeout(self.server_ref.frame_timeout_s)  # the headers, once a request started
        self.deadline = time.monotonic() + self.server_ref.frame_timeout_s
        ok = super().parse_request()
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
        except (MemoryBudgetError, SessionsBusyError) as exc:
            self.close_connection = True
            self._send(503, owner.error_body(exc))
        except (WireFormatError, ObservationError) as exc:
            self._send(400, owner.error_body(exc))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception as exc:
            self._send(500, owner.error_body(exc))
        finally:
            hold.close()

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
            if not hold.charge(len(chunk), owner.budget_wait_s, time.monotonic() + left):
                raise hold.refusal(f"{len(chunk):,} more bytes of a request", owner.budget_wait_s)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)
