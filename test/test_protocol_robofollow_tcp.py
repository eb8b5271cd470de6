"""RoboFollow TCP protocol: wire format, every command, errors and the reference client's reconnects.

Everything runs on real loopback sockets (port 0); servers run in threads of this process.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import FaultyPolicy, RecordingPolicy, make_observation
from robofollow_ros.policy.guard import TimeoutGuardedPolicy
from robofollow_ros.policy.interface import ValidatedPolicy
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy
from robofollow_ros.policy.wire.robofollow.codec import (
    MAX_FRAME_BYTES,
    decode_message,
    encode_message,
)
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer


@pytest.fixture
def recorder_server() -> Iterator[tuple[RoboFollowTcpServer, RecordingPolicy]]:
    policy = RecordingPolicy(chunk_size=4)
    server = RoboFollowTcpServer(policy, "127.0.0.1", 0).start()
    yield server, policy
    server.stop()


def client_for(server: RoboFollowTcpServer, **kwargs: float) -> RoboFollowTcpPolicy:
    options = {"timeout_s": 20.0, "connect_attempts": 3, "connect_interval_s": 0.05, **kwargs}
    return RoboFollowTcpPolicy("127.0.0.1", server.address[1], **options)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_exchange(port: int, message: dict) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        send_frame(sock, encode_message(message))
        reply = recv_frame(sock, 20)
        assert reply is not None
        return decode_message(reply)


# ---------------------------------------------------------------------------- wire format
def test_encoding_matches_the_reference_text_exactly() -> None:
    arr = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    text = encode_message({"cmd": "predict", "obs": {"a": arr, "s": "é", "n": np.float32(0.5)}}).decode()
    expected_data = base64.b64encode(arr.tobytes()).decode()
    assert text == ('{"cmd": "predict", "obs": {"a": {"__numpy_array__": true, "data": "' + expected_data
                    + '", "dtype": "uint8", "shape": [2, 2]}, "s": "\\u00e9", "n": 0.5}}')


def test_arrays_round_trip_read_only_with_dtype_and_shape() -> None:
    tree = {"x": [np.arange(6, dtype=np.float64).reshape(2, 3), {"b": np.array([True, False])}],
            "y": np.zeros((0, 14), np.float32), "z": np.arange(12, dtype=np.int16).reshape(3, 4).T}
    out = decode_message(encode_message(tree))
    np.testing.assert_array_equal(out["x"][0], tree["x"][0])
    np.testing.assert_array_equal(out["z"], tree["z"])  # non-contiguous input travels in C order
    assert out["x"][1]["b"].dtype == np.bool_ and out["y"].shape == (0, 14)
    assert not out["x"][0].flags.writeable


def test_a_truthy_marker_anywhere_is_an_array_and_non_native_order_is_converted() -> None:
    big = np.arange(3, dtype=">i4")
    assert decode_message(encode_message({"deep": [[{"k": big}]]}))["deep"][0][0]["k"].tolist() == [0, 1, 2]
    body = json.dumps({"__numpy_array__": 1, "data": base64.b64encode(b"\x07").decode(), "dtype": "uint8",
                       "shape": [1]}).encode()
    assert decode_message(body).tolist() == [7]


def test_frames_are_length_prefixed_and_bounded() -> None:
    a, b = socket.socketpair()
    with a, b:
        send_frame(a, b'{"res": null}')
        assert recv_frame(b, 5) == b'{"res": null}'
        with pytest.raises(WireFormatError, match="frame length: 0"):
            send_frame(a, b"")
        a.sendall(struct.pack(">I", MAX_FRAME_BYTES + 1))
        with pytest.raises(WireFormatError, match=f"frame length: {MAX_FRAME_BYTES + 1}"):
            recv_frame(b, 5)


# ---------------------------------------------------------------------------- commands
def test_every_command_reaches_the_policy_in_order(recorder_server) -> None:
    server, policy = recorder_server
    client = client_for(server)
    obs = make_observation(seed=1)
    client.reset()
    client.set_instruction("put the red cube in the bowl")
    actions = client.predict(obs)
    client.close()
    assert actions.dtype == np.float32 and actions.shape == (4, 14) and actions[0, 0] == 1.0
    assert [c[0] for c in policy.calls] == ["reset", "set_instruction", "predict"]
    assert policy.calls[1][1] == "put the red cube in the bowl"
    sent = policy.calls[2][1]
    assert set(sent) == {"observation", "joint_action", "instruction"}
    assert sent["instruction"] == "put the red cube in the bowl"
    assert set(sent["observation"]) == {"head_camera", "left_camera", "right_camera"}
    np.testing.assert_array_equal(sent["observation"]["left_camera"]["rgb"], obs["observation"]["left_camera"]["rgb"])
    np.testing.assert_array_equal(sent["joint_action"]["vector"], obs["joint_action"]["vector"])
    assert sent["joint_action"]["vector"].dtype == np.float64  # the simulator's own dtype travels


def test_hold_behind_the_server_equals_hold_in_process() -> None:
    with RoboFollowTcpServer(HoldPolicy(chunk_size=5), port=0).start() as server:
        remote = ValidatedPolicy(client_for(server))
        obs = make_observation(seed=9)
        np.testing.assert_array_equal(remote.predict(obs), ValidatedPolicy(HoldPolicy(5)).predict(obs))
        remote.close()


def test_raw_requests_get_reference_shaped_replies(recorder_server) -> None:
    server, _ = recorder_server
    port = server.address[1]
    assert raw_exchange(port, {"cmd": "reset", "obs": None}) == {"res": None}
    assert raw_exchange(port, {"cmd": "set_instruction", "obs": None}) == {"res": None}
    unknown = raw_exchange(port, {"cmd": "dance", "obs": None})
    assert set(unknown) == {"error", "traceback"} and "unknown command 'dance'" in unknown["error"]


@pytest.mark.parametrize("mode", ["raise", "nan", "inf", "wrong_shape", "empty", "not_array"])
def test_a_failing_policy_gives_a_clean_error_and_the_server_keeps_serving(mode: str) -> None:
    with RoboFollowTcpServer(FaultyPolicy(mode), port=0).start() as server:
        client = client_for(server)
        with pytest.raises(RemotePolicyError) as info:
            client.predict(make_observation())
        assert "predict failed" in str(info.value)
        assert "Traceback (most recent call last)" not in info.value.remote_traceback
        assert "--debug" in info.value.remote_traceback
        client.set_instruction("still there?")  # same connection, still served
        assert client.connections_opened == 1
        client.close()


def test_debug_server_sends_the_full_traceback() -> None:
    with RoboFollowTcpServer(FaultyPolicy("raise"), port=0, debug=True).start() as server:
        client = client_for(server)
        with pytest.raises(RemotePolicyError, match="failed on purpose") as info:
            client.predict(make_observation())
        assert info.value.remote_traceback.startswith("Traceback (most recent call last)")
        client.close()


def test_a_hung_policy_times_out_and_the_server_answers_the_next_caller() -> None:
    faulty = FaultyPolicy("hang", hang_s=30)
    guard = TimeoutGuardedPolicy(faulty, timeout_s=0.2)
    with RoboFollowTcpServer(guard, port=0).start() as server:
        client = client_for(server)
        with pytest.raises(RemotePolicyError, match=r"no answer within 0\.2 s"):
            client.predict(make_observation())
        with pytest.raises(RemotePolicyError, match="still running"):
            client.reset()
        faulty.release.set()
        assert guard.wait_idle(10)
        client.reset()
        client.close()


# ---------------------------------------------------------------------------- client behaviour
def test_only_reset_is_replayed_after_the_connection_breaks() -> None:
    port = free_port()
    first = RecordingPolicy()
    server = RoboFollowTcpServer(first, port=port).start()
    client = RoboFollowTcpPolicy("127.0.0.1", port, timeout_s=20, connect_attempts=5, connect_interval_s=0.05)
    client.reset()
    server.stop()  # the connection breaks under the client
    second = RecordingPolicy()
    with RoboFollowTcpServer(second, port=port).start():
        with pytest.raises(ConnectionError, match=r"predict failed .* not retried"):
            client.predict(make_observation())
        assert second.calls == []  # predict was not replayed
        client.predict(make_observation())  # the next call reconnects lazily
        assert [c[0] for c in second.calls] == ["predict"]
    third = RecordingPolicy()
    with RoboFollowTcpServer(third, port=port).start():
        client.reset()  # broken again: reset reconnects and is replayed once
        assert [c[0] for c in third.calls] == ["reset"]
    with RoboFollowTcpServer(RecordingPolicy(), port=port).start(), \
            pytest.raises(ConnectionError, match="set_instruction failed"):
        client.set_instruction("x")
    client.close()


def test_connect_gives_up_after_the_configured_attempts() -> None:
    client = RoboFollowTcpPolicy("127.0.0.1", free_port(), timeout_s=5, connect_attempts=3, connect_interval_s=0.01)
    with pytest.raises(ConnectionError, match="no connection after 3 attempts"):
        client.predict(make_observation())


def test_oversized_request_raises_value_error_before_sending(recorder_server) -> None:
    server, policy = recorder_server
    client = client_for(server)
    with pytest.raises(ValueError, match="frame length"):
        client.set_instruction("x" * (MAX_FRAME_BYTES + 1))
    assert policy.calls == [] and server.stats["requests"] == 0


def test_clients_are_served_one_at_a_time_and_share_the_policy(recorder_server) -> None:
    server, _ = recorder_server
    a, b = client_for(server), client_for(server)
    a.reset()
    result: dict[str, object] = {}
    waiter = threading.Thread(target=lambda: result.setdefault("b", b.predict(make_observation())))
    waiter.start()  # b is accepted only once a hangs up
    a.predict(make_observation())
    a.close()
    waiter.join(30)
    assert not waiter.is_alive()
    assert result["b"][0, 0] == 2.0  # type: ignore[index]  # second predict of the same, not reset, policy
    assert server.stats["connections"] == 2
    b.close()


def test_bad_lengths_drop_the_connection_silently_and_the_server_survives(recorder_server) -> None:
    server, _ = recorder_server
    for header in (struct.pack(">I", 0), struct.pack(">I", MAX_FRAME_BYTES + 1), b"\xff\xff\xff\xff"):
        with socket.create_connection(("127.0.0.1", server.address[1]), timeout=20) as sock:
            sock.sendall(header)
            assert sock.recv(16) == b""  # closed with no response
    assert server.stats["dropped"] == 3
    assert raw_exchange(server.address[1], {"cmd": "reset", "obs": None}) == {"res": None}


def test_invalid_json_body_gets_an_error_reply_on_the_same_connection(recorder_server) -> None:
    server, _ = recorder_server
    with socket.create_connection(("127.0.0.1", server.address[1]), timeout=20) as sock:
        send_frame(sock, b"{not json")
        reply = decode_message(recv_frame(sock, 20) or b"")
        assert "invalid JSON" in reply["error"]
        send_frame(sock, encode_message({"cmd": "reset", "obs": None}))
        assert decode_message(recv_frame(sock, 20) or b"") == {"res": None}


def fake_peer(reply: bytes, hang_up: bool = False) -> tuple[socket.socket, threading.Thread]:
    """A one-shot server that answers the first request with ``reply`` verbatim (then hangs up if asked)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            recv_frame(conn, 20)
            conn.sendall(reply)
            if not hang_up:
                conn.recv(1)  # wait until the client hangs up

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    ("reply", "error", "fragment"),
    [
        (struct.pack(">I", 0), ValueError, "frame length: 0"),
        (struct.pack(">I", 9) + b'{"ok": 1}', ValueError, "no 'res' key"),
        (struct.pack(">I", 2) + b"[]", ValueError, "expected a JSON object"),
    ],
)
def test_client_rejects_malformed_responses(reply: bytes, error: type, fragment: str) -> None:
    listener, thread = fake_peer(reply)
    with listener:
        client = RoboFollowTcpPolicy("127.0.0.1", listener.getsockname()[1], timeout_s=20, connect_attempts=1)
        with pytest.raises(error, match=fragment):
            client.set_instruction("x")
        client.close()
        thread.join(20)


def test_a_truncated_response_is_a_connection_error_and_not_replayed() -> None:
    listener, thread = fake_peer(struct.pack(">I", 9) + b'{"ok": 1', hang_up=True)
    with listener:
        client = RoboFollowTcpPolicy("127.0.0.1", listener.getsockname()[1], timeout_s=20, connect_attempts=1)
        with pytest.raises(ConnectionError, match="after 8 of 9 bytes"):
            client.predict(make_observation())
        assert client.connections_opened == 1
        thread.join(20)


def _inline_default(obj: object) -> object:
    """The plain encoder a reference peer uses: base64 inlined by json.dumps itself."""
    if isinstance(obj, np.ndarray):
        return {"__numpy_array__": True, "data": base64.b64encode(obj.tobytes()).decode(),
                "dtype": obj.dtype.name, "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(type(obj))


@pytest.mark.parametrize("seed", range(5))
def test_spliced_encoder_is_byte_identical_to_plain_json_dumps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree = {
        "cmd": "predict",
        "obs": {
            "observation": {f"cam{i}": {"rgb": rng.integers(0, 256, (rng.integers(0, 5), 3, 3), dtype=np.uint8)}
                            for i in range(3)},
            "tricky": ["0123456789abcdef0123456789abcdef:0", 'quote " and \\ and \u00e9 and \x00'],
            "vector": rng.normal(size=14), "flag": np.bool_(True), "count": np.int64(7),
        },
    }
    assert encode_message(tree) == json.dumps(tree, default=_inline_default).encode("ascii")
