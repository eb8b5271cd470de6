"""Hostile messages cost bounded memory (issue 16): measured as the *server process's* peak RSS
(``VmHWM`` in /proc/PID/status) around a 127 MiB JSON of ``[{},{},...]`` (TCP) and a 31 MiB
msgpack of empty maps (openpi). Parsed naively each would become tens of millions of dicts
(gigabytes); the servers refuse both with an error naming the bound and keep serving."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from websockets.sync.client import connect

from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.wire.openpi.codec import unpackb
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame

pytestmark = pytest.mark.timeout(300)
GIB = 1 << 30
MIB = 1 << 20


def peak_rss(pid: int) -> int:
    """Peak resident set size of a process in bytes (Linux ``VmHWM``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM line in /proc/PID/status")


@contextmanager
def server(*args: str) -> Iterator[tuple[int, int]]:
    proc = subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "serve", "--port", "0", "--policy", "hold",
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield proc.pid, int(line.rsplit(":", 1)[1])
    finally:
        proc.kill()
        proc.wait(30)


def test_a_127_mib_json_of_empty_objects_is_refused_with_bounded_memory() -> None:
    count = (127 * MIB - 2) // 3
    body = b"[" + b"{}," * (count - 1) + b"{}]"
    assert 126 * MIB < len(body) < 128 * MIB
    with server() as (pid, port):
        client = RoboFollowTcpPolicy("127.0.0.1", port, timeout_s=120)
        client.reset()  # the server is warm: its baseline includes a served request
        before = peak_rss(pid)
        with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
            send_frame(sock, body)
            reply = recv_frame(sock, 120, 120)
            assert reply is not None and b"objects/arrays" in reply and b"1,000,000" in reply
            send_frame(sock, b'{"cmd": "reset", "obs": null}')  # the stream is still in step
            assert recv_frame(sock, 120, 120) == b'{"res": null}'
        del body
        assert client.predict(make_observation()).shape == (5, 14)  # still serving
        client.close()
        after = peak_rss(pid)
    assert after < 1 * GIB
    assert after - before < 64 * MIB, f"peak RSS grew by {(after - before) / MIB:.0f} MiB"


def test_a_31_mib_msgpack_of_empty_maps_is_refused_with_bounded_memory() -> None:
    maps = 31 * MIB
    message = b"\xdd" + maps.to_bytes(4, "big") + b"\x80" * maps  # array32 of empty fixmaps
    with server("--protocol", "openpi") as (pid, port):
        before = peak_rss(pid)
        with connect(f"ws://127.0.0.1:{port}", compression=None, max_size=None, open_timeout=60) as ws:
            unpackb(ws.recv(timeout=60))  # metadata
            ws.send(message)
            error = ws.recv(timeout=120)
        assert isinstance(error, str) and "more than 1,000,000 msgpack objects" in error
        after = peak_rss(pid)
    assert after < 1 * GIB
    # The 31 MiB message itself is held while it is checked; nothing in proportion to its objects.
    assert after - before < 128 * MIB, f"peak RSS grew by {(after - before) / MIB:.0f} MiB"
