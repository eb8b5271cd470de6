"""The model server's memory budget (issue 36 item 7: it had none; 8 × 120 MiB took it to 2.17 GiB) and the heap
setting every server makes so that RSS follows its budget, on real loopback sockets. RSS itself is measured by
``bench/server_bounds.py`` (docs/benchmarks.md), never asserted here."""

from __future__ import annotations

import json
import socket
import struct
import sys
from pathlib import Path

import msgpack
import pytest
import websockets.exceptions
import websockets.sync.client

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.wire.heap import bound_heap
from robofollow_ros.policy.wire.vlaeval.server import VlaEvalPolicyServer
from waiting import poll_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model_server"))
from robofollow_model_server import bounds
from robofollow_model_server.openpi import OpenpiServer
from robofollow_model_server.serving import PolicyHost
from robofollow_model_server.tcp import TcpServer

pytestmark = pytest.mark.timeout(60)
MIB = 1 << 20


def call(sock: socket.socket, request: dict) -> dict:
    body = json.dumps(request).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)
    head = sock.recv(4, socket.MSG_WAITALL)
    (length,) = struct.unpack(">I", head)
    reply: dict = json.loads(sock.recv(length, socket.MSG_WAITALL))
    return reply


def test_a_tcp_request_over_the_model_servers_budget_is_refused_and_the_connection_stays_in_step() -> None:
    server = TcpServer(PolicyHost(HoldPolicy(5)), port=0, max_pending_bytes=MIB, budget_wait_s=0.2).start()
    try:
        with socket.create_connection(server.address, timeout=20) as sock:
            refused = call(sock, {"cmd": "predict", "obs": {"pad": "x" * (2 * MIB)}})
            assert "server busy" in refused["error"] and "memory budget" in refused["error"], refused
            assert call(sock, {"cmd": "reset", "obs": None}) == {"res": None}  # the next frame is read in step
        assert server.memory.used == 0 and server.memory.refusals >= 1
    finally:
        server.stop(10)


def test_an_openpi_message_over_the_model_servers_budget_gets_the_refusal_then_1013() -> None:
    server = OpenpiServer(PolicyHost(HoldPolicy(5)), port=0, max_pending_bytes=MIB, budget_wait_s=0.2).start()
    try:
        with websockets.sync.client.connect(f"ws://127.0.0.1:{server.address[1]}", max_size=None) as ws:
            ws.recv(timeout=20)  # the metadata frame
            ws.send(msgpack.packb({"pad": b"x" * (MIB // 2)}))
            text = ws.recv(timeout=20)
            assert isinstance(text, str) and "server busy" in text and "memory budget" in text, text
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv(timeout=20)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        assert server.memory.used == 0
    finally:
        server.stop(10)


def test_the_oldest_request_goes_on_while_a_younger_one_that_does_not_fit_gives_way() -> None:
    """Charged as bytes arrive, two requests holding half the budget each could wait for each other until both
    were refused; the younger one is refused at once instead, and the oldest gets its room."""
    budget = bounds.MemoryBudget(4 * MIB, wait_s=5)
    old, young = object(), object()
    budget.charge(old, 2 * MIB)
    budget.charge(young, 2 * MIB)
    budget._oldest_waiting = True  # the oldest is waiting for room (as another thread would be)
    with pytest.raises(bounds.MemoryBudgetError, match="memory budget"):
        budget.charge(young, MIB)
    assert budget.used == 2 * MIB  # the younger one let go of everything
    budget._oldest_waiting = False
    budget.charge(old, 2 * MIB)
    assert budget.used == budget.peak == 4 * MIB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_every_server_fixes_glibcs_mmap_threshold() -> None:
    assert bound_heap() and bounds.bound_heap()


def test_a_vlaeval_message_is_charged_as_it_arrives_and_refused_with_an_error_message_then_1013() -> None:
    """Issue 36: vla-eval charged a message only once the websocket library had assembled it (64 × 32 MiB went
    385 MiB past the budget). Now the library's reads are charged as they arrive: a 2 MiB message on a 1 MiB
    budget is refused while it arrives, the client reads vla-eval's ``error`` and the 1013 close."""
    server = VlaEvalPolicyServer(lambda: HoldPolicy(5), port=0, max_pending_bytes=MIB, budget_wait_s=0.2).start()
    try:
        with websockets.sync.client.connect(f"ws://127.0.0.1:{server.address[1]}", max_size=None) as ws:
            ws.send(msgpack.packb({"type": "observation", "payload": {"pad": b"x" * (2 * MIB)}, "seq": 7}))
            error = msgpack.unpackb(ws.recv(timeout=20))
            assert error["type"] == "error" and "memory budget" in error["payload"]["error"], error
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                ws.recv(timeout=20)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        assert poll_until(lambda: server.memory.used == 0, 10)
        assert MIB // 2 < server.memory.peak <= MIB  # its bytes were charged as they came, up to the budget
    finally:
        server.stop(10)
