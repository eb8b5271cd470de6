"""Silent and trickling sockets cannot lock a real client out of any server (issue 36 item 7), on real loopback
sockets: RoboFollow TCP, openpi, vla-eval, and the model server's TCP and openpi. 64 sockets hold every slot
(connected and never sending, or having sent the first byte of a request and stopped); a real client is still
served within its frame timeout, because a newcomer reclaims a slot silent, or trickling, past the head grace
(1 s; a fresh connection has that long to send its first request). A client between two requests keeps its
slot (its episode lives on the connection). ``test_act_server_bounds.py`` holds the same cases for act."""

from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import websockets.exceptions
import websockets.sync.client

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.policy.wire.vlaeval.server import VlaEvalPolicyServer
from robofollow_ros.policy.wire.websocket_receive import bound_sends
from waiting import poll_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model_server"))
from robofollow_model_server.openpi import OpenpiServer as ModelOpenpiServer
from robofollow_model_server.serving import PolicyHost
from robofollow_model_server.tcp import TcpServer as ModelTcpServer

pytestmark = pytest.mark.timeout(120)
FRAME_TIMEOUT_S = 8.0
SLOTS = 64
OBS = make_observation(seed=0)
HANDSHAKE = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def robofollow_tcp(slots: int = SLOTS) -> Any:
    return RoboFollowTcpServer(lambda: HoldPolicy(5), port=0, max_connections=slots, frame_timeout_s=FRAME_TIMEOUT_S)


def openpi(slots: int = SLOTS) -> Any:
    return OpenpiPolicyServer(lambda: HoldPolicy(5), port=0, max_connections=slots, frame_timeout_s=FRAME_TIMEOUT_S)


def vla_eval(slots: int = SLOTS) -> Any:
    return VlaEvalPolicyServer(lambda: HoldPolicy(5), port=0, max_connections=slots, frame_timeout_s=FRAME_TIMEOUT_S)


def model_tcp(slots: int = SLOTS) -> Any:
    return ModelTcpServer(PolicyHost(HoldPolicy(5)), port=0, max_connections=slots, frame_timeout_s=FRAME_TIMEOUT_S)


def model_openpi(slots: int = SLOTS) -> Any:
    return ModelOpenpiServer(PolicyHost(HoldPolicy(5)), port=0, max_connections=slots,
                             frame_timeout_s=FRAME_TIMEOUT_S)


#: protocol -> (server, client SPEC scheme, is a websocket server)
SERVERS: dict[str, tuple[Callable[..., Any], str, bool]] = {
    "robofollow-tcp": (robofollow_tcp, "tcp", False), "openpi": (openpi, "openpi", True),
    "vla-eval": (vla_eval, "vla-eval", True), "model-server-tcp": (model_tcp, "tcp", False),
    "model-server-openpi": (model_openpi, "openpi", True)}


@contextmanager
def running(make: Callable[..., Any], slots: int = SLOTS) -> Iterator[Any]:
    server = make(slots).start()
    try:
        yield server
    finally:
        server.stop(10.0)


@contextmanager
def held_sockets(port: int, n: int, websocket: bool, first: bytes) -> Iterator[list[socket.socket]]:
    """``n`` sockets (through the websocket handshake where the protocol has one), each sending ``first``."""
    with ExitStack() as stack:
        opened = []
        for _ in range(n):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
            if websocket:
                sock.sendall(HANDSHAKE)
                reply = b""
                while b"\r\n\r\n" not in reply:
                    chunk = sock.recv(4096)
                    assert chunk, "the server closed during the handshake"
                    reply += chunk
                assert reply.startswith(b"HTTP/1.1 101"), reply[:80]
            if first:
                sock.sendall(first)
            opened.append(sock)
        yield opened


def one_call(scheme: str, port: int) -> str:
    """A real client's reset + predict: "ok", or the first line of why it failed."""
    try:
        client = load_policy(f"{scheme}://127.0.0.1:{port}", {"timeout_s": 20, "connect_attempts": 1})
    except Exception as exc:
        return str(exc).splitlines()[0]
    try:
        client.reset()
        client.set_instruction("stack the blocks")
        return "ok" if client.predict(OBS).shape[1] == 14 else "bad shape"
    except Exception as exc:
        return str(exc).splitlines()[0] or type(exc).__name__
    finally:
        client.close()


@pytest.mark.parametrize("attack", ["silent", "trickling"])
@pytest.mark.parametrize("protocol", sorted(SERVERS))
def test_a_real_client_is_served_while_every_slot_is_held_by_idle_or_trickling_sockets(protocol: str,
                                                                                       attack: str) -> None:
    """Issue 36: 64 silent sockets locked every client out of TCP, vla-eval and the model server for the
    30-minute idle timeout. Trickling: half a frame length (TCP) or the first byte of a frame (websocket)."""
    make, scheme, websocket = SERVERS[protocol]
    first = b"" if attack == "silent" else (b"\x82" if websocket else b"\x00\x00")
    with running(make) as server:
        port = server.address[1]
        with held_sockets(port, SLOTS, websocket, first) as held:
            assert poll_until(lambda: len(server.slots) == SLOTS, 30), len(server.slots)
            if attack == "trickling":  # every slot is opening a request, none idle
                assert poll_until(lambda: server.slots.count("head") == SLOTS, 30), server.slots.count("head")
            else:  # silent past the grace a fresh connection gets to send its request
                assert poll_until(lambda: server.slots.reclaimable() == SLOTS, 30)
            start, outcomes = time.monotonic(), []
            while time.monotonic() - start < FRAME_TIMEOUT_S / 2:  # before any frame deadline could cut them
                outcomes.append(one_call(scheme, port))
                if outcomes[-1] == "ok":
                    break
            assert outcomes[-1] == "ok", outcomes
            assert len(held) == SLOTS
            if attack == "silent":
                assert outcomes == ["ok"]  # no wait at all: a socket silent past the grace is reclaimed at once
            else:
                assert all("server busy" in o for o in outcomes[:-1]), outcomes  # refusals named, until then


@pytest.mark.parametrize("protocol", ["robofollow-tcp", "model-server-tcp"])
def test_a_client_between_two_requests_keeps_its_slot_and_its_episode(protocol: str) -> None:
    """A connection answered before is not reclaimed while idle for less than the frame timeout: a newcomer over
    the cap is refused (naming the limit) instead of cutting another client's episode."""
    make, scheme, _ = SERVERS[protocol]
    with running(make, slots=1) as server:  # one slot: the client below holds it between its requests
        port = server.address[1]
        client = load_policy(f"{scheme}://127.0.0.1:{port}", {"timeout_s": 20, "connect_attempts": 1})
        try:
            client.reset()
            assert poll_until(lambda: len(server.slots) == 1, 10)
            assert "server busy" in one_call(scheme, port)
            assert client.predict(OBS).shape[1] == 14  # its connection (and session) survived
        finally:
            client.close()


def test_websocket_replies_are_written_under_a_timeout() -> None:
    """The websocket library writes with no timeout: a client that never reads its replies would hold its handler
    (and its busy slot) forever once its window filled. ``bound_sends`` puts ``SO_SNDTIMEO`` on the socket."""
    a, b = socket.socketpair()
    with a, b:
        bound_sends(SimpleNamespace(socket=a), 2.5)  # type: ignore[arg-type]
        seconds, micros = struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16))
        assert (seconds, micros) == (2, 500_000)
        a.setblocking(True)
        with pytest.raises(OSError):  # nobody reads b: the write gives up instead of blocking for ever
            while True:
                a.send(b"x" * 65536)


@pytest.mark.parametrize("protocol", ["openpi", "vla-eval", "model-server-openpi"])
def test_a_reclaimed_websocket_client_reads_why(protocol: str) -> None:
    """A websocket whose slot is reclaimed gets a 1013 close naming the reason (not a reset), then the newcomer is
    served."""
    make, scheme, _ = SERVERS[protocol]
    with running(make, slots=1) as server:
        port = server.address[1]
        with websockets.sync.client.connect(f"ws://127.0.0.1:{port}", max_size=None) as silent:
            assert poll_until(lambda: server.slots.reclaimable() == 1, 10)
            assert one_call(scheme, port) == "ok"
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                while True:  # openpi sends its metadata first
                    silent.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
            assert "slot reclaimed" in closed.value.rcvd.reason
