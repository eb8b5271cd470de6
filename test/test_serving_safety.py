"""Servers one client cannot stall (issue 23, item 5): memory budgeted as bytes arrive (TCP) and
across connections (openpi), refusals that always arrive before the close, a timed-out session that
does not poison the next trial, and observations validated against the contract before any policy
sees them.

Real loopback sockets and real servers in threads; openpi-client (PyPI) is the independent openpi
peer. Memory is asserted on the servers' own accounting (``server.memory``) with small budgets
configured for the test, never by allocating GiBs.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import websockets.exceptions
import websockets.sync.client
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from websockets.exceptions import ConnectionClosed

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.drills.echo import EchoPolicy
from robofollow_ros.policy.drills.scripted import RecordingPolicy, make_observation
from robofollow_ros.policy.guard import TimeoutGuardedPolicy
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.codec import packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy
from robofollow_ros.policy.wire.robofollow.codec import MAX_FRAME_BYTES, decode_message, encode_message
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.policy.wire.sessions import PolicySessions
from robofollow_ros.policy.wire.websocket_meter import LIBRARY_COPIES
from waiting import poll_until

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning"),
]
MIB = 1 << 20
OBS = make_observation(seed=5, width=32, height=24)


def tcp_client(server: RoboFollowTcpServer, timeout_s: float = 30.0) -> RoboFollowTcpPolicy:
    return RoboFollowTcpPolicy("127.0.0.1", server.address[1], timeout_s=timeout_s, connect_attempts=3,
                               connect_interval_s=0.05)


def raw_request(sock: socket.socket, message: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
    send_frame(sock, encode_message(message))
    reply = recv_frame(sock, timeout_s, timeout_s)
    assert reply is not None, "the server closed the connection without a reply"
    return decode_message(reply)


def run_all(count: int, body: Callable[[int], Any]) -> list[Any]:
    """``body(i)`` in ``count`` threads started together; every result or exception, in order."""
    results: list[Any] = [None] * count
    start = threading.Barrier(count, timeout=60)

    def target(i: int) -> None:
        try:
            start.wait()
            results[i] = body(i)
        except BaseException as exc:  # the test inspects it
            results[i] = exc

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    return results


@contextmanager
def announcers(address: tuple[str, int], count: int, deliver: bytes = b"{") -> Iterator[list[socket.socket]]:
    """``count`` connections that each announce a 128 MiB frame, send ``deliver``, then say nothing."""
    socks = [socket.create_connection(address, timeout=30) for _ in range(count)]
    try:
        for sock in socks:
            sock.sendall(struct.pack(">I", MAX_FRAME_BYTES) + deliver)
        yield socks
    finally:
        for sock in socks:
            sock.close()


# ------------------------------------------------------------------------ 1. TCP memory as bytes arrive
@pytest.mark.exclusive  # a 2 s bound on a waiting client: run alone (make test)
def test_slow_announcers_of_128_mib_hold_no_budget_and_stall_no_one() -> None:
    """The measured defect: four 5-byte headers announcing 128 MiB reserved the whole 512 MiB
    budget and every other client waited for the frame deadline (60 s by default)."""
    with RoboFollowTcpServer(EchoPolicy, port=0, frame_timeout_s=30).start() as server, \
            announcers(server.address, 6):
        assert poll_until(lambda: server.open_connections == 6, 30)
        assert poll_until(lambda: server.memory.holds == 6, 30)
        client = tcp_client(server)
        started = time.monotonic()
        client.reset()
        assert client.predict(OBS).shape == (2, ACTION_DIM)
        elapsed = time.monotonic() - started
        client.close()
        assert elapsed < 2.0, f"a well-behaved client waited {elapsed:.1f} s behind idle announcers"
        # Six announcers of 128 MiB hold the one byte each delivered, not 768 MiB.
        assert server.memory.peak < MIB
        assert server.memory.peak <= server.memory.capacity
    assert server.memory.used == 0


@pytest.mark.exclusive  # a 2 s bound on an ordinary request: run alone (make test)
def test_delivered_but_stalled_large_frames_cannot_crowd_out_ordinary_requests() -> None:
    """Peers that deliver megabytes of 128 MiB frames and stall hold what they delivered, within the
    budget's share for large frames; an ordinary request still finds room at once."""
    budget = 24 * MIB
    with RoboFollowTcpServer(EchoPolicy, port=0, frame_timeout_s=30, max_pending_bytes=budget,
                             budget_wait_s=0.5).start() as server:
        large_share = server.memory.capacity - server.memory.reserve
        with announcers(server.address, 5, deliver=b" " * (6 * MIB)):  # 6 MiB each, 30 MiB in all
            assert poll_until(lambda: server.memory.large_used >= large_share - 6 * MIB, 30)
            client = tcp_client(server)
            started = time.monotonic()
            client.reset()
            assert client.predict(OBS).shape == (2, ACTION_DIM)
            elapsed = time.monotonic() - started
            client.close()
            assert elapsed < 2.0, f"an ordinary request waited {elapsed:.1f} s behind stalled large frames"
            assert poll_until(lambda: server.memory.refusals >= 1, 30)
            assert server.memory.peak <= budget
            assert server.memory.large_peak <= large_share
    assert server.memory.used == 0


# ------------------------------------------------------------------------ 2. openpi: one bound for all
class GatedPolicy(EchoPolicy):
    """Echo whose ``predict`` waits (bounded) until the gate opens, so requests pile up in the server."""

    gate = threading.Event()

    def predict(self, obs: Observation) -> np.ndarray:
        self.gate.wait(60)
        return super().predict(obs)


def test_concurrent_large_openpi_requests_stay_within_one_memory_bound() -> None:
    GatedPolicy.gate = threading.Event()
    big = make_observation(seed=1, width=700, height=600)  # about 3.8 MB per request at full size
    request = packb({"state": np.asarray(big["joint_action"]["vector"], np.float32),
                     "images": {"cam_high": np.ascontiguousarray(big["observation"]["head_camera"]["rgb"]
                                                                  .transpose(2, 0, 1)),
                                "cam_left_wrist": np.ascontiguousarray(big["observation"]["left_camera"]["rgb"]
                                                                       .transpose(2, 0, 1)),
                                "cam_right_wrist": np.ascontiguousarray(big["observation"]["right_camera"]["rgb"]
                                                                        .transpose(2, 0, 1))},
                     "prompt": "stack"})
    assert 3 * MIB < len(request) < 4 * MIB
    budget = 24 * MIB
    clients = 12

    def client(i: int) -> str:
        with websockets.sync.client.connect(uri, compression=None, max_size=None, open_timeout=60) as ws:
            unpackb(ws.recv(timeout=60))
            ws.send(request)
            reply = ws.recv(timeout=90)
            if isinstance(reply, str):
                return reply
            return "actions" if unpackb(reply)["actions"].shape == (2, ACTION_DIM) else "bad"

    with OpenpiPolicyServer(GatedPolicy, port=0, max_pending_bytes=budget, budget_wait_s=0.5).start() as server:
        uri = f"ws://127.0.0.1:{server.address[1]}"
        opener = threading.Timer(0, lambda: (poll_until(lambda: server.memory.refusals >= 1, 60),
                                             GatedPolicy.gate.set()))
        opener.start()
        outcomes = run_all(clients, client)
        opener.join(60)
        assert server.memory.peak <= budget, f"{server.memory.peak / MIB:.1f} MiB held, over the budget"
        assert server.memory.peak > 2 * len(request)  # the accounting saw the requests pile up
        # refused while its message arrived (the text frame), or at its handshake (1013 and the reason alone)
        refused = [str(o) for o in outcomes if (isinstance(o, str) or (isinstance(o, ConnectionClosed) and o.rcvd
                                                and o.rcvd.code == 1013)) and "server busy" in str(o)]
        assert refused and all("memory" in o for o in refused), outcomes
        assert outcomes.count("actions") >= 1, outcomes  # the oldest request always finishes (budget.py)
        assert len(refused) + outcomes.count("actions") == clients, outcomes
        assert poll_until(lambda: server.open_connections == 0, 30)
        assert poll_until(lambda: server.memory.used == 0, 30), server.memory.used


def test_an_openpi_message_of_a_million_empty_maps_is_charged_for_what_it_decodes_to() -> None:
    """0.9 MB of empty maps (within the per-message object limit) decodes to 900,000 dicts (~100 MB):
    the budget refuses it by name before unpacking (measured before: 64 such clients reached 3.17 GiB)."""
    maps = 900_000
    message = b"\xdd" + maps.to_bytes(4, "big") + b"\x80" * maps
    with OpenpiPolicyServer(EchoPolicy, port=0, max_pending_bytes=64 * MIB, budget_wait_s=0.2).start() as server:
        with websockets.sync.client.connect(f"ws://127.0.0.1:{server.address[1]}", compression=None,
                                            open_timeout=60) as ws:
            ws.recv(timeout=30)
            ws.send(message)
            error = ws.recv(timeout=30)
            assert isinstance(error, str) and "server busy" in error and "memory" in error, error
            with pytest.raises(websockets.exceptions.ConnectionClosedError) as closed:
                ws.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        assert server.memory.peak <= 64 * MIB
        assert poll_until(lambda: server.memory.used == 0, 30)
        assert WebsocketClientPolicy("127.0.0.1", server.address[1]).infer(
            to_openpi_observation(OBS, "x"))["actions"].shape == (2, ACTION_DIM)


def test_an_openpi_connection_that_finds_the_budget_full_is_refused_with_1013_and_a_reason() -> None:
    """A peer holds almost all of a 2 MiB budget with half a message; the next connection's
    handshake finds no room: openpi-client reads 1013 and the reason, and the server still serves."""
    budget = 2 * MIB
    with OpenpiPolicyServer(EchoPolicy, port=0, max_pending_bytes=budget, budget_wait_s=0.2).start() as server:
        with socket.create_connection(server.address, timeout=30) as staller:
            staller.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            assert staller.recv(12) == b"HTTP/1.1 101"
            held = budget // LIBRARY_COPIES - 20  # part of a 3 MiB message, charged twice; the handshake was released
            header = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", 3 * MIB) + b"\x00" * 4  # masked, zero mask
            staller.sendall(header + b"\x00" * (held - len(header)))
            assert poll_until(lambda: server.memory.used == LIBRARY_COPIES * held, 30), server.memory.used
            with pytest.raises(Exception, match="server busy: memory budget full") as info:
                WebsocketClientPolicy("127.0.0.1", server.address[1])
            assert "1013" in str(info.value)
            assert server.memory.peak <= budget
        assert poll_until(lambda: server.memory.used == 0, 30)
        assert WebsocketClientPolicy("127.0.0.1", server.address[1]).infer(
            to_openpi_observation(OBS, "x"))["actions"].shape == (2, ACTION_DIM)


# ------------------------------------------------------------------------ 3. refusals always arrive
def test_every_tcp_client_of_a_burst_over_the_cap_reads_the_refusal() -> None:
    """50 connections at once against a cap of 4, each kept open like a reference client keeps its
    socket: every one reads the framed refusal, none a reset or a bare close."""
    burst = 50
    with RoboFollowTcpServer(EchoPolicy, port=0, max_connections=4).start() as server:
        held = [tcp_client(server) for _ in range(4)]
        for client in held:
            client.reset()
        socks = [socket.create_connection(server.address, timeout=60) for _ in range(burst)]
        everyone_read = threading.Barrier(burst, timeout=120)

        def connect(i: int) -> str:
            try:
                return str(raw_request(socks[i], {"cmd": "reset", "obs": None}, 60).get("error"))
            finally:
                everyone_read.wait()  # nobody hangs up before every client has its answer

        try:
            outcomes = run_all(burst, connect)
        finally:
            for sock in socks:
                sock.close()
        for client in held:
            client.close()
    failures = [o for o in outcomes if not (isinstance(o, str) and "server busy: 4 connections are open" in o)]
    assert failures == [], f"{len(failures)} of {burst} refused clients got no refusal: {failures[:3]}"
    assert server.stats["refused"] == burst


def test_every_openpi_client_of_a_burst_over_the_cap_reads_the_refusal() -> None:
    burst = 50
    with OpenpiPolicyServer(EchoPolicy, port=0, max_connections=4).start() as server:
        uri = f"ws://127.0.0.1:{server.address[1]}"
        held = [WebsocketClientPolicy("127.0.0.1", server.address[1]) for _ in range(4)]
        everyone_read = threading.Barrier(burst, timeout=120)

        def connect(i: int) -> str:
            try:
                with websockets.sync.client.connect(uri, compression=None, open_timeout=60) as ws:
                    try:
                        ws.recv(timeout=60)
                    except websockets.exceptions.ConnectionClosed as exc:
                        rcvd = exc.rcvd
                        return f"{rcvd.code} {rcvd.reason}" if rcvd is not None else f"no close frame: {exc!r}"
                    return "admitted"
            finally:
                everyone_read.wait()

        outcomes = run_all(burst, connect)
        for client in held:
            client._ws.close()
    failures = [o for o in outcomes if not (isinstance(o, str) and o.startswith("1013 server busy: 4 connections"))]
    assert failures == [], f"{len(failures)} of {burst} refused clients got no refusal: {failures[:3]}"
    assert server.stats["refused"] == burst


# ------------------------------------------------------------------------ 4. a timed-out session is reset
class StallOnce:
    """Echo whose very first predict (over all instances sharing ``state``) stalls until released."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.inner = EchoPolicy()
        self.state = state

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


def stall_state() -> dict[str, Any]:
    return {"lock": threading.Lock(), "stalled": False, "release": threading.Event()}


def trial(policy: Any, instruction: str) -> np.ndarray:
    policy.reset()
    policy.set_instruction(instruction)
    return policy.predict(OBS)


def test_after_a_server_side_timeout_the_next_trial_on_the_connection_starts_clean() -> None:
    """The measured defect: every later trial on the connection failed with PolicyBusyError."""
    states = [stall_state(), stall_state()]
    try:
        # The server drops the stuck session: the same raw connection's next trial is served.
        sessions = PolicySessions(factory=lambda: TimeoutGuardedPolicy(StallOnce(states[0]), timeout_s=0.3))
        with RoboFollowTcpServer(sessions, port=0).start() as server, \
                socket.create_connection(server.address, timeout=30) as sock:
            assert raw_request(sock, {"cmd": "reset", "obs": None}) == {"res": None}
            timed_out = raw_request(sock, {"cmd": "predict", "obs": _obs()})
            assert "no answer within 0.3 s" in timed_out["error"], timed_out
            for _ in range(2):
                assert raw_request(sock, {"cmd": "reset", "obs": None}) == {"res": None}
                assert raw_request(sock, {"cmd": "predict", "obs": _obs()})["res"][0, 1] == 1.0  # a fresh episode
            assert server.sessions.built == 2  # the stuck policy was replaced, not reused
            states[0]["release"].set()
        # Our client also starts afresh on its own (a server that keeps stuck sessions cannot hold it).
        sessions = PolicySessions(factory=lambda: TimeoutGuardedPolicy(StallOnce(states[1]), timeout_s=0.3))
        with RoboFollowTcpServer(sessions, port=0).start() as server:
            client = tcp_client(server)
            with pytest.raises(RemotePolicyError, match=r"no answer within 0\.3 s"):
                trial(client, "first")
            for n in range(3):
                rows = trial(client, f"trial {n}")
                assert rows[0, 1] == 1.0  # step 1 of a fresh episode
            assert client.connections_opened == 2
            client.close()
            states[1]["release"].set()
    finally:
        for state in states:
            state["release"].set()


def test_after_a_client_side_timeout_the_next_trial_starts_clean_on_both_protocols() -> None:
    """The client's own ``timeout_s`` fires while the server's policy still stalls: the client drops the
    connection, and the next trial gets a fresh connection and session while the stalled one runs on."""
    states = [stall_state(), stall_state()]
    try:
        with RoboFollowTcpServer(lambda: TimeoutGuardedPolicy(StallOnce(states[0]), 60), port=0).start() as tcp:
            client = tcp_client(tcp, timeout_s=0.5)
            with pytest.raises(ConnectionError, match="predict failed"):
                trial(client, "first")
            for n in range(2):
                assert trial(client, f"trial {n}")[0, 1] == 1.0
            client.close()
            states[0]["release"].set()
        with OpenpiPolicyServer(lambda: TimeoutGuardedPolicy(StallOnce(states[1]), 60), port=0).start() as ws:
            remote = OpenpiWebsocketPolicy("127.0.0.1", ws.address[1], timeout_s=0.5, connect_attempts=2)
            with pytest.raises(ConnectionError, match="predict failed"):
                trial(remote, "first")
            for n in range(2):
                assert trial(remote, f"trial {n}")[0, 1] == 1.0
            remote.close()
            states[1]["release"].set()
    finally:
        for state in states:
            state["release"].set()


# ------------------------------------------------------------------------ 5. the observation contract
def _obs(**changes: Any) -> dict[str, Any]:
    obs: dict[str, Any] = {"observation": {k: {"rgb": v["rgb"]} for k, v in OBS["observation"].items()},
                           "joint_action": {"vector": np.asarray(OBS["joint_action"]["vector"])},
                           "instruction": "stack"}
    for path, value in changes.items():
        node = obs
        *parents, leaf = path.split("__")
        for key in parents:
            node = node[key]
        if value is KeyError:
            del node[leaf]
        else:
            node[leaf] = value
    return obs


BAD_OBSERVATIONS = [
    pytest.param(_obs(joint_action__vector=np.zeros(13)), r"joint_action\.vector: .*13 values", id="13-values"),
    pytest.param(_obs(joint_action__vector=np.zeros(10_000)), r"joint_action\.vector: .*10000 values",
                 id="10000-values"),
    pytest.param(_obs(joint_action__vector=np.zeros((2, 7))), r"joint_action\.vector: .*shape \(2, 7\)", id="2-D"),
    pytest.param(_obs(joint_action__vector=np.full(14, np.nan)), r"joint_action\.vector: .*nan", id="nan"),
    pytest.param(_obs(joint_action__vector=np.arange(14)), r"joint_action\.vector: .*int64", id="int-vector"),
    pytest.param(_obs(joint_action=KeyError), r"joint_action: missing", id="no-joints"),
    pytest.param(_obs(joint_action__vector=[0.5] * 13), r"joint_action\.vector: 13 values in a list", id="list-13"),
    pytest.param(_obs(observation=KeyError), r"observation: missing", id="no-observation"),
    pytest.param(_obs(observation__left_camera="x"), r"observation\.left_camera: expected an object",
                 id="not-a-camera"),
    pytest.param(_obs(observation__head_camera__rgb=np.zeros((24, 32, 3))),
                 r"observation\.head_camera\.rgb: .*float64", id="float64-image"),
    pytest.param(_obs(observation__left_camera__rgb=np.zeros((24, 32, 4), np.uint8)),
                 r"observation\.left_camera\.rgb: .*shape \(24, 32, 4\)", id="rgba"),
    pytest.param(_obs(observation__right_camera__rgb=np.zeros((1, 5000, 3), np.uint8)),
                 r"observation\.right_camera\.rgb: .*5000", id="too-wide"),
    pytest.param(_obs(instruction="pick \ud800 up"), r"instruction: .*surrogate", id="lone-surrogate"),
    pytest.param(_obs(instruction="x" * 100_000), r"instruction: 100000 characters", id="long-instruction"),
    pytest.param(_obs(instruction=7), r"instruction: expected a string, got int", id="int-instruction"),
]


@pytest.mark.parametrize(("obs", "fragment"), BAD_OBSERVATIONS)
def test_the_tcp_server_refuses_observations_outside_the_contract_naming_the_field(obs: dict[str, Any],
                                                                                    fragment: str) -> None:
    policy = RecordingPolicy()
    with RoboFollowTcpServer(lambda: policy, port=0).start() as server, \
            socket.create_connection(server.address, timeout=30) as sock:
        reply = raw_request(sock, {"cmd": "predict", "obs": obs})
        assert "error" in reply and "\n" not in reply["error"], reply
        assert __import__("re").search(fragment, reply["error"]), reply["error"]
        assert [c for c in policy.calls if c[0] == "predict"] == []  # the policy never saw it
        # The connection stays usable and the next predict works.
        assert raw_request(sock, {"cmd": "predict", "obs": _obs()})["res"].shape == (3, ACTION_DIM)


def test_a_lone_surrogate_instruction_is_refused_and_does_not_break_the_next_predict() -> None:
    with RoboFollowTcpServer(EchoPolicy, port=0).start() as server:
        client = tcp_client(server)
        client.reset()
        with pytest.raises(RemotePolicyError, match=r"instruction: .*surrogate"):
            client.set_instruction("pick \udc80 up")
        client.instruction = ""  # what the server kept
        assert client.predict(OBS).shape == (2, ACTION_DIM)
        client.close()


def test_what_the_policy_receives_over_tcp_is_exactly_the_contract() -> None:
    """Unexpected keys (a reference client forwarding the simulator's whole observation) are dropped;
    the expert's ``privileged`` extension and render-free cameras (``rgb`` None) pass."""
    policy = RecordingPolicy()
    with RoboFollowTcpServer(lambda: policy, port=0).start() as server, \
            socket.create_connection(server.address, timeout=30) as sock:
        obs = _obs()
        obs["observation"]["head_camera"]["depth"] = np.zeros((24, 32), np.float32)  # simulator extras
        obs["observation"]["thermal_camera"] = {"rgb": np.zeros((2, 2, 3), np.uint8)}
        obs["joint_action"]["left_arm"] = [0.0] * 6
        obs["endpose"] = [0.0] * 14
        obs["privileged"] = {"task_id": "L0_pickup_red_cylinder"}
        assert raw_request(sock, {"cmd": "predict", "obs": obs})["res"].shape == (3, ACTION_DIM)
        render_free = _obs(joint_action__vector=[0.25] * ACTION_DIM)
        render_free["observation"] = {key: {"rgb": None} for key in ("head_camera", "left_camera")}
        assert raw_request(sock, {"cmd": "predict", "obs": render_free})["res"].shape == (3, ACTION_DIM)
    seen, seen_render_free = policy.calls[-2][1], policy.calls[-1][1]
    assert set(seen) == {"observation", "joint_action", "instruction", "privileged"}
    assert set(seen["observation"]) == {"head_camera", "left_camera", "right_camera"}
    assert set(seen["observation"]["head_camera"]) == {"rgb"} and set(seen["joint_action"]) == {"vector"}
    assert seen["joint_action"]["vector"].dtype == np.float64 and seen["privileged"]["task_id"].startswith("L0")
    assert seen_render_free["observation"] == {"head_camera": {"rgb": None}, "left_camera": {"rgb": None}}
    assert seen_render_free["joint_action"]["vector"].dtype == np.float64


@pytest.mark.parametrize(("mutate", "fragment"), [
    pytest.param(lambda r: r.__setitem__("state", np.full(14, np.inf, np.float32)), r"joint_action\.vector: .*inf",
                 id="inf-state"),
    pytest.param(lambda r: r["images"].__setitem__("cam_high", np.zeros((3, 5000, 1), np.uint8)),
                 r"observation\.head_camera\.rgb: .*5000", id="too-tall"),
    pytest.param(lambda r: r.__setitem__("prompt", "y" * 100_000), r"instruction: 100000 characters",
                 id="long-prompt"),
])
def test_the_openpi_server_applies_the_same_contract_after_conversion(mutate: Callable[[dict[str, Any]], None],
                                                                      fragment: str) -> None:
    policy = RecordingPolicy()
    with OpenpiPolicyServer(lambda: policy, port=0).start() as server:
        request = to_openpi_observation(OBS, "stack")
        mutate(request)
        client = WebsocketClientPolicy("127.0.0.1", server.address[1])
        with pytest.raises(RuntimeError, match=fragment):
            client.infer(request)
        assert [c for c in policy.calls if c[0] == "predict"] == []


def test_the_oldest_request_finishes_when_partial_requests_fill_the_budget() -> None:
    """Charged as bytes arrive, three requests each hold part of the budget and all need more: without
    priority they waited for each other until every wait ran out and all three were refused (seen on
    a loaded machine). The oldest must finish: the younger ones give way at once and release."""
    from robofollow_ros.policy.wire.budget import MemoryBudget

    budget = MemoryBudget(10 * MIB, reserve=0)
    oldest, *younger = (budget.hold() for _ in range(3))
    for hold in (oldest, *younger):
        assert hold.charge(3 * MIB, wait_s=0)
    outcome: dict[str, bool] = {}
    started = time.monotonic()

    def take_more(name: str, hold: Any) -> None:
        outcome[name] = hold.charge(2 * MIB, wait_s=30)
        if not outcome[name]:
            hold.close()  # what a server does with a refused request: release everything it held

    threads = [threading.Thread(target=take_more, args=(f"younger{i}", h)) for i, h in enumerate(younger)]
    for thread in threads:
        thread.start()
    assert poll_until(lambda: len(budget._wants) == 2, 10), "the younger requests should wait for room"
    take_more("oldest", oldest)  # needs room that only the younger ones hold
    for thread in threads:
        thread.join(10)
    assert outcome["oldest"] is True and not all(outcome[f"younger{i}"] for i in range(2)), outcome
    assert time.monotonic() - started < 10  # nobody waited for the 30 s to run out
    assert oldest.held == 5 * MIB and budget.used == sum(h.held for h in (oldest, *younger)) <= budget.capacity
    for hold in (oldest, *younger):
        hold.close()
    assert budget.used == 0 and budget._busy == {}


def test_a_younger_request_that_leaves_the_oldest_its_room_goes_on() -> None:
    from robofollow_ros.policy.wire.budget import MemoryBudget

    budget = MemoryBudget(10 * MIB, reserve=0)
    oldest, young = budget.hold(), budget.hold()
    assert oldest.charge(6 * MIB, wait_s=0) and young.charge(3 * MIB, wait_s=0)
    waiting = threading.Thread(target=lambda: oldest.charge(2 * MIB, wait_s=30))
    waiting.start()
    assert poll_until(lambda: oldest in budget._wants, 10)
    assert young.charge(1 * MIB // 2, wait_s=0) is False  # would leave the oldest 0.5 MiB short of its 2
    young.close()
    waiting.join(10)
    assert oldest.held == 8 * MIB
    other = budget.hold()
    assert other.charge(1 * MIB, wait_s=0)  # nobody waits now: whatever fits goes
