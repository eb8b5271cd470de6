"""Wire parity with the official RoboFollow server (issue 13 item 5): arrays in the other byte order.

The official encoder (``remote_policy.py`` at a867718) writes ``"dtype": str(array.dtype)``, the
raw ``tobytes()`` in base64 and ``"shape": list``; its decoder is ``np.frombuffer(b64decode(data),
np.dtype(dtype)).reshape(shape)``. So a big-endian array travels as ``">f8"`` and decodes to the
same values. The message builder below follows that description (written here, not copied), and
NumPy's own ``frombuffer`` is the independent reader our decoder is compared with.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import numpy as np
import pytest
from openpi_client import msgpack_numpy as openpi_msgpack

from robofollow_ros.policy.drills.scripted import RecordingPolicy
from robofollow_ros.policy.wire.common import WireFormatError
from robofollow_ros.policy.wire.openpi.codec import unpackb
from robofollow_ros.policy.wire.robofollow.codec import decode_message
from robofollow_ros.policy.wire.robofollow.framing import recv_frame, send_frame
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer


def official_json(message: Any) -> bytes:
    """JSON as the official encoder writes it: dtype as ``str(dtype)``, bytes as ``tobytes()``."""
    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            return {"__numpy_array__": True, "data": base64.b64encode(obj.tobytes()).decode("ascii"),
                    "dtype": str(obj.dtype), "shape": obj.shape}
        raise TypeError(type(obj).__name__)

    return json.dumps(message, default=default).encode("utf-8")


def official_decode(body: bytes) -> Any:
    """The official decoder's reading, as the independent reference."""
    def hook(obj: dict[str, Any]) -> Any:
        if obj.get("__numpy_array__"):
            return np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["dtype"])).reshape(obj["shape"])
        return obj

    return json.loads(body, object_hook=hook)


BYTE_ORDERS = [">f8", ">f4", ">f2", ">i8", ">i4", ">i2", ">u8", ">u4", ">u2", "<f8", "<i4", "|u1", "|i1", "|b1"]


@pytest.mark.parametrize("dtype", BYTE_ORDERS)
def test_arrays_in_either_byte_order_decode_to_the_official_values(dtype: str) -> None:
    rng = np.random.default_rng(5)
    values = rng.uniform(-100, 100, (3, 4, 2)) if np.dtype(dtype).kind == "f" else rng.integers(0, 100, (3, 4, 2))
    array = values.astype(dtype)
    body = official_json({"a": array, "nested": [{"b": array[1]}]})
    assert f'"dtype": "{array.dtype}"' in body.decode()  # the spelling on the wire is str(dtype)
    ours, theirs = decode_message(body), official_decode(body)
    for got, want in ((ours["a"], theirs["a"]), (ours["nested"][0]["b"], theirs["nested"][0]["b"])):
        assert got.shape == want.shape and got.dtype.kind == want.dtype.kind
        np.testing.assert_array_equal(got, want)
        assert got.dtype.isnative and got.dtype.itemsize == want.dtype.itemsize  # same values, native order
        assert not got.flags.writeable


@pytest.mark.parametrize("spelling", ["float64", "f8", "=f8", "double", "<f8", "d", ">i2", "int16", "?", "B"])
def test_every_numpy_spelling_of_a_numeric_dtype_is_accepted(spelling: str) -> None:
    raw = np.array([0, 1, 1]).astype(np.dtype(spelling))
    body = json.dumps({"__numpy_array__": True, "data": base64.b64encode(raw.tobytes()).decode(), "dtype": spelling,
                       "shape": [3]}).encode()
    np.testing.assert_array_equal(decode_message(body), official_decode(body))


@pytest.mark.parametrize(("dtype", "data"), [("S4", b"abcd"), ("<U1", b"a\0\0\0"), (">c16", b"\0" * 16),
                                             ("O", b"\0" * 8), ("V8", b"\0" * 8), ("(2,)i4", b"\0" * 8),
                                             ("i4,i4", b"\0" * 8), (">M8[s]", b"\0" * 8), ("f16", b"\0" * 16)])
def test_non_numeric_dtypes_are_refused_naming_the_dtype(dtype: str, data: bytes) -> None:
    body = json.dumps({"__numpy_array__": True, "data": base64.b64encode(data).decode(), "dtype": dtype,
                       "shape": [1]}).encode()
    with pytest.raises(WireFormatError, match="array dtype"):
        decode_message(body)


def test_a_big_endian_observation_reaches_the_policy_with_the_same_values() -> None:
    """End to end over a socket, as an official client on a big-endian host would send it."""
    rng = np.random.default_rng(9)
    image = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    vector = rng.uniform(-1, 1, 14).astype(">f8")
    obs = {"observation": {key: {"rgb": image} for key in ("head_camera", "left_camera", "right_camera")},
           "joint_action": {"vector": vector}, "instruction": "stack"}
    policy = RecordingPolicy()
    with RoboFollowTcpServer(policy, port=0).start() as server, \
            socket.create_connection(server.address, timeout=30) as sock:
        send_frame(sock, official_json({"cmd": "predict", "obs": obs}))
        reply = official_decode(bytes(recv_frame(sock, 30) or b"{}"))
    assert np.asarray(reply["res"]).shape == (3, 14)
    received = policy.calls[0][1]
    np.testing.assert_array_equal(received["joint_action"]["vector"], vector)
    assert received["joint_action"]["vector"].dtype == np.float64
    np.testing.assert_array_equal(received["observation"]["head_camera"]["rgb"], image)


def test_a_big_endian_reply_from_an_official_server_decodes_to_the_same_actions() -> None:
    actions = np.linspace(-1, 1, 5 * 14).reshape(5, 14).astype(">f4")
    body = official_json({"res": actions})
    np.testing.assert_array_equal(decode_message(body)["res"], official_decode(body)["res"])


def test_openpi_arrays_in_the_other_byte_order_decode_to_the_same_values() -> None:
    message = {"state": np.arange(14, dtype=">f4"), "x": np.arange(6, dtype=">i8").reshape(2, 3)}
    packed = openpi_msgpack.packb(message)
    ours, theirs = unpackb(packed), openpi_msgpack.unpackb(packed)
    for key in message:
        np.testing.assert_array_equal(ours[key], theirs[key])
        assert ours[key].dtype.isnative and theirs[key].dtype.str == message[key].dtype.str
