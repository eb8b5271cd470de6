"""Reliability of both policy servers: load held, faults survived, hostile inputs tried.

Real servers in threads of this process, real clients and raw sockets on loopback, every wait
bounded. Three parts, each on both protocols (RoboFollow TCP and openpi's websocket):

- **load held**: N clients at once, each with its own instruction and joints, K ``predict`` calls
  each against the stateful ``echo`` drill (its chunk names the instruction and the step), so an
  answer from another client's session shows; plus a burst over the connection cap;
- **faults survived**: clients that die in the middle of a frame, slow announcers of huge frames
  while a well-behaved client works, a policy call that times out (the session is reset, the next
  trial starts clean), the server restarted under a connected client (a clear error, then a
  reconnect);
- **hostile inputs tried**: malformed frames and messages, impossible lengths, bodies over the
  count limits, bad arrays, observations outside the contract; each one must get its error (or
  the close the protocol prescribes), and afterwards the server must still serve, holding no
  memory and no connection.

A fourth part, **server bounds** (``server_bounds.py``, issue 36), holds every protocol's server (RoboFollow
TCP, openpi, vla-eval, act, GR00T, the model server's TCP and openpi), each in a process of its own, to silent
and trickling sockets, 70 short-lived clients and 64 × 32 MiB requests (peak RSS against the memory budget plus
a stated overhead: past it, not held), and counts the refusals delivered.

Run: ``.venv/bin/python bench/reliability.py [--clients 32] [--calls 25] [--bounds-only]`` (a minute
on 2 cores, plus a few for the server bounds). Prints the tables and rewrites the ``reliability`` and
``server-bounds`` sections of docs/benchmarks.md; exits 1 if a check did not hold.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import server_bounds
import websockets.exceptions
import websockets.sync.client
from benchdoc import write_section

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.drills.echo import EchoPolicy, instruction_code
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.guard import TimeoutGuardedPolicy
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.codec import packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy, wire_observation
from robofollow_ros.policy.wire.robofollow.codec import MAX_FRAME_BYTES, decode_message, encode_message
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer

TCP, OPENPI = "RoboFollow TCP", "openpi"
#: Frame deadline of the servers here (the default is 60 s): slow announcers are dropped after it.
FRAME_TIMEOUT_S = 2.0
WAIT_S = 30.0
BASE = make_observation(seed=0)  # 3 × 320×240 RGB, as the simulator sends


@dataclass
class Row:
    area: str
    protocol: str
    what: str
    n: int
    outcome: str
    held: bool


def poll_until(condition: Callable[[], object], timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(0.02)
    return True


def observation(i: int) -> Observation:
    """Client ``i``'s observation: the shared images, its own joints."""
    vector = np.random.default_rng(1000 + i).uniform(-1, 1, ACTION_DIM)
    return {"observation": BASE["observation"], "joint_action": {"vector": vector}, "instruction": ""}


def echo_matches(rows: np.ndarray, instruction: str, step: int, obs: Observation) -> bool:
    """The echo drill's chunk for this client's instruction, step and joints (not another's)."""
    vector = np.asarray(obs["joint_action"]["vector"], np.float32)
    return (rows.shape[1] == ACTION_DIM and rows[0, 0] == instruction_code(instruction) and rows[0, 1] == step
            and bool(np.array_equal(rows[0, 2:], vector[:ACTION_DIM - 2])))


def run_threads(count: int, body: Callable[[int], Any], timeout_s: float = 300) -> list[Any]:
    """``body(i)`` in ``count`` threads released together; each result or exception, in order."""
    results: list[Any] = [None] * count
    start = threading.Barrier(count, timeout=60)

    def target(i: int) -> None:
        try:
            start.wait()
            results[i] = body(i)
        except BaseException as exc:  # counted by the caller
            results[i] = exc

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [TimeoutError("client thread hung") if t.is_alive() else r for t, r in zip(threads, results, strict=True)]


def latency_text(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"median {statistics.median(ordered):.1f} ms, p99 {p99:.1f} ms"


def tcp_client(port: int, timeout_s: float = WAIT_S) -> RoboFollowTcpPolicy:
    return RoboFollowTcpPolicy("127.0.0.1", port, timeout_s=timeout_s, connect_attempts=3, connect_interval_s=0.1)


def openpi_client(port: int, timeout_s: float = WAIT_S) -> OpenpiWebsocketPolicy:
    return OpenpiWebsocketPolicy("127.0.0.1", port, timeout_s=timeout_s, connect_attempts=3, connect_interval_s=0.1)


def drained(server: RoboFollowTcpServer | OpenpiPolicyServer) -> bool:
    """No connection open and no byte of the memory budget held."""
    return poll_until(lambda: server.open_connections == 0 and server.memory.used == 0)


def serves(protocol: str, port: int) -> bool:
    """A fresh, well-behaved client gets a correct answer."""
    client = tcp_client(port) if protocol == TCP else openpi_client(port)
    try:
        client.reset()
        client.set_instruction("still serving")
        return echo_matches(client.predict(observation(0)), "still serving", 1, observation(0))
    except Exception:
        return False
    finally:
        client.close()


# ------------------------------------------------------------------------------------- load held
def load(protocol: str, clients: int, calls: int) -> list[Row]:
    rows: list[Row] = []
    server: RoboFollowTcpServer | OpenpiPolicyServer
    server = (RoboFollowTcpServer(EchoPolicy, port=0, max_connections=clients) if protocol == TCP
              else OpenpiPolicyServer(EchoPolicy, port=0, max_connections=clients))
    with server.start():
        port = server.address[1]

        def one_client(i: int) -> tuple[int, int, list[float]]:
            client = tcp_client(port, 120) if protocol == TCP else openpi_client(port, 120)
            instruction, obs = f"client {i} stacks the cups", observation(i)
            right = crossed = 0
            samples: list[float] = []
            try:
                client.reset()
                client.set_instruction(instruction)
                for step in range(1, calls + 1):
                    started = time.perf_counter()
                    chunk = client.predict(obs)
                    samples.append(1000 * (time.perf_counter() - started))
                    if echo_matches(chunk, instruction, step, obs):
                        right += 1
                    else:
                        crossed += 1
            finally:
                client.close()
            return right, crossed, samples

        started = time.monotonic()
        results = run_threads(clients, one_client)
        elapsed = time.monotonic() - started
        done = [r for r in results if isinstance(r, tuple)]
        answered = sum(r[0] for r in done)
        crossed = sum(r[1] for r in done)
        failed = len(results) - len(done)
        samples = [s for r in done for s in r[2]]
        total = clients * calls
        size = "0.92 MB JSON requests" if protocol == TCP else "0.45 MB msgpack requests after the client's resize"
        rows.append(Row("load held", protocol,
                        f"{clients} clients at once, {calls} `predict` each (own instruction and joints, "
                        f"{size}; `echo` policy)", total,
                        f"{answered} answered by their own session, {crossed} crossed, {failed} clients failed; "
                        f"{latency_text(samples) if samples else 'no calls'} per call, "
                        f"{total / elapsed:.0f} calls/s in all; peak {server.stats['peak_connections']} connections",
                        answered == total and crossed == 0 and failed == 0))
        ok = drained(server) and serves(protocol, port)
        rows.append(Row("load held", protocol, "afterwards: connections and memory budget drained, next client served",
                        1, "yes" if ok else "NO", ok))

    cap, burst = 4, 24
    server = (RoboFollowTcpServer(EchoPolicy, port=0, max_connections=cap) if protocol == TCP
              else OpenpiPolicyServer(EchoPolicy, port=0, max_connections=cap))
    with server.start():
        port = server.address[1]
        held = [tcp_client(port) if protocol == TCP else openpi_client(port) for _ in range(cap)]
        for client in held:
            client.set_instruction("holding")
            client.predict(observation(1))
        everyone_answered = threading.Barrier(burst, timeout=60)

        def over_cap(i: int) -> str:
            try:
                if protocol == TCP:
                    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
                        send_frame(sock, encode_message({"cmd": "reset", "obs": None}))
                        reply = recv_frame(sock, WAIT_S, WAIT_S)
                        return str(decode_message(reply).get("error")) if reply else "closed without a reply"
                with websockets.sync.client.connect(f"ws://127.0.0.1:{port}", compression=None,
                                                    open_timeout=WAIT_S) as ws:
                    try:
                        ws.recv(timeout=WAIT_S)
                        return "admitted"
                    except websockets.exceptions.ConnectionClosed as exc:
                        return f"{exc.rcvd.code} {exc.rcvd.reason}" if exc.rcvd else "closed without a close frame"
            finally:
                everyone_answered.wait()

        outcomes = run_threads(burst, over_cap)
        unaffected = 0
        for client in held:  # their sessions carry on: step 2 of their episode
            unaffected += echo_matches(client.predict(observation(1)), "holding", 2, observation(1))
            client.close()
        refused = sum(isinstance(o, str) and "server busy" in o and f"{cap} connections" in o for o in outcomes)
        how = "the framed error reply" if protocol == TCP else "close 1013 with the reason"
        rows.append(Row("load held", protocol, f"a burst of {burst} connections over a cap of {cap} (kept open)",
                        burst, f"{refused} of {burst} read \"server busy: {cap} connections are open\" ({how}); "
                        f"{unaffected} of the {cap} admitted clients carried on with their sessions",
                        refused == burst and unaffected == cap))
    return rows


# ------------------------------------------------------------------------------------- faults
def ws_handshake(port: int) -> socket.socket:
    """A raw websocket connection after the opening handshake and the server's metadata frame."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed during the handshake")
        data += chunk
    if not data.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(data[:80].decode(errors="replace"))
    return sock  # the metadata frame stays unread: the server does not wait for it to be read


def ws_frame_header(length: int) -> bytes:
    """Header of a masked binary client frame of ``length`` bytes (zero mask)."""
    if length < 126:
        return bytes([0x82, 0x80 | length]) + b"\0" * 4
    if length < 65536:
        return bytes([0x82, 0x80 | 126]) + struct.pack(">H", length) + b"\0" * 4
    return bytes([0x82, 0x80 | 127]) + struct.pack(">Q", length) + b"\0" * 4


def die_mid_frame(protocol: str, port: int, i: int) -> None:
    """Start a real-size request, send half of it, and vanish (a FIN, or every other time a reset)."""
    if protocol == TCP:
        body = encode_message({"cmd": "predict", "obs": wire_observation(observation(i), "x")})
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        sock.sendall(struct.pack(">I", len(body)) + body[:len(body) // 2])
    else:
        request = packb(to_openpi_observation(observation(i), "x"))
        sock = ws_handshake(port)
        sock.sendall(ws_frame_header(len(request)) + request[:len(request) // 2])
    if i % 2:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    sock.close()


@contextmanager
def announcers(protocol: str, port: int, count: int) -> Iterator[None]:
    """``count`` peers that announce a huge frame, send a few bytes of it and then nothing."""
    socks = []
    try:
        for _ in range(count):
            if protocol == TCP:
                sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
                sock.sendall(struct.pack(">I", MAX_FRAME_BYTES) + b"{")
            else:
                sock = ws_handshake(port)
                sock.sendall(ws_frame_header(30 << 20) + b"\x81\xa1x")  # 30 MiB announced, 3 bytes sent
            socks.append(sock)
        yield
    finally:
        for sock in socks:
            sock.close()


class StallOnce:
    """Echo whose first ``predict`` (over all copies sharing ``state``) stalls until released."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.inner, self.state = EchoPolicy(), state

    def reset(self) -> None:
        self.inner.reset()

    def set_instruction(self, text: str) -> None:
        self.inner.set_instruction(text)

    def predict(self, obs: Observation) -> np.ndarray:
        with self.state["lock"]:
            stall, self.state["stalled"] = not self.state["stalled"], True
        if stall:
            self.state["release"].wait(60)
        return self.inner.predict(obs)


def faults(protocol: str) -> list[Row]:
    rows: list[Row] = []
    make: type[RoboFollowTcpServer] | type[OpenpiPolicyServer] = (RoboFollowTcpServer if protocol == TCP
                                                                   else OpenpiPolicyServer)
    with make(EchoPolicy, port=0, frame_timeout_s=FRAME_TIMEOUT_S).start() as server:
        port = server.address[1]
        dead = 20
        for i in range(dead):
            die_mid_frame(protocol, port, i)
        ok = drained(server) and serves(protocol, port)
        rows.append(Row("faults survived", protocol, "clients that die half-way through a 0.92 MB request "
                        "(half close, half reset)", dead,
                        f"{'connections and memory budget back to 0' if ok else 'NOT drained'}; next client served",
                        ok))

        client = tcp_client(port) if protocol == TCP else openpi_client(port)
        client.set_instruction("while they hang")
        obs = observation(2)
        for _ in range(5):
            client.predict(obs)
        quiet = []
        for _ in range(20):
            started = time.perf_counter()
            client.predict(obs)
            quiet.append(1000 * (time.perf_counter() - started))
        count = 8
        announced_at = time.monotonic()
        with announcers(protocol, port, count):
            poll_until(lambda: server.open_connections >= count + 1, 10)
            busy = []
            for _ in range(20):
                started = time.perf_counter()
                client.predict(obs)
                busy.append(1000 * (time.perf_counter() - started))
            held_bytes = server.memory.used
            # TCP hangs up at the deadline; openpi sends its 1008 close then, and frees the connection when
            # the peer answers the close or the close handshake's own timeout (10 s) passes.
            allowed = FRAME_TIMEOUT_S + (1 if protocol == TCP else 10 + 2)
            dropped = poll_until(lambda: server.open_connections == 1, allowed + 5)
            dropped_after = time.monotonic() - announced_at
        client.close()
        slowed = statistics.median(busy) / statistics.median(quiet)
        announced = "128 MiB frames" if protocol == TCP else "30 MiB messages"
        how = (f"hung up on them {dropped_after:.1f} s after they started (frame deadline {FRAME_TIMEOUT_S:g} s)"
               if protocol == TCP else
               f"sent 1008 at the {FRAME_TIMEOUT_S:g} s frame deadline; connections freed {dropped_after:.1f} s after "
               "they started (+ the 10 s close-handshake timeout, as they never answer the close)")
        rows.append(Row("faults survived", protocol, f"{count} slow announcers of {announced} (a few bytes, then "
                        "silence) while a client works", count,
                        f"the client's median {statistics.median(busy):.1f} ms vs {statistics.median(quiet):.1f} ms "
                        f"without them (n=20 each); the budget held {held_bytes:,} B for them; "
                        + (how if dropped else "NOT dropped"),
                        dropped and dropped_after <= allowed and slowed < 3 and held_bytes < (1 << 20)))

    state: dict[str, Any] = {"lock": threading.Lock(), "stalled": False, "release": threading.Event()}
    try:
        with make(lambda: TimeoutGuardedPolicy(StallOnce(state), 0.3), port=0).start() as server:
            port = server.address[1]
            client = tcp_client(port) if protocol == TCP else openpi_client(port)
            timed_out = False
            try:
                client.reset()
                client.set_instruction("first")
                client.predict(observation(3))
            except RemotePolicyError as exc:
                timed_out = "no answer within 0.3 s" in str(exc)
            trials = 5
            clean = 0
            for n in range(trials):
                client.reset()
                client.set_instruction(f"trial {n}")
                clean += echo_matches(client.predict(observation(3)), f"trial {n}", 1, observation(3))
            client.close()
        rows.append(Row("faults survived", protocol, "a policy call that times out (0.3 s guard), then "
                        f"{trials} more trials on the same client", trials,
                        f"the caller read the timeout: {'yes' if timed_out else 'NO'}; {clean} of {trials} later "
                        "trials started clean (step 1, own instruction) on a fresh session",
                        timed_out and clean == trials))
    finally:
        state["release"].set()

    restarts = 3
    port = 0
    clear = recovered = 0
    server = make(EchoPolicy, port=0).start()
    port = server.address[1]
    client = tcp_client(port, 10) if protocol == TCP else openpi_client(port, 10)
    try:
        client.set_instruction("across restarts")
        client.predict(observation(4))
        for n in range(restarts):
            server.stop()
            try:
                client.predict(observation(4))
            except ConnectionError as exc:
                clear += f"127.0.0.1:{port}" in str(exc) and "failed" in str(exc)
            server = make(EchoPolicy, port=port).start()
            client.reset()
            client.set_instruction(f"restart {n}")
            recovered += echo_matches(client.predict(observation(4)), f"restart {n}", 1, observation(4))
    finally:
        client.close()
        server.stop()
    rows.append(Row("faults survived", protocol, "the server stopped and restarted on its port under a "
                    "connected client", restarts,
                    f"{clear} of {restarts} calls in the gap failed with a ConnectionError naming the server; "
                    f"{recovered} of {restarts} next trials reconnected and started clean",
                    clear == restarts and recovered == restarts))
    return rows


# ------------------------------------------------------------------------------------- hostile inputs
def bad_observations() -> dict[str, dict[str, Any]]:
    """Observations outside the contract (policy/observation.py), by what is wrong."""
    def obs(**changes: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"observation": {k: {"rgb": v["rgb"][:24, :32]} for k, v in BASE["observation"].items()},
                               "joint_action": {"vector": np.zeros(ACTION_DIM)}, "instruction": "stack"}
        for path, value in changes.items():
            node = out
            *parents, leaf = path.split("__")
            for key in parents:
                node = node[key]
            if value is KeyError:
                del node[leaf]
            else:
                node[leaf] = value
        return out

    return {
        "13 joint values": obs(joint_action__vector=np.zeros(13)),
        "a 2-D joint vector": obs(joint_action__vector=np.zeros((2, 7))),
        "NaN joints": obs(joint_action__vector=np.full(ACTION_DIM, np.nan)),
        "integer joints": obs(joint_action__vector=np.arange(ACTION_DIM)),
        "no joints": obs(joint_action=KeyError),
        "no cameras object": obs(observation=KeyError),
        "a camera that is not an object": obs(observation__left_camera="x"),
        "a float64 image": obs(observation__head_camera__rgb=np.zeros((24, 32, 3))),
        "an RGBA image": obs(observation__left_camera__rgb=np.zeros((24, 32, 4), np.uint8)),
        "an image 5000 pixels wide": obs(observation__right_camera__rgb=np.zeros((1, 5000, 3), np.uint8)),
        "a lone surrogate in the instruction": obs(instruction="pick \ud800 up"),
        "a 100,000-character instruction": obs(instruction="x" * 100_000),
    }


def hostile_tcp() -> list[Row]:
    rng = random.Random(23)
    valid = encode_message({"cmd": "predict", "obs": wire_observation(observation(5), "x")})
    array = '{"__numpy_array__": true, "data": "%s", "dtype": "%s", "shape": %s}'
    cases: dict[str, list[bytes]] = {
        "random bytes as the body": [rng.randbytes(rng.randint(1, 300)) for _ in range(30)],
        "a real observation with one byte changed": [
            valid[:at] + bytes([rng.randrange(256)]) + valid[at + 1:]
            for at in [rng.randrange(2000) for _ in range(10)] + [rng.randrange(len(valid)) for _ in range(20)]],
        "a real observation cut short": [valid[:rng.randrange(1, len(valid))] for _ in range(10)],
        "over the JSON count limits (1.1 M containers; 2.1 M elements)": [b"[" * 1_100_000,
                                                                          b"[" + b"0," * 2_100_000 + b"0]"],
        "nesting 100,000 deep; a 401-digit integer; NaN where a number goes": [
            b"[" * 100_000 + b"]" * 100_000, b'{"cmd": ' + b"9" * 401 + b"}", b'{"cmd": "predict", "obs": NaN}'],
        "bad arrays (object dtype, shape past 128 MiB, bytes not matching the shape, not base64)": [
            (('{"cmd": "predict", "obs": ' + array + "}") % args).encode() for args in
            [("AAAA", "object", "[3]"), ("AAAA", "uint8", "[1099511627776]"), ("AAAAAAAA", "uint8", "[3]"),
             ("AA!A", "uint8", "[3]"), ("AAAA", "complex64", "[1]"), ("AAAA", "uint8", "[-3]")]],
        "an unknown command; a request that is not an object; predict without an observation": [
            b'{"cmd": "explode", "obs": null}', b"[1, 2, 3]", b'{"cmd": "predict"}'],
        "observations outside the contract": [encode_message({"cmd": "predict", "obs": o})
                                              for o in bad_observations().values()],
    }
    rows: list[Row] = []
    with RoboFollowTcpServer(EchoPolicy, port=0, frame_timeout_s=FRAME_TIMEOUT_S).start() as server:
        port = server.address[1]
        for what, bodies in cases.items():
            errors = answered = 0
            for body in bodies:
                with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
                    send_frame(sock, body)
                    reply = decode_message(recv_frame(sock, WAIT_S, WAIT_S) or b"{}")
                    errors += "error" in reply
                    answered += "res" in reply
            mutated = "changed" in what  # a changed byte may leave a valid request
            ok = errors + answered == len(bodies) and (mutated or errors == len(bodies))
            still = f", {answered} still valid and answered" if answered else ""
            rows.append(Row("hostile inputs", TCP, what, len(bodies),
                            f"{errors} error repl{'y' if errors == 1 else 'ies'}{still}, connection kept", ok))
        silent = 0
        lengths = [0, MAX_FRAME_BYTES + 1, 2**31, 2**32 - 1]
        for length in lengths:
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
                sock.sendall(struct.pack(">I", length))
                try:
                    silent += sock.recv(16) == b""
                except ConnectionResetError:
                    silent += 1
        rows.append(Row("hostile inputs", TCP, "impossible frame lengths (0, 128 MiB + 1, 2³¹, 2³² − 1)",
                        len(lengths), f"{silent} dropped silently, as the reference server does",
                        silent == len(lengths)))
        tried = sum(r.n for r in rows)
        ok = drained(server) and serves(TCP, port)
        rows.append(Row("hostile inputs", TCP, "afterwards: still serving, nothing held", tried,
                        f"{'yes' if ok else 'NO'}: a new client served, 0 connections and 0 B of the budget held; "
                        f"server counted {server.stats['errors']} error replies, {server.stats['dropped']} dropped",
                        ok))
    return rows


def hostile_openpi() -> list[Row]:
    rng = random.Random(29)
    valid = packb(to_openpi_observation(observation(6), "x"))

    def ndarray(fields: dict[bytes, Any]) -> bytes:
        request = to_openpi_observation(observation(6), "x")
        request["state"] = {b"__ndarray__": True, b"data": b"\0" * 56, b"dtype": "<f4", b"shape": [14], **fields}
        return packb(request)

    requests: dict[str, list[bytes | str]] = {
        "a text frame instead of msgpack": ["{\"state\": []}"],
        "random bytes as the message": [rng.randbytes(rng.randint(1, 300)) for _ in range(30)],
        "a real request with one byte changed": [valid[:at] + bytes([rng.randrange(256)]) + valid[at + 1:]
                                                 for at in (rng.randrange(2000) for _ in range(30))],
        "bad arrays (object dtype, shape past the data, wrong byte count)": [
            ndarray({b"dtype": "|O"}), ndarray({b"shape": [2**62, 2**62]}), ndarray({b"data": b"\0" * 3})],
        "requests outside ALOHA's contract (no cam_high, unknown camera, 13 joints, a map as the prompt)": [
            packb({"state": np.zeros(14, np.float32), "images": {}}),
            packb({"state": np.zeros(14, np.float32), "images": {"cam_high": np.zeros((3, 8, 8), np.uint8),
                                                                  "cam_top": np.zeros((3, 8, 8), np.uint8)}}),
            packb({"state": np.zeros(13, np.float32), "images": {"cam_high": np.zeros((3, 8, 8), np.uint8)}}),
            packb({"state": np.zeros(14, np.float32), "images": {"cam_high": np.zeros((3, 8, 8), np.uint8)},
                   "prompt": {"x": 1}})],
        "observations outside the contract after conversion (NaN joints, an image 5000 pixels wide)": [
            packb({"state": np.full(14, np.nan, np.float32), "images": {"cam_high": np.zeros((3, 8, 8), np.uint8)}}),
            packb({"state": np.zeros(14, np.float32), "images": {"cam_high": np.zeros((3, 1, 5000), np.uint8)}})],
        "1.1 M msgpack values in 1.1 MB (over the object limit)": [b"\xdd" + (1_100_000).to_bytes(4, "big")
                                                                   + b"\xc0" * 1_100_000],
    }
    rows: list[Row] = []
    with OpenpiPolicyServer(EchoPolicy, port=0, frame_timeout_s=FRAME_TIMEOUT_S).start() as server:
        port = server.address[1]
        uri = f"ws://127.0.0.1:{port}"
        for what, messages in requests.items():
            errors = answered = 0
            for message in messages:
                with websockets.sync.client.connect(uri, compression=None, max_size=None, open_timeout=WAIT_S) as ws:
                    ws.recv(timeout=WAIT_S)  # the metadata frame
                    ws.send(message)
                    reply = ws.recv(timeout=WAIT_S)
                    if isinstance(reply, str):
                        try:
                            ws.recv(timeout=WAIT_S)
                        except websockets.exceptions.ConnectionClosed as exc:
                            errors += exc.rcvd is not None and exc.rcvd.code == 1011
                    else:
                        answered += isinstance(unpackb(reply), dict)
            mutated = "changed" in what
            ok = errors + answered == len(messages) and (mutated or errors == len(messages))
            rows.append(Row("hostile inputs", OPENPI, what, len(messages),
                            f"{errors} error frame{'' if errors == 1 else 's'}, each followed by close 1011"
                            + (f"; {answered} still valid and answered" if answered else ""), ok))
        closed = 0
        with websockets.sync.client.connect(uri, compression=None, max_size=None, open_timeout=WAIT_S) as ws:
            ws.recv(timeout=WAIT_S)
            try:
                ws.send(b"\0" * (33 << 20))
                ws.recv(timeout=WAIT_S)
            except websockets.exceptions.ConnectionClosed as exc:
                closed += exc.rcvd is not None and exc.rcvd.code == 1009
        rows.append(Row("hostile inputs", OPENPI, "a 33 MiB message (the limit is 32 MiB)", 1,
                        f"{'closed with 1009 (message too big)' if closed else 'NOT closed with 1009'}", closed == 1))
        tried = sum(r.n for r in rows)
        ok = drained(server) and serves(OPENPI, port)
        rows.append(Row("hostile inputs", OPENPI, "afterwards: still serving, nothing held", tried,
                        f"{'yes' if ok else 'NO'}: a new client served, 0 connections and 0 B of the budget held; "
                        f"server counted {server.stats['errors']} errors", ok))
    return rows


# ------------------------------------------------------------------------------------- report
def render(rows: list[Row], args: argparse.Namespace, load_before: float, elapsed: float) -> str:
    held = sum(r.held for r in rows)
    lines = [f"`bench/reliability.py --clients {args.clients} --calls {args.calls}` — "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}, Python {platform.python_version()}, "
             f"msgpack {msgpack.version[0]}.{msgpack.version[1]}.{msgpack.version[2]}, "
             f"websockets {websockets.__version__}; servers in threads of the bench process, loopback; "
             f"{elapsed:.0f} s in all; load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} "
             f"at the end, on {os.cpu_count()} cores (shared). These are the baseline figures.", "",
             "| area | protocol | what was done | n | outcome | held |", "|---|---|---|---:|---|---|"]
    for r in rows:
        held_text = "yes" if r.held else "**no**"
        lines.append(f"| {r.area} | {r.protocol} | {r.what} | {r.n:,} | {r.outcome} | {held_text} |")
    lines += ["", f"{held} of {len(rows)} checks held. n: requests, clients or connections tried; latencies are "
              "whole `predict` calls seen by the client (openpi's include its resize of three images to 224×224)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients per protocol (load)")
    parser.add_argument("--calls", type=int, default=25, help="predict calls per client (load)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--bounds-only", action="store_true", help="only the server bounds (server_bounds.py)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the servers log every refusal and error reply they make
    bounds_held = bounds(args.no_write)
    if args.bounds_only:
        return 0 if bounds_held else 1
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    rows: list[Row] = []
    for protocol in (TCP, OPENPI):
        rows += load(protocol, args.clients, args.calls)
    for protocol in (TCP, OPENPI):
        rows += faults(protocol)
    rows += hostile_tcp()
    rows += hostile_openpi()
    table = render(rows, args, load_before, time.monotonic() - started)
    print(table)
    if not args.no_write:
        write_section("reliability", table)
    return 0 if all(r.held for r in rows) and bounds_held else 1


def bounds(no_write: bool) -> bool:
    """The server-bounds part: its table, printed and written to its own section; True if every check held."""
    load_before, started = os.getloadavg()[0], time.monotonic()
    rows = server_bounds.run()
    table = "\n".join([
        f"`bench/reliability.py --bounds-only` — {time.strftime('%Y-%m-%d', time.gmtime())}, Python "
        f"{platform.python_version()}; each server in a process of its own (`robofollow serve --policy hold`, "
        f"`python -m robofollow_model_server`), defaults except `--frame-timeout 8`, loopback; "
        f"{time.monotonic() - started:.0f} s in all; load average {load_before:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores (shared).", "",
        *server_bounds.render(rows), "",
        f"{sum(r.held for r in rows)} of {len(rows)} checks held. n: real-client calls made (held sockets), "
        "clients (short-lived, large requests), refused clients (refusals). RSS is the server process's "
        "(`VmRSS` before, `VmHWM` peak, `VmRSS` after); overhead: the peak beyond RSS before plus the 512 MiB "
        f"budget; a large-request row holds only if the overhead is at most the stated {server_bounds.OVERHEAD_MIB} "
        "MiB, every client read an answer and the next client was served (GR00T's row over `ZMQ_MAXMSGSIZE`: "
        "libzmq drops such a peer and the server writes the refusal on the connection it holds). GR00T's requests "
        "are at most its "
        "`ZMQ_MAXMSGSIZE` (the budget ÷ (2 × 64 peers) = 4 MiB) less 64 KiB. Refusal: the client read "
        "`server busy ...` or GR00T's `server dropped the request ...` (an error reply, a text frame or a 503/1013 "
        "with that reason); reply: any other answer "
        "(here the error naming the bad observation)."])
    print(table)
    if not no_write:
        write_section("server-bounds", table)
    return all(r.held for r in rows)


if __name__ == "__main__":
    sys.exit(main())
