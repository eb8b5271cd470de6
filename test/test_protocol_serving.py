"""Policy servers for many clients (issue 16): concurrent connections with their own sessions, idle
clients that block nobody, a connection cap, deadlines a trickle cannot stretch, dynamic batching.

Real loopback sockets throughout; openpi-client (PyPI) is the independent openpi peer. The echo
drills (policy/drills/echo.py) put the instruction's code and the step since reset into every chunk, so a
server that mixed two connections' sessions is caught by the numbers.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from openpi_client.websocket_client_policy import WebsocketClientPolicy

from robofollow_ros.policy.drills.echo import EchoPolicy, SharedEchoPolicy, instruction_code
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.wire.batching import BatchSettings, DynamicBatcher
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.policy.wire.sessions import PolicySessions
from waiting import poll_until

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning"),
]
OBS = make_observation(seed=3, width=32, height=24)
CLIENTS = 50


def tcp_client(server: RoboFollowTcpServer) -> RoboFollowTcpPolicy:
    return RoboFollowTcpPolicy("127.0.0.1", server.address[1], timeout_s=120, connect_attempts=3,
                               connect_interval_s=0.05)


def openpi_request(prompt: str) -> dict[str, Any]:
    return to_openpi_observation(OBS, prompt)


def run_all(count: int, body: Callable[[int], Any]) -> list[Any]:
    """Run ``body(i)`` in ``count`` threads; re-raise the first failure."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            results[i] = body(i)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    if errors:
        raise errors[0]
    return results


def trickle(sock: socket.socket, count: int, byte: bytes, until: bytes | None = None) -> tuple[int, bytes]:
    """Send ``count`` bytes one every 0.1 s until the peer closes (or says ``until``);
    returns (bytes sent, bytes the peer sent)."""
    received = b""
    for sent in range(count):
        while select.select([sock], [], [], 0)[0]:  # read what the server said; b"" means it closed
            try:
                chunk = sock.recv(65536)
            except ConnectionError:
                chunk = b""
            if not chunk:
                return sent, received
            received += chunk
            if until is not None and until in received:
                return sent, received
        try:
            sock.sendall(byte)
        except OSError:
            return sent, received
        time.sleep(0.1)  # the trickle under test: each byte well within any per-read timeout
    return count, received


# ------------------------------------------------------------------------------- many clients
def test_fifty_concurrent_tcp_clients_are_all_answered_each_with_its_own_session() -> None:
    barrier = threading.Barrier(CLIENTS, timeout=120)
    with RoboFollowTcpServer(lambda: EchoPolicy(delay_s=0.01), port=0).start() as server:
        def client(i: int) -> list[tuple[float, float]]:
            policy = tcp_client(server)
            policy.reset()
            policy.set_instruction(f"task number {i}")
            barrier.wait()  # every connection is open and configured before anyone predicts
            rows = [tuple(policy.predict(OBS)[0, :2]) for _ in range(3)]
            policy.close()
            return rows

        results = run_all(CLIENTS, client)
        assert server.stats["peak_connections"] == CLIENTS
        assert server.stats["errors"] == 0
    for i, rows in enumerate(results):
        assert rows == [(instruction_code(f"task number {i}"), float(step)) for step in (1, 2, 3)]


def test_fifty_concurrent_openpi_clients_are_all_answered_each_with_its_own_prompt() -> None:
    barrier = threading.Barrier(CLIENTS, timeout=120)
    with OpenpiPolicyServer(lambda: EchoPolicy(delay_s=0.01), port=0).start() as server:
        def client(i: int) -> list[tuple[float, float]]:
            policy = WebsocketClientPolicy("127.0.0.1", server.address[1])  # openpi's own client
            rows = [tuple(policy.infer(openpi_request(f"prompt {i}"))["actions"][0, :2])]
            barrier.wait()
            rows += [tuple(policy.infer(openpi_request(f"prompt {i}"))["actions"][0, :2]) for _ in range(2)]
            policy._ws.close()
            return rows

        results = run_all(CLIENTS, client)
        assert server.stats["peak_connections"] == CLIENTS
    for i, rows in enumerate(results):
        assert rows == [(instruction_code(f"prompt {i}"), float(step)) for step in (1, 2, 3)]


def test_interleaved_prompts_stay_apart_on_both_protocols() -> None:
    """The bug of issue 16: one server, two clients alternating calls, each keeps its own episode."""
    with RoboFollowTcpServer(EchoPolicy, port=0).start() as tcp, \
            OpenpiPolicyServer(EchoPolicy, port=0).start() as ws:
        clients = {"red": tcp_client(tcp), "blue": tcp_client(tcp)}
        for word, client in clients.items():
            client.reset()
            client.set_instruction(f"pick the {word} cube")
        openpi = {word: WebsocketClientPolicy("127.0.0.1", ws.address[1]) for word in ("red", "blue")}
        for step in (1, 2, 3):
            for word in ("red", "blue"):
                code = instruction_code(f"pick the {word} cube")
                assert tuple(clients[word].predict(OBS)[0, :2]) == (code, step)
                reply = openpi[word].infer(openpi_request(f"pick the {word} cube"))
                assert tuple(reply["actions"][0, :2]) == (code, step)
        assert tcp.sessions.built == 2 and ws.sessions.built == 2
        for client in clients.values():
            client.close()


def test_a_finished_connection_hands_its_policy_on_after_reset() -> None:
    with RoboFollowTcpServer(EchoPolicy, port=0).start() as server:
        first = tcp_client(server)
        first.reset()
        first.set_instruction("stack")
        first.predict(OBS)
        first.close()
        assert poll_until(lambda: server.open_connections == 0, 30)
        second = tcp_client(server)
        assert tuple(second.predict(OBS)[0, :2]) == (instruction_code(""), 1.0)  # no state of "stack" left
        second.close()
        assert server.sessions.built == 1  # reused, not rebuilt


def test_an_idle_client_does_not_block_others() -> None:
    with RoboFollowTcpServer(EchoPolicy, port=0).start() as tcp, \
            OpenpiPolicyServer(EchoPolicy, port=0).start() as ws:
        idle = socket.create_connection(tcp.address, timeout=30)  # connects, says nothing
        half = socket.create_connection(tcp.address, timeout=30)
        half.sendall(b"\x00\x00")  # half a header, then silence
        idle_ws = WebsocketClientPolicy("127.0.0.1", ws.address[1])  # connected, never infers
        with idle, half:
            busy = tcp_client(tcp)
            busy.reset()
            assert busy.predict(OBS).shape == (2, 14)
            busy.close()
            other = WebsocketClientPolicy("127.0.0.1", ws.address[1])
            assert other.infer(openpi_request("x"))["actions"].shape == (2, 14)
            assert tcp.stats["peak_connections"] == 3 and ws.stats["peak_connections"] == 2
        idle_ws._ws.close()


# ------------------------------------------------------------------------------- limits
def test_a_connection_over_the_cap_is_refused_with_a_message_and_the_next_one_is_served() -> None:
    with RoboFollowTcpServer(EchoPolicy, port=0, max_connections=2).start() as server:
        a, b = tcp_client(server), tcp_client(server)
        a.reset()
        b.reset()
        c = tcp_client(server)
        with pytest.raises(RemotePolicyError, match=r"server busy: 2 connections are open"):
            c.reset()
        # A reference client reads the refusal as the reply to its first request.
        with socket.create_connection(server.address, timeout=30) as raw:
            send_frame(raw, encode_message({"cmd": "reset", "obs": None}))
            reply = decode_message(recv_frame(raw, 30) or b"{}")
        assert "server busy" in reply["error"] and "traceback" in reply
        a.close()
        assert poll_until(lambda: server.open_connections < 2, 30)
        c.reset()
        assert c.predict(OBS).shape == (2, 14)
        assert server.stats["refused"] >= 2
        b.close()
        c.close()


def test_an_openpi_connection_over_the_cap_is_closed_with_try_again_later() -> None:
    with OpenpiPolicyServer(EchoPolicy, port=0, max_connections=1).start() as server:
        first = WebsocketClientPolicy("127.0.0.1", server.address[1])
        first.infer(openpi_request("x"))  # served once: its slot is kept between requests (a silent one is not)
        with pytest.raises(Exception, match="server busy: 1 connections are open") as info:
            WebsocketClientPolicy("127.0.0.1", server.address[1])
        assert "1013" in str(info.value)
        ours = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=30, connect_attempts=1)
        with pytest.raises(ConnectionError, match="server busy"):
            ours.predict(OBS)
        first._ws.close()
        assert poll_until(lambda: server.open_connections == 0, 30)
        assert ours.predict(OBS).shape == (2, 14)
        ours.close()


def test_a_trickle_of_bytes_cannot_extend_the_tcp_frame_deadline() -> None:
    """Each byte arrives well within any per-read timeout; the frame as a whole must still end."""
    with RoboFollowTcpServer(EchoPolicy, port=0, frame_timeout_s=1.0, idle_timeout_s=60).start() as server:
        with socket.create_connection(server.address, timeout=30) as sock:
            sock.sendall(struct.pack(">I", 200))
            sent, _ = trickle(sock, 200, b" ")  # 200 bytes would take 20 s
            assert sent < 200, "the server read the whole trickled frame"
        client = tcp_client(server)
        client.reset()  # the server still serves
        client.close()


def test_a_trickle_of_bytes_cannot_extend_the_openpi_message_deadline() -> None:
    with OpenpiPolicyServer(EchoPolicy, port=0, frame_timeout_s=1.0, idle_timeout_s=60).start() as server:
        with socket.create_connection(server.address, timeout=30) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            assert sock.recv(12) == b"HTTP/1.1 101"
            sock.sendall(bytes([0x82, 0x80 | 126]) + struct.pack(">H", 200) + b"\x00\x00\x00\x00")  # masked, 200 B
            sent, received = trickle(sock, 200, b"\x90", until=b"message not complete")
            assert sent < 200, "the server waited for the whole trickled message"
            close = received.rfind(b"\x88")  # the close frame: code 1008 and the reason
            assert close >= 0 and received[close + 2:close + 4] == struct.pack(">H", 1008), received[-80:]
            assert b"message not complete within 1 s" in received[close:]
        assert server.stats["timeouts"] == 1


# ------------------------------------------------------------------------------- batching
def test_a_shareable_policy_batches_concurrent_requests_and_keeps_each_clients_instruction() -> None:
    policy = SharedEchoPolicy(delay_s=0.02)
    batcher = DynamicBatcher(policy.predict_batch, BatchSettings(max_batch_size=4, max_wait_ms=2000), timeout_s=120)
    clients = 12
    barrier = threading.Barrier(clients, timeout=120)
    with RoboFollowTcpServer(PolicySessions(shared=policy, batcher=batcher), port=0).start() as server:
        def client(i: int) -> list[float]:
            remote = tcp_client(server)
            remote.reset()
            remote.set_instruction(f"instruction {i}")
            barrier.wait()
            codes = [float(remote.predict(OBS)[0, 0]) for _ in range(3)]
            remote.close()
            return codes

        results = run_all(clients, client)
    for i, codes in enumerate(results):
        assert codes == [instruction_code(f"instruction {i}")] * 3
    assert sum(policy.batch_sizes) == 3 * clients and policy.single_calls == 0
    assert max(policy.batch_sizes) > 1 and max(policy.batch_sizes) <= 4
    assert list(batcher.batch_sizes) == policy.batch_sizes


def test_a_batch_that_fails_answers_every_caller_and_a_bad_chunk_only_its_own() -> None:
    calls: list[int] = []

    def predict_batch(observations: list[dict[str, Any]]) -> list[np.ndarray]:
        calls.append(len(observations))
        if any(o["instruction"] == "explode" for o in observations):
            raise RuntimeError("model exploded")
        return [np.full((2, 14), np.nan if o["instruction"] == "nan" else 1.0) for o in observations]

    batcher = DynamicBatcher(predict_batch, BatchSettings(max_batch_size=2, max_wait_ms=2000), timeout_s=60)
    answers = run_all(2, lambda i: _outcome(batcher, ["ok", "nan"][i]))
    assert answers[0] == "ok" and "row 0, column 0" in answers[1]
    answers = run_all(2, lambda i: _outcome(batcher, ["ok", "explode"][i]))
    assert answers == ["model exploded", "model exploded"]
    assert calls == [2, 2]
    batcher.close()


def _outcome(batcher: DynamicBatcher, instruction: str) -> str:
    try:
        batcher.predict({"instruction": instruction})
        return "ok"
    except Exception as exc:  # the message is what the test compares
        return str(exc)
