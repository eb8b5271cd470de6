"""``serve --protocol act`` under the attacks of issue 36, on real loopback sockets: a header trickle is cut at the
frame deadline; silent and trickling sockets cannot hold every slot; one client's episode is not evicted by
others' session ids; a refusal is read by the client, not lost to a broken pipe."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import json_numpy
import numpy as np
import pytest
import requests

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.wire.act.client import ActHttpPolicy
from robofollow_ros.policy.wire.act.server import ActPolicyServer
from waiting import poll_until

pytestmark = pytest.mark.timeout(120)
HEAD = b"POST /act HTTP/1.1\r\nHost: x\r\n"


def observation(step_text: str = "stack the blocks") -> bytes:
    rng = np.random.default_rng(0)
    obs: dict[str, Any] = {k: rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
                           for k in ("full_image", "left_wrist_image", "right_wrist_image")}
    obs |= {"state": np.zeros(14), "instruction": step_text}
    return json_numpy.dumps(obs).encode()


def post(port: int, body: bytes, session: str | None = None, timeout: float = 10) -> requests.Response:
    headers = {"Connection": "close", "Content-Type": "application/json"}
    if session:
        headers["X-Session-ID"] = session
    return requests.post(f"http://127.0.0.1:{port}/act", data=body, headers=headers, timeout=timeout)


def raw_post(port: int, body: bytes) -> bytes:
    """A client that sends its whole request before it reads (as ``http.client`` does), on a plain socket: what
    it reads back, or b"" when the connection was reset under it (the broken pipe)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        try:
            sock.sendall(HEAD + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return b""
    return b"".join(chunks)


class StepPolicy:
    """Answers its step within the episode in every cell: an evicted episode shows as a step back at 1."""

    def __init__(self) -> None:
        self.step = 0

    def reset(self) -> None:
        self.step = 0

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: Any) -> np.ndarray:
        self.step += 1
        return np.full((1, ACTION_DIM), float(self.step), dtype=np.float32)


@contextmanager
def sockets(port: int, n: int, first: bytes = b"") -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        opened = []
        for _ in range(n):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
            if first:
                sock.sendall(first)
            opened.append(sock)
        yield opened


def test_a_header_trickle_is_cut_at_the_frame_deadline() -> None:
    """Issue 36: a byte of header every ~0.1 s kept a request open for 40 s at an 8 s frame timeout."""
    with ActPolicyServer(lambda: HoldPolicy(25), port=0, frame_timeout_s=0.5).start() as server, \
            socket.create_connection(("127.0.0.1", server.address[1]), timeout=10) as sock:
        sock.sendall(HEAD)
        start, sent, closed = time.monotonic(), 0, False
        while time.monotonic() - start < 10 and not closed:
            try:
                sock.sendall(b"X")  # never a complete header line
                sent += 1
                closed = bool(sock.recv(1, socket.MSG_DONTWAIT) == b"")
            except BlockingIOError:
                pass
            except OSError:
                closed = True
            time.sleep(0.1)  # the attacker's pace, not a synchronisation
        assert closed, f"still open after {sent} trickled bytes"
        assert time.monotonic() - start < 5  # cut at the 0.5 s deadline (plus scheduling), not after 10 s


@pytest.mark.parametrize("attack", ["silent", "trickling"])
def test_a_real_client_is_served_while_every_slot_is_held_by_idle_or_trickling_sockets(attack: str) -> None:
    """64 sockets that never send (or send half a request line and stop) held every slot of the TCP, act, vla-eval
    and model servers for the idle timeout (issue 36). Now they are reclaimed once silent, or trickling, past the
    head grace (1 s) — well within the client's frame timeout."""
    frame_timeout = 8.0
    with ActPolicyServer(lambda: HoldPolicy(25), port=0, max_connections=64,
                         frame_timeout_s=frame_timeout).start() as server:
        port = server.address[1]
        with sockets(port, 64, b"" if attack == "silent" else b"POST /a") as held:
            assert poll_until(lambda: server.open_connections == 64, 10)
            if attack == "silent":  # a fresh connection has a second to send its request; these are past it
                assert poll_until(lambda: server.slots.reclaimable() == 64, 10)
            start, replies = time.monotonic(), []
            while time.monotonic() - start < frame_timeout:
                replies.append(post(port, observation()).status_code)
                if replies[-1] == 200:
                    break
            assert replies[-1] == 200, replies
            assert len(held) == 64 and server.slots.reclaimed_idle + server.slots.reclaimed_head >= 1
            if attack == "silent":
                assert replies == [200]  # no wait at all: a socket silent past the grace is reclaimed at once


def test_other_clients_session_ids_cannot_evict_or_reset_an_episode() -> None:
    """Issue 36: client A at step 3, 70 requests with other session ids, A's next predict came back as step 1."""
    with ActPolicyServer(StepPolicy, port=0, max_connections=8).start() as server:
        port = server.address[1]
        for step in (1, 2, 3):
            reply = json_numpy.loads(post(port, observation(), "episode-a").text)
            assert reply[0, 0] == step
        others = [post(port, observation(), f"other-{i}").status_code for i in range(70)]
        assert others.count(200) == 7 and others.count(503) == 63  # the table is full; A's episode is kept
        reply = json_numpy.loads(post(port, observation(), "episode-a").text)
        assert reply[0, 0] == 4


def test_a_refusal_reaches_a_client_that_is_still_sending_its_body() -> None:
    """47 of 54 refused clients got a broken pipe instead of the 503 (issue 36): the server closed with the body
    unread. Every slot busy answering (a policy that blocks), a client posting 24 MiB reads the 503."""
    release = threading.Event()

    class Blocking(StepPolicy):
        def predict(self, obs: Any) -> np.ndarray:
            release.wait(30)
            return super().predict(obs)

    with ActPolicyServer(Blocking, port=0, max_connections=2, frame_timeout_s=10).start() as server:
        port = server.address[1]
        busy = [threading.Thread(target=post, args=(port, observation(), f"busy-{i}", 30)) for i in range(2)]
        for thread in busy:
            thread.start()
        try:
            assert poll_until(lambda: server.stats["requests"] == 2, 10)
            big = json.dumps({"state": [0.0] * 14, "pad": "x" * (24 << 20)}).encode()
            for _ in range(3):
                reply = raw_post(port, big)  # a reset (b"") here is the defect
                assert reply.startswith(b"HTTP/1.1 503") and b"server busy" in reply, reply[:200]
        finally:
            release.set()
            for thread in busy:
                thread.join(30)


def test_seventy_short_lived_clients_lock_nobody_out() -> None:
    """Issue 36 (bench/server_bounds.py): 70 act clients one after another, each reset + predict + close, held 64
    sessions for the frame timeout, and the 65th to 70th were refused. Our client now ends its session at close
    (``POST /reset`` with its token, on a server that says at /health that it keeps sessions)."""
    with ActPolicyServer(StepPolicy, port=0, max_connections=64, frame_timeout_s=30).start() as server:
        port = server.address[1]
        for _ in range(70):
            client = ActHttpPolicy("127.0.0.1", port, timeout_s=20)
            client.reset()
            assert client.predict(make_observation(seed=0))[0, 0] == 1.0  # a fresh episode every time
            client.close()
        assert len(server.table) == 0
