"""RoboFollow's TCP wire format (spec section f): length-prefixed JSON with base64 NumPy arrays.

Framing: a 4-byte unsigned big-endian length ``N`` (1 ≤ N ≤ 128 MiB), then ``N`` bytes of UTF-8
JSON. Arrays anywhere in the tree become ``{"__numpy_array__": true, "data": <base64 of the raw
C-order bytes>, "dtype": <name>, "shape": [...]}``. The encoder keeps Python's ``json`` defaults
(ASCII-escaped, ``", "`` and ``": "`` separators) so a reference peer sees byte-identical text.

The decoder is the security boundary of the TCP server, so it never trusts a field: the dtype must
be a plain numeric name, the shape's byte count must match the base64 length *before* anything is
decoded or allocated, and every failure is a :class:`WireFormatError` naming the field and value.
"""

from __future__ import annotations

import binascii
import json
import secrets
import socket
import struct
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import PolicyError

#: Largest frame body either side accepts (spec: 134,217,728 bytes).
MAX_FRAME_BYTES = 128 * 1024 * 1024
_HEADER = struct.Struct(">I")
#: dtype names a peer may send; anything else (object, void, strings, complex) is rejected.
ALLOWED_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64"]
)
MAX_NDIM = 32


class WireFormatError(PolicyError, ValueError):
    """A frame or message that does not follow the protocol; the peer, not the policy, is at fault."""


class PeerClosedError(ConnectionError):
    """The peer closed the connection (cleanly between frames, or in the middle of one)."""


# --------------------------------------------------------------------------------------- arrays
def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return encode_array(obj)
    if isinstance(obj, np.generic):
        return obj.item()  # NumPy scalars travel as plain JSON numbers and booleans
    raise TypeError(f"message: cannot encode {type(obj).__name__} as JSON")


def encode_array(array: np.ndarray, inline: bool = True) -> dict[str, Any]:
    """The ``__numpy_array__`` object for one array (native byte order, C-order bytes).

    ``inline=False`` leaves ``data`` as base64 *bytes* for :func:`encode_message` to splice in.
    """
    if array.dtype.name not in ALLOWED_DTYPES:
        raise WireFormatError(f"array dtype: {array.dtype} cannot be sent; allowed: {sorted(ALLOWED_DTYPES)}")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    data = binascii.b2a_base64(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data, newline=False)
    return {
        "__numpy_array__": True,
        "data": data if not inline else data.decode("ascii"),
        "dtype": array.dtype.name,
        "shape": list(array.shape),
    }


def decode_array(obj: dict[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> np.ndarray:
    """A read-only array from a ``__numpy_array__`` object, validated before allocation."""
    dtype_name = obj.get("dtype")
    if not isinstance(dtype_name, str) or dtype_name not in ALLOWED_DTYPES:
        raise WireFormatError(f"array dtype: {dtype_name!r} is not one of {sorted(ALLOWED_DTYPES)}")
    shape = obj.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise WireFormatError(f"array shape: {_short(shape)} is not a list of at most {MAX_NDIM} non-negative integers")
    data = obj.get("data")
    if not isinstance(data, str):
        raise WireFormatError(f"array data: expected a base64 string, got {type(data).__name__}")
    dtype = np.dtype(dtype_name)
    nbytes = dtype.itemsize
    for dim in shape:
        nbytes *= dim  # Python ints: a hostile shape cannot overflow
    if nbytes > max_bytes:
        raise WireFormatError(f"array shape: {shape} of {dtype_name} needs {nbytes} bytes; the limit is {max_bytes}")
    expected_chars = 4 * ((nbytes + 2) // 3)
    if len(data) != expected_chars:
        raise WireFormatError(f"array data: {len(data)} base64 characters do not match shape {shape} of "
                              f"{dtype_name} ({nbytes} bytes, {expected_chars} characters)")
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise WireFormatError(f"array data: invalid base64 ({exc})") from exc
    if len(raw) != nbytes:
        raise WireFormatError(f"array data: {len(raw)} bytes do not match shape {shape} of {dtype_name}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _object_hook(obj: dict[str, Any]) -> Any:
    return decode_array(obj) if obj.get("__numpy_array__") else obj


# -------------------------------------------------------------------------------------- messages
def encode_message(message: Any) -> bytes:
    """JSON bytes of a message, arrays encoded, with Python's default separators and ASCII escaping.

    The bytes equal ``json.dumps(message, default=...)`` with base64 inlined, but the base64 text is
    spliced in afterwards: ``json.dumps`` would otherwise scan every character of ~1 MB of image
    data for escapes that base64 never contains (3-4 ms per observation). Each array's data is
    first replaced by a placeholder carrying a random 128-bit nonce, so no user string can collide.
    """
    nonce = secrets.token_hex(16)
    blobs: list[bytes] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            encoded = encode_array(obj, inline=False)
            blobs.append(encoded["data"])
            encoded["data"] = f"{nonce}:{len(blobs) - 1}"
            return encoded
        return _encode_default(obj)

    skeleton = json.dumps(message, default=default).encode("ascii")
    if not blobs:
        return skeleton
    pieces: list[bytes] = []
    rest = skeleton
    for index, blob in enumerate(blobs):  # placeholders appear in the order default() made them
        before, _, rest = rest.partition(f"{nonce}:{index}".encode("ascii"))
        pieces += (before, blob)
    pieces.append(rest)
    return b"".join(pieces)


def decode_message(body: bytes | bytearray | memoryview) -> Any:
    """The message tree of one frame body; raises :class:`WireFormatError` on any malformed input."""
    try:
        # Decode first: json.loads(bytes) uses the slow 'surrogatepass' path (~1 ms per MB).
        return json.loads(bytes(body).decode("utf-8"), object_hook=_object_hook)
    except WireFormatError:
        raise
    except RecursionError as exc:
        raise WireFormatError("message: JSON nested too deeply") from exc
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise WireFormatError(f"message: invalid JSON ({_short(str(exc), 200)})") from exc


# ---------------------------------------------------------------------------------------- frames
def check_frame_length(length: int) -> None:
    if not 1 <= length <= MAX_FRAME_BYTES:
        raise WireFormatError(f"frame length: {length} is outside 1..{MAX_FRAME_BYTES}")


def send_frame(sock: socket.socket, body: bytes) -> None:
    """Send one frame. Prefix and body go in two writes, as the reference client does."""
    check_frame_length(len(body))
    sock.sendall(_HEADER.pack(len(body)))
    sock.sendall(body)


def _recv_exact(sock: socket.socket, size: int, what: str) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise PeerClosedError(f"peer closed the connection after {got} of {size} bytes of the {what}")
        got += n
    return buffer


def recv_frame(sock: socket.socket, idle_timeout_s: float | None = None,
               frame_timeout_s: float | None = None) -> bytearray | None:
    """Read one frame body, or return ``None`` when the peer closed cleanly before a new frame.

    ``idle_timeout_s`` bounds the wait for the first byte of the header; ``frame_timeout_s`` (if
    given) then bounds every further read of the frame. The length is validated before the body
    is allocated.
    """
    sock.settimeout(idle_timeout_s)
    first = sock.recv(_HEADER.size)
    if not first:
        return None
    if frame_timeout_s is not None:
        sock.settimeout(frame_timeout_s)
    header = first if len(first) == _HEADER.size else first + _recv_exact(sock, _HEADER.size - len(first), "header")
    (length,) = _HEADER.unpack(bytes(header))
    check_frame_length(length)
    return _recv_exact(sock, length, "body")
