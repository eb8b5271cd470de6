"""The cheaper bounds of issue 23 (item 8) decide exactly what the plain ones decided.

- RoboFollow JSON: base64 by ``pybase64`` accepts exactly what strict ``binascii`` (the fallback)
  accepts, with the same bytes. Long base64 ``"data"`` strings are cut out before the parse; on any
  input, the result (or the error message) is the plain parse's, with either base64. The structure count by NumPy equals
  ``bytes.count``. Frames go out in one ``sendmsg`` (pieces unjoined), partial sends included, and
  the socket's timeout still bounds the whole frame; a body of one read is read in place, and a
  refused one is still consumed to its end.
- openpi msgpack: a message no longer than the object limit is not counted (it cannot exceed it);
  the table-driven count equals the data model (also fuzzed in test_protocol_fuzz); a thread's
  kept packer survives a failed pack.
"""

from __future__ import annotations

import binascii
import json
import random
import socket
import struct
import threading
import time
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robofollow_ros.jsonlimits import structure_counts
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.wire.budget import MemoryBudget, MemoryBudgetError
from robofollow_ros.policy.wire.common import WireFormatError
from robofollow_ros.policy.wire.openpi import codec as openpi_codec
from robofollow_ros.policy.wire.robofollow import codec
from robofollow_ros.policy.wire.robofollow.client import wire_observation
from robofollow_ros.policy.wire.robofollow.framing import (
    CHUNK_BYTES,
    FrameDeadline,
    recv_body,
    recv_frame,
    recv_header,
    send_frame,
)

FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
OBS = make_observation(seed=11, width=32, height=24)  # images of 3,072 base64 characters: cut
BODY = codec.encode_message({"cmd": "predict", "obs": wire_observation(OBS, "stack the cups")})
B64 = codec.encode_array(np.arange(1200, dtype=np.uint8))["data"]  # 1,600 characters


@pytest.fixture(params=["pybase64", "binascii"])
def base64_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the SIMD base64 and with the fallback."""
    if request.param == "binascii":
        monkeypatch.setattr(codec, "pybase64", None)
    else:
        assert codec.pybase64 is not None, "pybase64 (a requirement) is not installed"
    return str(request.param)


def outcome(decode: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "value", decode(body)
    except WireFormatError as exc:
        return "error", str(exc)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes() and a.flags.writeable == b.flags.writeable)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))


def assert_cut_equals_plain(body: bytes) -> None:
    fast, plain = outcome(codec.decode_message, body), outcome(codec._decode_plain, body)
    assert fast[0] == plain[0], (fast, plain)
    assert same(fast[1], plain[1]), (fast, plain)


# --------------------------------------------------------------------------------- base64
def _array_outcome(text: bytes, nbytes: int) -> tuple[str, bytes | None]:
    try:
        return "value", codec.decode_array({"dtype": "uint8", "shape": [nbytes]}, text=text).tobytes()
    except WireFormatError:
        return "error", None


def test_pybase64_accepts_exactly_what_strict_binascii_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid texts of every length and every kind of damage: same verdict, same bytes."""
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    rng = random.Random(23)
    cases: list[tuple[bytes, int]] = []
    for _ in range(6000):
        nbytes = rng.choice([rng.randint(0, 20), rng.randint(20, 300), rng.randint(300, 3000)])
        text = bytearray(binascii.b2a_base64(rng.randbytes(nbytes), newline=False))
        damage = rng.randint(0, 5)
        if damage == 1 and text:
            text[rng.randrange(len(text))] = rng.randrange(256)  # any byte anywhere
        elif damage == 2 and text:
            text[rng.randrange(len(text))] = rng.choice(alphabet)  # trailing bits too
        elif damage == 3 and text:
            at = rng.randrange(len(text))
            text[at:at + rng.randint(1, 3)] = b"=" * rng.randint(1, 3)
        elif damage == 4 and len(text) >= 4:
            text[-4:] = bytes(rng.choice(alphabet + b"=") for _ in range(4))
        elif damage == 5:
            text += b"=" * rng.randint(1, 4)
        cases.append((bytes(text), nbytes))
    fast = [_array_outcome(text, nbytes) for text, nbytes in cases]
    monkeypatch.setattr(codec, "pybase64", None)
    assert [_array_outcome(text, nbytes) for text, nbytes in cases] == fast
    assert 2000 < sum(kind == "value" for kind, _ in fast) < 5000  # both verdicts well represented


def test_encoding_is_the_same_with_either_base64(monkeypatch: pytest.MonkeyPatch) -> None:
    message = {"cmd": "predict", "obs": wire_observation(OBS, "x")}
    fast = codec.encode_message(message)
    monkeypatch.setattr(codec, "pybase64", None)
    assert codec.encode_message(message) == fast


# --------------------------------------------------------------------------------- the cut parse
def test_an_observation_is_cut_and_decodes_as_the_plain_parse(base64_impl: str) -> None:
    cut = codec._cut_blobs(BODY)
    assert cut is not None and len(cut[1]) == 3 and len(cut[0]) < 1000  # three images out, vector in
    assert_cut_equals_plain(BODY)
    counts: list[tuple[int, int]] = []
    codec.decode_message(BODY, before_parse=lambda c, m: counts.append((c, m)))
    assert counts == [structure_counts(BODY)]  # the skeleton's counts are the body's


def test_the_received_buffer_is_free_again_after_decoding() -> None:
    body = bytearray(BODY)
    codec.decode_message(body)
    body += b" "  # a buffer still exported to a memoryview could not grow
    with pytest.raises(WireFormatError):
        codec.decode_message(bytearray(BODY.replace(b'"dtype": "uint8"', b'"dtype": "object"', 1)))


@FUZZ
@given(st.integers(0, len(BODY) - 1), st.sampled_from(b'"\\{}[],: =A/+\x00\xff'), st.booleans())
def test_mutated_observations_decode_as_the_plain_parse(position: int, byte: int, insert: bool) -> None:
    # (pybase64 here; the crafted bodies below run with both)
    body = bytearray(BODY)
    if insert:
        body.insert(position, byte)
    else:
        body[position] = byte
    assert_cut_equals_plain(bytes(body))


def _array(data: str, **fields: Any) -> dict[str, Any]:
    return {"__numpy_array__": True, "data": data, "dtype": "uint8", "shape": [1200], **fields}


CRAFTED = {
    "a data string that is not an array's": json.dumps({"x": {"data": B64}}),
    "two data keys, the last one wins": json.dumps(_array(B64))[:-1] + f', "data": "{B64[::-1]}"}}',
    "an escaped quote inside the blob": json.dumps(_array(B64[:800] + '"' + B64[801:])),
    "a backslash escape inside the blob": json.dumps(_array(B64[:800] + "\\u0041" + B64[806:])),
    "the marker inside a string": json.dumps({"s": f'x "data": "{B64}" y', "a": _array(B64)}),
    "the marker after a closing quote": '{"k": "v"data": "' + B64 + '"}',
    "a key quoted open before the marker": '["x", "data": "' + B64 + '"]',
    "no space after the colon": json.dumps(_array(B64), separators=(",", ":")),
    "two spaces after the colon": json.dumps(_array(B64)).replace('"data": ', '"data":  '),
    "padding inside the blob": json.dumps(_array(B64[:400] + "====" + B64[404:])),
    "a non-ASCII character in the blob": json.dumps(_array(B64[:400] + "\u00e9" + B64[401:]), ensure_ascii=False),
    "a blob with a structural character": json.dumps(_array(B64[:400] + "[" + B64[401:])),
    "a truthy marker of another kind": json.dumps(_array(B64, __numpy_array__=1)),
    "a false marker": json.dumps(_array(B64, __numpy_array__=False)),
    "the blob as a key": json.dumps({B64: 1, "a": _array(B64)}),
    "a blob in a list": json.dumps([B64, _array(B64)]),
    "an unterminated blob": '{"__numpy_array__": true, "data": "' + B64,
    "trailing text after the message": json.dumps(_array(B64)) + " x",
    "a wrong length": json.dumps(_array(B64 + "AAAA")),
    "a bad dtype": json.dumps(_array(B64, dtype="object")),
    "many markers": json.dumps({"a": [{"data": "x"}] * 100, "b": _array(B64)}),
    "many arrays": json.dumps([_array(B64)] * (codec.MAX_BLOBS + 3)),
}


@pytest.mark.parametrize("text", CRAFTED.values(), ids=CRAFTED.keys())
def test_crafted_bodies_decode_as_the_plain_parse(text: str, base64_impl: str) -> None:
    assert_cut_equals_plain(text.encode("utf-8"))


def test_a_blob_full_of_brackets_is_refused_by_count_as_before() -> None:
    body = json.dumps(_array("[" * 1_100_000)).encode()
    counts: list[tuple[int, int]] = []
    with pytest.raises(WireFormatError, match="objects/arrays exceed the limit of 1,000,000"):
        codec.decode_message(body, before_parse=lambda c, m: counts.append((c, m)))
    assert counts == [(2, 3)]  # charged for the skeleton only; the body was refused before its charge


def test_a_charge_refused_before_the_cut_parse_propagates() -> None:
    def refuse(containers: int, commas: int) -> None:
        raise MemoryBudgetError("server busy: no room")

    with pytest.raises(MemoryBudgetError):
        codec.decode_message(BODY, before_parse=refuse)


# --------------------------------------------------------------------------------- structure counts
@pytest.mark.parametrize("size", [0, 100, 16 * 1024 - 1, 16 * 1024, 300_000, (1 << 20) + 17, 3 << 20])
def test_vectorised_counts_equal_bytes_count(size: int) -> None:
    rng = np.random.default_rng(size)
    data = rng.choice(np.frombuffer(b'{[,]}"ab', np.uint8), size).tobytes()
    expected = (data.count(b"{") + data.count(b"["), data.count(b","))
    assert structure_counts(data) == expected
    assert structure_counts(bytearray(data)) == expected
    assert structure_counts(memoryview(data)[size // 3:]) == structure_counts(data[size // 3:])


# --------------------------------------------------------------------------------- framing
def test_a_frame_sent_in_pieces_arrives_as_their_concatenation() -> None:
    a, b = socket.socketpair()
    with a, b:
        pieces = codec.encode_message_parts({"cmd": "predict", "obs": wire_observation(OBS, "x")})
        assert len(pieces) > 1 and b"".join(pieces) == BODY.replace(b"stack the cups", b"x")
        send_frame(a, pieces)
        assert recv_frame(b, 5) == b"".join(pieces)
        send_frame(a, [b"{}"] * 100)  # more pieces than one sendmsg takes: joined first
        assert recv_frame(b, 5) == b"{}" * 100


def test_a_large_frame_goes_out_in_several_sendmsg_calls_to_a_slow_reader() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        pieces = [bytes([i]) * 300_000 for i in range(1, 5)]
        a.settimeout(20)
        received: list[bytes | bytearray | None] = []
        reader = threading.Thread(target=lambda: (time.sleep(0.2), received.append(recv_frame(b, 20, 20))))
        reader.start()
        send_frame(a, pieces)
        reader.join(30)
        assert received == [b"".join(pieces)]
        assert a.gettimeout() == 20  # restored after the partial sends


@pytest.mark.exclusive  # a 2 s wall-clock bound: run alone (make test)
def test_the_socket_timeout_bounds_the_whole_frame() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        a.settimeout(0.5)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            send_frame(a, [b"x" * (4 << 20), b"y" * (4 << 20)])  # nobody reads
        assert time.monotonic() - started < 2.0


def test_a_refused_body_read_in_place_is_consumed_and_the_next_frame_is_in_step() -> None:
    budget = MemoryBudget(1 << 20, reserve=0)
    hog = budget.hold()
    assert hog.charge(budget.capacity - 1000, 0)  # 1,000 bytes of room left
    a, b = socket.socketpair()
    with a, b, hog:
        first = b"[" + b"0," * 200_000 + b"0]"
        assert len(first) <= CHUNK_BYTES
        writer = threading.Thread(target=lambda: (send_frame(a, first), send_frame(a, b'{"res": null}')))
        writer.start()
        header = recv_header(b, 5, 5)
        assert header is not None
        with budget.hold() as hold, pytest.raises(MemoryBudgetError, match="server busy"):
            recv_body(b, header[0], header[1], hold=hold, budget_wait_s=0)
        assert budget.used == hog.held
        assert recv_frame(b, 5, 5) == b'{"res": null}'
        writer.join(10)


def test_a_body_of_one_read_arrives_whole_in_several_segments() -> None:
    a, b = socket.socketpair()
    with a, b:
        body = bytes(range(256)) * 3000
        a.sendall(struct.pack(">I", len(body)))

        def trickle() -> None:
            for start in range(0, len(body), 100_000):
                a.sendall(body[start:start + 100_000])
                time.sleep(0.01)

        writer = threading.Thread(target=trickle)
        writer.start()
        header = recv_header(b, 5, 5)
        assert header is not None
        assert recv_body(b, header[0], FrameDeadline(10)) == body
        writer.join(10)


# --------------------------------------------------------------------------------- openpi msgpack
def test_a_message_within_the_object_limit_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    message = openpi_codec.packb({"actions": np.ones((50, 14), np.float32)})

    def refuse(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("counted")

    monkeypatch.setattr(openpi_codec, "check_object_count", refuse)
    assert openpi_codec.unpackb(message)["actions"].shape == (50, 14)
    with pytest.raises(AssertionError, match="counted"):
        openpi_codec.unpackb(message, max_objects=len(message) - 1)


def test_every_message_over_the_limit_is_still_refused() -> None:
    message = b"\xdc" + (1000).to_bytes(2, "big") + b"\xc0" * 1000  # 1,001 values in 1,003 bytes
    with pytest.raises(WireFormatError, match="more than 1,000 msgpack objects"):
        openpi_codec.unpackb(message, max_objects=1000)
    assert openpi_codec.unpackb(message, max_objects=1001) == [None] * 1000


def test_a_kept_packer_survives_a_failed_pack_and_threads() -> None:
    good = {"actions": np.arange(28, dtype=np.float32).reshape(2, 14), "t": {"infer_ms": 1.5}}
    reference = msgpack.packb(good, default=openpi_codec._pack_default, use_bin_type=True)
    assert openpi_codec.packb(good) == reference
    with pytest.raises(WireFormatError):
        openpi_codec.packb({"a": 1, "b": np.array(["text"])})
    assert openpi_codec.packb(good) == reference
    big = {"x": np.zeros(1 << 20, np.uint8)}
    assert openpi_codec.unpackb(openpi_codec.packb(big))["x"].shape == (1 << 20,)
    results: list[bool] = []

    def worker(i: int) -> None:
        message = {"i": i, "actions": np.full((2, 14), i, np.float32)}
        results.extend(openpi_codec.packb(message) == msgpack.packb(message, default=openpi_codec._pack_default)
                       for _ in range(200))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [True] * 800
