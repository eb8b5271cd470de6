"""Any RoboFollow policy behind GR00T's ZMQ protocol, so GR00T clients (``PolicyClient``, N1.5's
``RobotInferenceClient``, a harness speaking them) can evaluate RoboFollow's policies.

Endpoints, and nothing else: ``ping`` (``{"status": "ok", ...}`` as GR00T answers), ``reset``
(``{}``), ``get_action`` and ``get_modality_config`` (the key map as ``__ModalityConfig_class__`` maps, which
GR00T's client turns into its ``ModalityConfig``: ``as_json`` a map for N1.6/N1.7 clients, JSON text for a
client whose last ``get_action`` was N1.5's flat form or for ``modality_form="n1.5"``; the action
``delta_indices`` span ``action_horizon`` rows, else the ``chunk_size`` the served policy declares, else the
length of the last chunk answered, else one row, with a warning). ``kill`` and unknown
endpoints are answered ``{"error": ...}``: a client never stops this server; its operator does. A
``get_action`` whose ``data`` holds ``observation`` is N1.6 (nested or flat keys; answered
``[action, {}]``), otherwise the data is an N1.5 flat observation (answered with the ``action.<key>``
map). Arrays come back in the form the request used (``.npy`` maps, or msgpack-numpy).
With an ``api_token`` (argument, else the ``GR00T_API_TOKEN`` environment variable) a request
without it gets GR00T's ``Unauthorized: Invalid API token``.

Many clients (issue 16): a ROUTER socket, so each client (its ZMQ identity: a REQ socket) gets its
own policy session from ``wire/sessions.py``; requests of different clients run concurrently on a
pool of ``max_connections`` threads while one I/O thread owns the socket. A client has one request in
flight at a time (a second is refused), at most ``max_connections`` clients hold sessions (the next is
told ``server busy``), and a client idle for ``idle_timeout_s`` loses its session (released for reuse).
A client that reopens its socket is a new client with a fresh session (our ``api=n1.5`` client resets
that way; N1.5 has no reset endpoint). A client whose connection closes loses its session at once
(issue 36: 70 short-lived clients held every session until the idle timeout): a socket monitor reports
each TCP connection accepted and closed by its descriptor, each message says which descriptor it came
on (``ZMQ_SRCFD``), and a closed descriptor's clients are released (after the answer, if one is being
computed). Descriptors are reused, so each client records which connection on its descriptor it came
on (the count of accepts seen, read after its message: the accept is reported before any message).

Bounds: the ZMTP handshake within ``frame_timeout_s`` (libzmq assembles each message itself, so there is no
per-message deadline to set beyond that), ZMTP heartbeats that drop dead peers, and one memory budget
(``max_pending_bytes``, ``wire/budget.py``) that libzmq's own buffers are inside of (issue 36: libzmq received
and assembled 64 peers' 32 MiB messages before the handler charged any, 1.7 GiB against a 512 MiB budget).
libzmq holds a message while it arrives, where nothing of ours sees it; what it may hold is bounded by
libzmq itself and taken off the budget first:

- ``ZMQ_MAXMSGSIZE`` = :func:`zmq_message_limit`: ``max_message_bytes``, but at most the budget ÷ (2 ×
  ``max_connections``) (4 MiB at the defaults, 512 MiB and 64); libzmq drops a peer that sends more by closing
  its connection, and the server, which holds a duplicate of every accepted connection
  (``gr00t/connections.py``), writes the client its refusal naming the limit (``stats["dropped_refused"]``);
- at most ``max_connections`` TCP peers at once (:class:`~robofollow_ros.policy.wire.slots.ConnectionSlots`
  fed by the socket monitor): a peer accepted beyond them reclaims the slot of one that has sent no request
  within a second, or of a peer idle since its last answer for longer than ``frame_timeout_s``; failing that
  the newcomer's connection is shut at once (before its handshake, so its ZMQ socket keeps the request and
  reconnects by itself every 100 ms: it waits in line rather than being refused). The monitor's events come
  after the fact, and its handshake event does not name the connection: a newcomer that has sent more than a
  ZMTP greeting when its accept is read (the kernel's count, read just before the shutdown) is let in past the
  limit (``stats["over_cap"]``), since its request may be on its way and a shut connection would lose it;
- ``RCVHWM`` 1: a peer's next message waits in its TCP socket, not in libzmq, until the I/O thread has taken
  the last one, which it does at once;
- so libzmq holds at most ``max_connections`` × ``ZMQ_MAXMSGSIZE`` (256 MiB at the defaults: half the
  budget) in messages arriving, plus, for a moment, a peer's complete message the I/O thread has yet to take;
  the requests the server holds are charged to the rest (``memory.capacity``, 256 MiB at the defaults): the
  I/O thread charges each message as it takes it (its frame and what unpacking builds: twice its bytes), and
  a message that finds no room is answered ``server busy ...`` at once and dropped (the I/O thread never
  waits). Total: the budget, plus what the interpreter and the policy hold anyway.

Binds 127.0.0.1 by default. ``stop`` closes the socket (linger 0), terms the
context and closes the sessions' policies: no abort at exit.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import os
import queue
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import zmq

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.observation import validate_observation
from robofollow_ros.policy.wire.budget import MIB, SMALL_REQUEST_BYTES, Hold, MemoryBudget, decode_cost
from robofollow_ros.policy.wire.common import WireFormatError, describe_error
from robofollow_ros.policy.wire.gr00t.codec import GR00T_MAX_MESSAGE_BYTES, GR00T_MAX_OBJECTS, packb, unpackb
from robofollow_ros.policy.wire.gr00t.connections import HeldConnections
from robofollow_ros.policy.wire.gr00t.observation import (
    Gr00tKeyMap,
    from_gr00t_observation,
    key_map,
    modality_config,
    to_gr00t_action,
)
from robofollow_ros.policy.wire.serving import PolicyServer, ServerSettings
from robofollow_ros.policy.wire.sessions import PolicyFactory, PolicySessions, Session
from robofollow_ros.policy.wire.slots import BUSY, IDLE, Slot

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's; the annotations are never evaluated
    from typing_extensions import Unpack

LOG = logging.getLogger(__name__)
ENDPOINTS = ("ping", "reset", "get_action", "get_modality_config")
TOKEN_ENV = "GR00T_API_TOKEN"
#: How often the I/O thread wakes to expire idle clients when nothing happens.
_TICK_MS = 500
#: The smallest ``ZMQ_MAXMSGSIZE`` :func:`zmq_message_limit` sets, however small the budget.
MIN_MESSAGE_BYTES = 64 * 1024


def zmq_message_limit(max_message_bytes: int, budget_bytes: int, peers: int) -> int:
    """``ZMQ_MAXMSGSIZE``: ``max_message_bytes``, but at most ``budget_bytes`` ÷ (2 × ``peers``), so that the
    messages libzmq assembles for ``peers`` peers at once take at most half the memory budget (module
    docstring); never below :data:`MIN_MESSAGE_BYTES`."""
    return max(MIN_MESSAGE_BYTES, min(max_message_bytes, budget_bytes // (2 * peers)))



class EndpointError(Exception):
    """A request this server refuses (endpoint, token, busy); its text is the ``error`` reply."""


@dataclass
class _Client:
    session: Session | None = None
    last_seen: float = field(default_factory=time.monotonic)
    busy: bool = False
    instruction: str | None = None
    fresh: bool = True  # reset (or new) and no get_action since: no reset needed on the first instruction
    n15: bool = False  # its last get_action was N1.5's flat form: ModalityConfig as JSON text, as N1.5 decodes
    #: The TCP connection it came on: (descriptor, which accept on that descriptor), None when unknown.
    connection: tuple[int, int] | None = None
    gone: bool = False  # its connection closed while a call was running: released when the call ends


class Gr00tPolicyServer(PolicyServer):
    """Serve a policy to GR00T clients on ``host:port`` (0 = any free port); ``policy`` and the keyword
    arguments are every server's (:class:`~robofollow_ros.policy.wire.serving.PolicyServer`)."""

    thread_name = "gr00t-server"

    def __init__(self, policy: PolicySessions | Policy | PolicyFactory, host: str = "127.0.0.1", port: int = 5555,
                 *, api_token: str | None = None, keys: Gr00tKeyMap | None = None,
                 action_horizon: int | None = None, modality_form: str = "auto",
                 max_message_bytes: int = GR00T_MAX_MESSAGE_BYTES, **settings: Unpack[ServerSettings]) -> None:
        super().__init__(policy, stats=("requests", "errors", "refused", "clients", "peak_clients",
                                        "closed_clients", "over_cap", "dropped_refused"),
                         **settings)
        self.api_token = api_token if api_token is not None else (os.environ.get(TOKEN_ENV) or None)
        self.keys = keys or key_map()
        #: libzmq's limit per message (``ZMQ_MAXMSGSIZE``), and the share of the budget its buffers may take.
        self.max_message_bytes = zmq_message_limit(max_message_bytes, self.memory.capacity, self.max_connections)
        self.libzmq_bytes = self.max_connections * self.max_message_bytes
        self.memory = MemoryBudget(max(MIB, self.memory.capacity - self.libzmq_bytes))
        if modality_form not in ("auto", "n1.5", "n1.6"):
            raise ValueError(f"modality_form: {modality_form!r} is not one of auto, n1.5, n1.6")
        if action_horizon is not None and (not isinstance(action_horizon, int) or action_horizon < 1):
            raise ValueError(f"action_horizon: {action_horizon!r} is not a whole number of rows >= 1")
        self.action_horizon = action_horizon
        self.modality_form = modality_form
        self.horizon = 0  # rows of the last chunk answered
        self._horizon_warned = False
        self._clients: dict[bytes, _Client] = {}
        self._replies: queue.SimpleQueue[tuple[list[bytes], bytes, tuple[int, int] | None]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=min(self.max_connections, 32), thread_name_prefix="gr00t-call")
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        for option, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, self.max_message_bytes), (zmq.RCVHWM, 1),
                              (zmq.SNDHWM, 4), (zmq.ROUTER_MANDATORY, 1),
                              (zmq.HANDSHAKE_IVL, int(1000 * self.frame_timeout_s)),
                              (zmq.HEARTBEAT_IVL, 10_000), (zmq.HEARTBEAT_TIMEOUT, 30_000)):
            self._socket.setsockopt(option, value)
        try:
            bound = f"tcp://{host}:{port}" if port else f"tcp://{host}:*"
            self._socket.bind(bound if ":" not in host else bound.replace(host, f"[{host}]", 1))
        except zmq.ZMQError as exc:
            self._close_all()
            raise OSError(exc.errno if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL) else errno.EINVAL,
                          f"cannot bind tcp://{host}:{port} ({exc})") from None
        endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.address: tuple[str, int] = (host, int(endpoint.rsplit(":", 1)[1]))
        #: Connections accepted / closed so far per descriptor (the socket monitor's events).
        self._accepted: dict[int, int] = {}
        self._closed: dict[int, int] = {}
        #: The slot of each open TCP connection, by (descriptor, which accept on it) (module docstring).
        self._peers: dict[tuple[int, int], Slot] = {}
        #: Duplicates of the accepted connections, to refuse a request libzmq drops (``gr00t/connections.py``).
        self._held = HeldConnections(drain_s=self.frame_timeout_s)
        self._dropped_reply = packb({"error": (
            f"server dropped the request: a message over its {self.max_message_bytes:,}-byte limit (the smaller "
            "of --max-message-bytes and the memory budget / (2 x --max-connections)), or one that is not ZMTP")})
        self._monitor = self._socket.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)

    # ------------------------------------------------------------------ lifecycle
    def stop(self, join_timeout_s: float = 10.0) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._join_serving(join_timeout_s)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._thread is None or not self._thread.is_alive():
            self._close_all()
        self.sessions.close()

    def _close_all(self) -> None:
        monitor = getattr(self, "_monitor", None)
        if monitor is not None:
            with contextlib.suppress(zmq.ZMQError):
                self._socket.disable_monitor()
            monitor.close(linger=0)
        held = getattr(self, "_held", None)
        if held is not None:
            held.close()
        self._socket.close(linger=0)
        self._context.term()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._clients)

    # ------------------------------------------------------------------ I/O thread (owns the socket)
    def serve_forever(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        while not self._stop.is_set():
            events = dict(poller.poll(_TICK_MS))
            if self._wake_r in events:
                os.read(self._wake_r, 4096)
            self._send_replies()
            if self._socket in events:
                for _ in range(64):  # a burst, then replies get their turn
                    try:
                        parts = self._socket.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._read_monitor()  # the accept of this message's connection was reported before it
                    self._receive(parts, _source_fd(parts[-1]))
                    del parts
            self._read_monitor()
            for key, refused in self._held.sweep(self._dropped_reply):  # closes whose event the monitor lost
                self._count("dropped_refused", int(refused))
                self._connection_ended(key)
            self._expire_idle()

    def _read_monitor(self) -> None:
        """Count accepted and closed connections per descriptor; give each a peer slot (module docstring),
        shutting a newcomer beyond them; release the clients of a closed one."""
        events = []
        while True:  # every pending event first: a descriptor shut below is not one closed (and reused) since
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            events.append(struct.unpack("=hi", frames[0][:6]))
        for i, (event, fd) in enumerate(events):
            if event == zmq.EVENT_ACCEPTED:
                self._accepted[fd] = self._accepted.get(fd, 0) + 1
                key = (fd, self._accepted[fd])
                if not _closed_later(events[i + 1:], fd):  # still open, its descriptor not reused
                    self._held.hold(key, fd)
                slot = self.slots.admit(lambda key=key: self._shut_peer(key))  # type: ignore[misc]
                if slot is not None:
                    self._peers[key] = slot
                elif self._held.handshaken(key):
                    # Its handshake is done already (this thread was late): its request may be on its way, and
                    # a shut connection would lose it. Let in past the limit, without a slot.
                    self._count("over_cap")
                else:
                    self._count("refused")
                    self._shut_peer(key)  # before its handshake: its ZMQ socket reconnects and sends again
            elif event == zmq.EVENT_DISCONNECTED:
                self._closed[fd] = self._closed.get(fd, 0) + 1
                key = (fd, self._closed[fd])
                if self._held.ended(key, self._dropped_reply):
                    self._count("dropped_refused")
                self._connection_ended(key)

    def _connection_ended(self, key: tuple[int, int]) -> None:
        slot = self._peers.pop(key, None)
        if slot is not None:
            self.slots.release(slot)
        self._release_connection(key)

    def _shut_peer(self, key: tuple[int, int]) -> None:
        """Shut a TCP connection libzmq owns (it sees the end and closes it), if it is still open."""
        fd, generation = key
        if self._accepted.get(fd) != generation or self._closed.get(fd, 0) >= generation:
            return
        self._peers.pop(key, None)
        if self._held.shut(key):
            return
        with contextlib.suppress(OSError):
            duplicate = socket.socket(fileno=os.dup(fd))
            try:
                duplicate.shutdown(socket.SHUT_RDWR)
            finally:
                duplicate.close()

    def _release_connection(self, connection: tuple[int, int]) -> None:
        with self._lock:
            gone = [ident for ident, c in self._clients.items() if c.connection == connection]
            released = []
            for ident in gone:
                client = self._clients[ident]
                if client.busy:
                    client.gone = True  # released by its worker when the call ends
                else:
                    released.append(self._clients.pop(ident))
            self.stats["closed_clients"] += len(gone)
        for client in released:
            if client.session is not None:
                self.sessions.release(client.session)

    def _send_replies(self) -> None:
        while True:
            try:
                envelope, reply, connection = self._replies.get_nowait()
            except queue.Empty:
                return
            slot = self._peers.get(connection) if connection is not None else None
            if slot is not None:
                self.slots.mark(slot, IDLE)  # answered: a client between requests
            try:
                self._socket.send_multipart([*envelope, reply], zmq.NOBLOCK, copy=False)
            except zmq.ZMQError as exc:  # the client is gone (EHOSTUNREACH) or not reading (EAGAIN)
                LOG.info("reply not delivered: %s", exc)

    def _receive(self, parts: list[zmq.Frame], fd: int | None = None) -> None:
        """One message from the socket (I/O thread): charged to the budget at once, or answered ``server busy``
        and dropped (module docstring); then to a worker."""
        if len(parts) < 2:
            return
        envelope = [p.bytes for p in parts[:-1]]  # [identity, b""] from REQ, [identity] from DEALER
        payload = parts[-1]
        connection = (fd, self._accepted[fd]) if fd is not None and self._accepted.get(fd) else None
        slot = self._peers.get(connection) if connection is not None else None
        if slot is not None:
            self.slots.mark(slot, BUSY)
        size = len(payload.buffer)
        hold = self.memory.hold(large=size > SMALL_REQUEST_BYTES)
        if not hold.charge(decode_cost(size, min(size, GR00T_MAX_OBJECTS), copies=2), 0.0):
            refusal = str(hold.refusal(f"a {size:,}-byte request", 0))
            hold.close()
            self._count("errors")
            self._reply(envelope, packb({"error": refusal}), connection)
            return
        self._dispatch(envelope, payload, hold, connection)

    def _reply(self, envelope: list[bytes], reply: bytes, connection: tuple[int, int] | None) -> None:
        self._replies.put((envelope, reply, connection))
        with contextlib.suppress(OSError):  # stopped meanwhile
            os.write(self._wake_w, b"x")

    def _dispatch(self, envelope: list[bytes], payload: zmq.Frame, hold: Hold,
                  connection: tuple[int, int] | None) -> None:
        identity = envelope[0]
        with self._lock:
            self.stats["requests"] += 1
            client = self._clients.get(identity)
            refusal = None
            if client is None:
                if len(self._clients) >= self.max_connections:
                    refusal = (f"server busy: {self.max_connections} clients hold sessions, the limit "
                               "(--max-connections); try again later")
                else:
                    client = self._clients[identity] = _Client(connection=connection)
                    self.stats["clients"] += 1
                    self.stats["peak_clients"] = max(self.stats["peak_clients"], len(self._clients))
            elif client.busy:
                refusal = "one request at a time per client: the previous one is still being answered"
            if client is not None and refusal is None:
                client.busy = True
                client.last_seen = time.monotonic()
        if refusal is not None or client is None:
            hold.close()
            self._count("refused")
            self._reply(envelope, packb({"error": refusal}), connection)
            return
        self._pool.submit(self._answer, client, envelope, [payload], hold, connection)

    def _expire_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [ident for ident, c in self._clients.items()
                    if not c.busy and now - c.last_seen > self.idle_timeout_s]
            released = [self._clients.pop(ident) for ident in idle]
        for client in released:
            if client.session is not None:
                self.sessions.release(client.session)

    # ------------------------------------------------------------------ worker threads
    def _answer(self, client: _Client, envelope: list[bytes], box: list[zmq.Frame], hold: Hold,
                connection: tuple[int, int] | None) -> None:
        """Answer one request (worker thread): the message is the one frame in ``box`` (taken out, so that only
        what is unpacked from it outlives the unpacking); ``hold`` is its charge, released once it is answered."""
        forms: set[str] = set()
        try:
            try:
                request = unpackb(box.pop().buffer, max_bytes=self.max_message_bytes, forms=forms)
                result = self._handle(client, request)
            except Exception as exc:
                self._count("errors")
                if isinstance(exc, EndpointError):
                    error = str(exc)
                else:
                    text, trace = describe_error(exc, self.debug)
                    error = f"{text}\n{trace}" if self.debug else f"{type(exc).__name__}: {text}"
                LOG.warning("error reply: %s", error.splitlines()[0])
                result = {"error": error}
                if client.session is not None:
                    client.session = self.sessions.drop_if_stuck(client.session)
            reply = packb(result, "msgpack-numpy" if forms == {"msgpack-numpy"} else "npy")
        except Exception as exc:  # the answer itself could not be encoded
            reply = packb({"error": f"reply could not be encoded: {exc}"})
        finally:
            box.clear()
            request = result = None  # nothing of the request outlives its charge
            hold.close()
            with self._lock:
                client.busy = False
                client.last_seen = time.monotonic()
                identity = envelope[0]
                gone = client.gone and self._clients.get(identity) is client
                if gone:
                    del self._clients[identity]
            if gone and client.session is not None:
                self.sessions.release(client.session)
        self._reply(envelope, reply, connection)

    def _handle(self, client: _Client, request: Any) -> Any:
        if not isinstance(request, dict):
            raise WireFormatError(f"request: expected a map with 'endpoint', got {type(request).__name__}")
        if self.api_token is not None:
            token = request.get("api_token")
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.api_token.encode()):
                raise EndpointError("Unauthorized: Invalid API token")
        endpoint = request.get("endpoint", "get_action")
        if endpoint == "kill":
            raise EndpointError("endpoint 'kill' is refused: this server is stopped by its operator, not by clients")
        if endpoint not in ENDPOINTS:
            raise EndpointError(f"Unknown endpoint: {str(endpoint)[:80]!r}; this server answers {', '.join(ENDPOINTS)}")
        data = request.get("data")
        if endpoint == "ping":
            return {"status": "ok", "message": "Server is running"}
        if client.session is None:  # built before get_modality_config too: its policy declares the horizon
            client.session = self.sessions.acquire()
        if endpoint == "get_modality_config":
            form = self.modality_form if self.modality_form != "auto" else "n1.5" if client.n15 else "n1.6"
            return modality_config(self.keys, self._action_horizon(), form)
        if endpoint == "reset":
            client.session.reset()
            client.instruction, client.fresh = None, True
            return {}
        return self._get_action(client, client.session, data)

    def _get_action(self, client: _Client, session: Session, data: Any) -> Any:
        n16 = isinstance(data, dict) and isinstance(data.get("observation"), dict)
        client.n15 = not n16
        raw = data["observation"] if n16 else data
        obs, text, batched = from_gr00t_observation(raw, self.keys)
        obs = validate_observation(obs)
        if text != client.instruction:
            if not client.fresh:  # a new instruction mid-connection: a new episode (N1.5 has no reset)
                session.reset()
            session.set_instruction(text)
            client.instruction = text
        client.fresh = False
        chunk = session.predict(obs)
        self.horizon = int(chunk.shape[0])
        flat = not n16 or not isinstance(raw.get("video"), dict)
        action = to_gr00t_action(np.asarray(chunk), self.keys, batched, flat)
        return [action, {}] if n16 else action

    def _action_horizon(self) -> int:
        """The rows ``get_action`` answers, for the action ``delta_indices``: the operator's ``action_horizon``,
        the ``chunk_size`` the served policy declares, the last chunk's length, or 1 (and a warning)."""
        if self.action_horizon is not None:
            return self.action_horizon
        declared = self.sessions.declared("chunk_size")
        if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 1:
            return declared
        if self.horizon >= 1:
            return self.horizon
        if not self._horizon_warned:
            self._horizon_warned = True
            LOG.warning("get_modality_config: the policy declares no chunk_size and has answered no get_action "
                        "yet; action.delta_indices says one row (give the server action_horizon)")
        return 1

def _closed_later(events: list[tuple[int, int]], fd: int) -> bool:
    """Whether ``events`` (those after a connection's accept) report a close of its descriptor."""
    return any(other == fd and event == zmq.EVENT_DISCONNECTED for event, other in events)


def _source_fd(frame: zmq.Frame) -> int | None:
    """The descriptor of the TCP connection a message came on (``ZMQ_SRCFD``), None where libzmq gives none."""
    try:
        fd = int(frame.get(zmq.SRCFD))
    except (zmq.ZMQError, AttributeError, TypeError, ValueError):
        return None
    return fd if fd >= 0 else None
