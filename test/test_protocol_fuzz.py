"""Bounded fuzzing of both decoders and both servers: malformed input must end in a typed error
(``WireFormatError``) or an error reply, never a crash, a hang or an unbounded allocation."""

from __future__ import annotations

import base64
import contextlib
import json
import random
import socket
import struct
import tracemalloc

import msgpack
import numpy as np
import pytest
import websockets.sync.client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.wire.common import WireFormatError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.codec import check_object_count, packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy, wire_observation
from robofollow_ros.policy.wire.robofollow.codec import (
    decode_array,
    decode_message,
    encode_message,
)
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer

FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SMALL_OBS = make_observation(seed=7, width=16, height=12)
VALID_JSON = encode_message({"cmd": "predict", "obs": wire_observation(SMALL_OBS, "pick")})
VALID_MSGPACK = packb(to_openpi_observation(SMALL_OBS, "pick", image_size=8))


def decodes_or_rejects(decoder, data: bytes) -> None:
    with contextlib.suppress(WireFormatError):
        decoder(data)


# --------------------------------------------------------------------------------- JSON decoder
@FUZZ
@given(st.binary(max_size=512))
def test_json_decoder_random_bytes(data: bytes) -> None:
    decodes_or_rejects(decode_message, data)


@FUZZ
@given(st.integers(0, len(VALID_JSON) - 1), st.integers(0, 255), st.integers(1, len(VALID_JSON)))
def test_json_decoder_mutated_and_truncated_frames(position: int, byte: int, cut: int) -> None:
    mutated = bytearray(VALID_JSON)
    mutated[position] = byte
    decodes_or_rejects(decode_message, bytes(mutated))
    decodes_or_rejects(decode_message, VALID_JSON[:cut])


array_fields = st.fixed_dictionaries({
    "__numpy_array__": st.one_of(st.just(True), st.integers(-1, 2), st.text(max_size=2)),
    "data": st.one_of(st.text(alphabet="ABCD+/=!é", max_size=24), st.integers(), st.none()),
    "dtype": st.sampled_from(["uint8", "float32", "float64", "object", "complex64", "V8", "<U4", "int64", "", "f4"]),
    "shape": st.one_of(st.lists(st.integers(-2, 2**62), max_size=40), st.integers(), st.text(max_size=3),
                       st.lists(st.booleans(), max_size=3)),
})


@FUZZ
@given(array_fields)
def test_json_array_objects_with_hostile_fields(fields: dict) -> None:
    decodes_or_rejects(decode_message, json.dumps({"obs": fields}).encode())


def test_huge_shapes_are_rejected_before_allocating() -> None:
    tracemalloc.start()
    try:
        for shape in ([2**40], [2**31, 2**31, 2**31], [10**6, 10**6]):
            with pytest.raises(WireFormatError, match="array shape"):
                decode_array({"__numpy_array__": True, "data": "AAAA", "dtype": "float64", "shape": shape})
        with pytest.raises(WireFormatError, match="do not match shape"):
            decode_array({"__numpy_array__": True, "data": "AAAA", "dtype": "uint8", "shape": [1000, 1000]})
        for shape in ([2**40], [2**31, 2**31, 2**31], [10**6, 10**6], [1000, 1000]):
            hostile = {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f8", b"shape": shape}
            with pytest.raises(WireFormatError, match="do not match shape"):
                unpackb(msgpack.packb(hostile, use_bin_type=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"data": "AA==", "dtype": "object", "shape": [1]}, "array dtype"),
        ({"data": "AAA!", "dtype": "uint8", "shape": [3]}, "invalid base64"),
        ({"data": "AA==", "dtype": "uint8", "shape": [-1]}, "array shape"),
        ({"data": "AA==", "dtype": "uint8", "shape": [True]}, "array shape"),
        ({"data": 5, "dtype": "uint8", "shape": [1]}, "array data"),
        ({"data": "AAAAAAAA", "dtype": "uint8", "shape": [1]}, "do not match shape"),
    ],
)
def test_bad_array_objects_name_the_field(fields: dict, fragment: str) -> None:
    with pytest.raises(WireFormatError, match=fragment):
        decode_message(json.dumps({"__numpy_array__": True, **fields}).encode())


def test_deep_nesting_is_a_typed_error() -> None:
    with pytest.raises(WireFormatError, match="nesting deeper than 64 levels"):
        decode_message(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(WireFormatError):
        unpackb(b"\x91" * 100_000 + b"\xc0")


# --------------------------------------------------------------------------------- msgpack decoder
@FUZZ
@given(st.binary(max_size=512))
def test_msgpack_decoder_random_bytes(data: bytes) -> None:
    decodes_or_rejects(unpackb, data)


@FUZZ
@given(st.integers(0, len(VALID_MSGPACK) - 1), st.integers(0, 255), st.integers(0, len(VALID_MSGPACK) - 1))
def test_msgpack_decoder_mutated_and_truncated_messages(position: int, byte: int, cut: int) -> None:
    mutated = bytearray(VALID_MSGPACK)
    mutated[position] = byte
    decodes_or_rejects(unpackb, bytes(mutated))
    decodes_or_rejects(unpackb, VALID_MSGPACK[:cut])


MSGPACK_INTS = st.integers(-(2**63), 2**64 - 1)  # what msgpack can carry at all
ndarray_maps = st.fixed_dictionaries({
    b"__ndarray__": st.just(True),
    b"data": st.one_of(st.binary(max_size=32), st.text(max_size=4), MSGPACK_INTS),
    b"dtype": st.sampled_from(["<f4", "|u1", "|O", "<c8", "|V4", "<U2", "(2,)f4", "zz", "", "<i8", "|b1", ">f8"]),
    b"shape": st.one_of(st.lists(st.integers(-2, 2**62), max_size=40), MSGPACK_INTS, st.none()),
})


@FUZZ
@given(ndarray_maps)
def test_msgpack_ndarray_maps_with_hostile_fields(fields: dict) -> None:
    decodes_or_rejects(unpackb, msgpack.packb({"x": fields}, use_bin_type=True))


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": [1]}, "not numeric"),
        ({b"__ndarray__": True, b"data": b"\0" * 4, b"dtype": "<f4", b"shape": [2**62, 2**62]}, "do not match"),
        ({b"__ndarray__": True, b"data": b"\0" * 4, b"dtype": "<f4", b"shape": None}, "array shape"),
        ({b"__npgeneric__": True, b"data": "x", b"dtype": "<f4"}, "scalar data"),
        ({b"__npgeneric__": True, b"data": 2**63, b"dtype": "<i8"}, "does not fit"),
    ],
)
def test_bad_msgpack_arrays_name_the_field(fields: dict, fragment: str) -> None:
    with pytest.raises(WireFormatError, match=fragment):
        unpackb(msgpack.packb(fields, use_bin_type=True))


msgpack_values = st.recursive(
    st.one_of(st.none(), st.booleans(), MSGPACK_INTS, st.floats(width=32), st.text(max_size=40),
              st.binary(max_size=300), st.sampled_from([b"b" * 70_000, "s" * 300, "t" * 70_000]),
              st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=20))),
    lambda children: st.one_of(st.lists(children, max_size=20),
                               st.dictionaries(st.text(max_size=5), children, max_size=20)),
    max_leaves=60)


def python_count(value: object) -> int:
    """msgpack values in ``value`` by the data model (independent of any byte-level reading)."""
    if isinstance(value, list):
        return 1 + sum(python_count(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(python_count(k) + python_count(v) for k, v in value.items())
    return 1


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(msgpack_values, st.booleans())
def test_msgpack_object_count_matches_the_data_model(value: object, single_floats: bool) -> None:
    packed = msgpack.packb(value, use_bin_type=True, use_single_float=single_floats)
    assert check_object_count(packed) == python_count(value)
    count = python_count(value)
    if count > 1:
        with pytest.raises(WireFormatError, match=f"more than {count - 1:,} msgpack objects"):
            check_object_count(packed, count - 1)


# --------------------------------------------------------------------------------- live servers
def test_tcp_server_survives_a_fuzzed_stream_and_still_serves() -> None:
    rng = random.Random(1234)
    with RoboFollowTcpServer(HoldPolicy(), port=0, frame_timeout_s=2.0).start() as server:
        port = server.address[1]
        for _ in range(40):
            with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
                kind = rng.choice(["garbage", "mutated", "short_header", "bad_length"])
                if kind == "garbage":
                    body = rng.randbytes(rng.randint(1, 300))
                    send_frame(sock, body)
                    assert "error" in decode_message(recv_frame(sock, 20) or b"{}")
                elif kind == "mutated":
                    body = bytearray(VALID_JSON)
                    body[rng.randrange(len(body))] = rng.randrange(256)
                    send_frame(sock, bytes(body))
                    reply = decode_message(recv_frame(sock, 20) or b"{}")
                    assert "error" in reply or "res" in reply
                elif kind == "short_header":
                    sock.sendall(b"\x00\x00")  # then hang up mid-header
                else:
                    sock.sendall(struct.pack(">I", rng.choice([0, 2**31, 2**32 - 1])))
                    assert sock.recv(8) == b""
        client = RoboFollowTcpPolicy("127.0.0.1", port, timeout_s=20)
        assert client.predict(make_observation()).shape == (5, 14)
        client.close()


def test_tcp_server_bounds_a_frame_that_never_completes() -> None:
    with RoboFollowTcpServer(HoldPolicy(), port=0, frame_timeout_s=0.3).start() as server:
        with socket.create_connection(("127.0.0.1", server.address[1]), timeout=20) as sock:
            sock.sendall(struct.pack(">I", 1000) + b"{")  # promises 1000 bytes, sends one
            assert sock.recv(8) == b""  # the server gave up on it and hung up
        assert RoboFollowTcpPolicy("127.0.0.1", server.address[1], timeout_s=20).predict(make_observation()).size


def test_openpi_server_survives_fuzzed_messages_and_still_serves() -> None:
    rng = random.Random(99)
    with OpenpiPolicyServer(HoldPolicy(), port=0).start() as server:
        uri = f"ws://127.0.0.1:{server.address[1]}"
        for _ in range(30):
            with websockets.sync.client.connect(uri, open_timeout=20) as ws:
                ws.recv(timeout=20)
                mutated = bytearray(VALID_MSGPACK)
                for _ in range(rng.randint(1, 4)):
                    mutated[rng.randrange(len(mutated))] = rng.randrange(256)
                payload = bytes(mutated[: rng.randint(1, len(mutated))])
                ws.send(payload)
                reply = ws.recv(timeout=20)
                assert isinstance(reply, str | bytes)
        client = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=20)
        assert client.predict(make_observation()).shape == (5, 14)
        client.close()


def test_base64_of_the_reference_encoder_is_accepted() -> None:
    raw = np.arange(5, dtype=np.float32)
    obj = {"__numpy_array__": True, "data": base64.b64encode(raw.tobytes()).decode(), "dtype": "float32",
           "shape": [5]}
    np.testing.assert_array_equal(decode_message(json.dumps(obj).encode()), raw)
