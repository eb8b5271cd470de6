"""Issue 36's attacks on every protocol's server, each server in a process of its own (so its RSS is its own).

For each protocol (RoboFollow TCP, openpi, vla-eval, act, GR00T's ZMQ via ``robofollow serve``; the model
server's TCP and openpi via ``python -m robofollow_model_server``), a fresh server with the defaults (64
connections, 8 for the model server; a 512 MiB memory budget) except an 8 s frame timeout, then:

- **silent**: as many sockets as the server has slots, connected (websocket: through the handshake) and never
  sending (GR00T: raw TCP sockets that never start ZMTP's greeting); then a real client's reset + predict:
  served, and how long it took;
- **trickle**: the same sockets each having sent a request's first bytes and stopped (GR00T: the first bytes of
  ZMTP's greeting);
- **short-lived**: 70 clients one after another, each connecting, calling, closing; then a real client;
- **64 × 32 MiB**: 64 raw clients at once each sending a 31.9 MiB request (what the protocol accepts at
  most; GR00T: its ``ZMQ_MAXMSGSIZE``, which the budget sets, less 64 KiB, and then 31.9 MiB, which libzmq
  drops and the server refuses on the connection it holds); the server's peak RSS over its RSS before
  (``VmHWM``), against the budget: held only if the peak is within RSS before + the 512 MiB budget +
  :data:`OVERHEAD_MIB`, and every client read an answer (a reply, or the refusal naming the cause), none a reset;
- **refusals delivered**: of the clients of the row above that were refused, how many read the refusal.

Run by ``bench/reliability.py`` (``--bounds-only`` runs only this part).
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import websockets.exceptions
import websockets.sync.client
import zmq

from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.budget import DEFAULT_MAX_PENDING_BYTES
from robofollow_ros.policy.wire.gr00t.codec import GR00T_MAX_MESSAGE_BYTES
from robofollow_ros.policy.wire.gr00t.server import zmq_message_limit

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
BIG = 32 * MIB - 64 * 1024  # under every protocol's 32 MiB message limit with its framing
FRAME_TIMEOUT_S = 8.0
BUDGET_MIB = DEFAULT_MAX_PENDING_BYTES // MIB
#: The stated overhead: a server's peak RSS may exceed its RSS before plus the budget by this much (the
#: interpreter's and libraries' transient copies that no charge anticipates); beyond it, not held.
OVERHEAD_MIB = 64
#: What GR00T's libzmq accepts per message at the defaults (64 peers, the 512 MiB budget), less the framing.
GR00T_BIG = zmq_message_limit(GR00T_MAX_MESSAGE_BYTES, DEFAULT_MAX_PENDING_BYTES, 64) - 64 * 1024
HANDSHAKE = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
OBS = make_observation(seed=0)


@dataclass(frozen=True)
class Protocol:
    name: str
    command: list[str]
    scheme: str  # the real client's SPEC scheme
    kind: str  # tcp | websocket | http | zmq
    slots: int


def _serve(protocol: str) -> list[str]:
    return [sys.executable, "-m", "robofollow_ros.cli", "serve", "--policy", "hold", "--protocol", protocol,
            "--port", "0", "--frame-timeout", str(FRAME_TIMEOUT_S)]


def _model(protocol: str) -> list[str]:
    return [sys.executable, "-m", "robofollow_model_server", "--policy",
            "robofollow_ros.policy.baselines.hold:HoldPolicy", "--protocol", protocol, "--port", "0",
            "--frame-timeout", str(FRAME_TIMEOUT_S)]


PROTOCOLS = [Protocol("RoboFollow TCP", _serve("robofollow"), "tcp", "tcp", 64),
             Protocol("openpi", _serve("openpi"), "openpi", "websocket", 64),
             Protocol("vla-eval", _serve("vla-eval"), "vla-eval", "websocket", 64),
             Protocol("act", _serve("act"), "act+http", "http", 64),
             Protocol("GR00T", _serve("gr00t"), "gr00t", "zmq", 64),
             Protocol("model server TCP", _model("robofollow"), "tcp", "tcp", 8),
             Protocol("model server openpi", _model("openpi"), "openpi", "websocket", 8)]


@dataclass
class BoundRow:
    protocol: str
    case: str
    n: int
    outcome: str
    held: bool


@contextmanager
def server_process(protocol: Protocol) -> Iterator[tuple[subprocess.Popen[str], int]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "model_server"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(protocol.command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"Policy server: .*:(\d+)", line)
        if not match:
            raise RuntimeError(f"{protocol.name}: no 'Policy server' line, got {line!r}")
        yield proc, int(match.group(1))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", text).group(1)) / 1024  # type: ignore[union-attr]


def real_call(protocol: Protocol, port: int) -> str:
    try:
        options: dict[str, Any] = ({"timeout_s": 20} if protocol.kind in ("http", "zmq") else
                                   {"timeout_s": 20, "connect_attempts": 1})
        client = load_policy(f"{protocol.scheme}://127.0.0.1:{port}", options)
    except Exception as exc:
        return str(exc).splitlines()[0]
    try:
        client.reset()
        client.set_instruction("stack the blocks")
        return "ok" if client.predict(OBS).shape[1] == 14 else "bad shape"
    except Exception as exc:
        return (str(exc).splitlines() or [type(exc).__name__])[0]
    finally:
        client.close()


def served_within(protocol: Protocol, port: int, limit_s: float = FRAME_TIMEOUT_S) -> tuple[bool, float, int]:
    """(served, seconds it took, calls made): a real client retrying until served or ``limit_s`` passed."""
    start, calls = time.monotonic(), 0
    while True:
        calls += 1
        if real_call(protocol, port) == "ok":
            return True, time.monotonic() - start, calls
        if time.monotonic() - start > limit_s:
            return False, time.monotonic() - start, calls


def _open(protocol: Protocol, port: int, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    if protocol.kind == "websocket":
        sock.sendall(HANDSHAKE)
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(4096)):
            reply += chunk
    if first:
        sock.sendall(first)
    return sock


FIRST_BYTES = {"tcp": b"\x00\x00", "websocket": b"\x82", "http": b"POST /a", "zmq": b"\xff\x00\x00"}


def held_case(protocol: Protocol, case: str) -> BoundRow:
    with server_process(protocol) as (_, port), ExitStack() as stack:
        first = b"" if case == "silent" else FIRST_BYTES[protocol.kind]
        for _ in range(protocol.slots):
            stack.enter_context(_open(protocol, port, first))
        time.sleep(1.5)  # the attacker's pace: silent, or trickling, past the 1 s grace a fresh connection gets
        ok, took, calls = served_within(protocol, port)
        return BoundRow(protocol.name, f"{protocol.slots} {case} sockets", calls,
                        f"real client served after {took:.2f} s ({calls} call(s))" if ok else
                        f"real client NOT served within {FRAME_TIMEOUT_S:g} s ({calls} calls)", ok)


def short_lived_case(protocol: Protocol) -> BoundRow:
    with server_process(protocol) as (_, port):
        outcomes = [real_call(protocol, port) for _ in range(70)]
        ok, took, _ = served_within(protocol, port)
        good = outcomes.count("ok")
        return BoundRow(protocol.name, "70 short-lived clients", 71,
                        f"{good}/70 served; the next one {'served' if ok else 'NOT served'} ({took:.2f} s)",
                        good == 70 and ok)


def _big_request(protocol: Protocol, size: int = BIG, wait_s: float = 60) -> Callable[[int], str]:
    """One raw client sending a ``size``-byte request; what it read back: "reply", "refusal", "reset" or "none"
    (nothing within ``wait_s``; GR00T)."""
    pad = b"x" * size
    if protocol.kind == "tcp":
        body = b'{"cmd": "predict", "obs": {"pad": "' + pad + b'"}}'
        data = struct.pack(">I", len(body)) + body
    elif protocol.kind == "http":
        body = b'{"state": [0,0,0,0,0,0,0,0,0,0,0,0,0,0], "pad": "' + pad + b'"}'
        data = (b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    elif protocol.kind == "zmq":
        message = msgpack.packb({"endpoint": "get_action", "data": {"observation": {"pad": pad}}},
                                use_bin_type=True)
    else:
        message = msgpack.packb({"type": "observation", "payload": {"pad": pad}, "seq": 1,
                                 "state": [0.0] * 14, "images": {}}, use_bin_type=True)

    def tcp_like(port: int) -> str:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                sock.sendall(data)
                got = sock.recv(65536)
                return _classify(got)
        except (ConnectionResetError, BrokenPipeError):
            return "reset"
        except OSError as exc:
            return f"error {type(exc).__name__}"

    def websocket(port: int) -> str:
        try:
            with websockets.sync.client.connect(f"ws://127.0.0.1:{port}", max_size=None, open_timeout=60,
                                                compression=None) as ws:
                if protocol.name.endswith("openpi"):
                    ws.recv(timeout=60)  # the metadata frame
                ws.send(message)
                reply = ws.recv(timeout=60)
                text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
                return "refusal" if "server busy" in text else "reply"
        except websockets.exceptions.ConnectionClosed as exc:
            reason = exc.rcvd.reason if exc.rcvd else ""
            return "refusal" if "server busy" in reason else "reset" if exc.rcvd is None else "reply"
        except OSError as exc:
            return f"error {type(exc).__name__}"

    def gr00t(port: int) -> str:
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, int(1000 * wait_s))
        try:
            sock.connect(f"tcp://127.0.0.1:{port}")
            sock.send(message)
            reply = sock.recv()
            text = reply.decode("utf-8", "replace")
            return "refusal" if "server busy" in text or "server dropped" in text else "reply"
        except zmq.Again:
            return "none"
        except zmq.ZMQError as exc:
            return f"error {type(exc).__name__}"
        finally:
            sock.close()

    return websocket if protocol.kind == "websocket" else gr00t if protocol.kind == "zmq" else tcp_like


def _classify(got: bytes) -> str:
    if not got:
        return "none"
    return "refusal" if b"server busy" in got else "reply"


def memory_case(protocol: Protocol, clients: int = 64, size: int = BIG, dropped: bool = False) -> list[BoundRow]:
    """``clients`` requests of ``size`` bytes at once; ``dropped``: the protocol drops them unanswered (GR00T's
    libzmq past ``ZMQ_MAXMSGSIZE``), only the RSS bound is checked."""
    with server_process(protocol) as (proc, port):
        real_call(protocol, port)  # warm: the policy built, one request served
        before = rss_mib(proc.pid)
        send = _big_request(protocol, size, 30 if dropped else 60)
        results: list[str] = [""] * clients
        barrier = threading.Barrier(clients, timeout=120)

        def client(i: int) -> None:
            barrier.wait()
            results[i] = send(port)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        peak, after = rss_mib(proc.pid, "VmHWM"), rss_mib(proc.pid)
        ok, _, _ = served_within(protocol, port)
        over = peak - before - BUDGET_MIB
        within = over <= OVERHEAD_MIB
        counts = {k: results.count(k) for k in sorted(set(results))}
        answered = results.count("reply") + results.count("refusal")
        refused = results.count("refusal")
        bound = (f"RSS {before:.0f} → peak {peak:.0f} MiB (+{peak - before:.0f}; budget {BUDGET_MIB}, "
                 f"{'overhead ' + format(over, '.0f') + ' MiB' if over > 0 else 'within'}"
                 f"{'' if within else f', past the stated {OVERHEAD_MIB} MiB'}), {after:.0f} after")
        case = f"{clients} × {size / MIB:.1f} MiB"
        if dropped:
            return [BoundRow(protocol.name, case + " (over ZMQ_MAXMSGSIZE)", clients,
                             f"{bound}; {json.dumps(counts)} (libzmq drops them, the server writes the refusal); "
                             f"next client {'served' if ok else 'NOT served'}", ok and within and refused == clients)]
        return [BoundRow(protocol.name, case, clients,
                         f"{bound}; {json.dumps(counts)}; next client {'served' if ok else 'NOT served'}",
                         ok and within and answered == clients),
                BoundRow(protocol.name, "refusals delivered", refused,
                         f"{refused} refused read the refusal; {clients - answered} got no answer",
                         answered == clients)]


def run(only: set[str] | None = None) -> list[BoundRow]:
    rows: list[BoundRow] = []
    for protocol in PROTOCOLS:
        if only and protocol.name not in only:
            continue
        for case in ("silent", "trickle"):
            rows.append(held_case(protocol, case))
            print(rows[-1], flush=True)
        rows.append(short_lived_case(protocol))
        print(rows[-1], flush=True)
        if protocol.kind == "zmq":
            rows.extend(memory_case(protocol, size=GR00T_BIG))
            rows.extend(memory_case(protocol, dropped=True))
            print(*rows[-3:], sep="\n", flush=True)
        else:
            rows.extend(memory_case(protocol))
            print(rows[-2], rows[-1], sep="\n", flush=True)
    return rows


def render(rows: list[BoundRow]) -> list[str]:
    lines = ["| protocol | case | n | outcome | held |", "|---|---|---|---|---|"]
    lines += [f"| {r.protocol} | {r.case} | {r.n} | {r.outcome} | {'yes' if r.held else '**no**'} |" for r in rows]
    return lines


if __name__ == "__main__":
    result = run(set(sys.argv[1:]) or None)
    print("\n".join(render(result)))
    sys.exit(0 if all(r.held for r in result) else 1)
