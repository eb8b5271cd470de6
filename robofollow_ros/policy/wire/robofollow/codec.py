"""RoboFollow's TCP messages (spec section f): JSON with base64 NumPy arrays.

Framing (a 4-byte big-endian length, then the JSON body) lives in ``framing.py``. Arrays
anywhere in the tree become ``{"__numpy_array__": true, "data": <base64 of the raw C-order bytes>,
"dtype": <name>, "shape": [...]}``. The encoder keeps Python's ``json`` defaults (ASCII-escaped,
``", "`` and ``": "`` separators) so a reference peer sees byte-identical text.

The decoder is the security boundary of the TCP server, so it never trusts a field: the dtype must
be a numeric or bool dtype (either byte order, as the official decoder accepts), the shape's byte
count must match the base64 length *before* anything is decoded or allocated, the JSON's shape is
bounded (:data:`WIRE_JSON_LIMITS`), and every failure is a
:class:`~robofollow_ros.policy.wire.common.WireFormatError` naming the field and value.
"""

from __future__ import annotations

import binascii
import json
import secrets
import warnings
from typing import Any

import numpy as np

from robofollow_ros.jsonlimits import JsonLimitError, JsonLimits, loads_bounded
from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError

#: Largest frame body either side accepts (spec: 134,217,728 bytes).
MAX_FRAME_BYTES = 128 * 1024 * 1024
#: dtype names our encoder writes (native order); the decoder also takes other spellings and byte orders.
ALLOWED_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64"]
)
#: Bounds on one message's JSON. A real observation has ~20 containers and ~60 commas; these leave
#: room for arrays sent as plain JSON lists (a 640×480 RGB image as lists fits) while keeping the
#: Python objects a hostile message can create to a few hundred MB. NaN/Infinity are accepted, as
#: Python's (and the official) encoder writes them.
WIRE_JSON_LIMITS = JsonLimits(max_bytes=128 * 1024 * 1024, max_depth=64, max_containers=1_000_000,
                              max_commas=2_000_000, max_int_digits=64, allow_nan=True)
_DTYPES: dict[str, np.dtype] = {}


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


def wire_dtype(name: Any) -> np.dtype:
    """The dtype a peer named, accepted as the official ``np.dtype(name)`` accepts it, numeric kinds only.

    The official encoder writes ``str(dtype)``: ``'float32'`` for native arrays but ``'>f8'``,
    ``'<i4'``... for arrays in the other byte order, and any NumPy spelling (``'f8'``, ``'double'``,
    ``'?'``) parses there. We accept every spelling NumPy parses to a plain bool, integer or float
    dtype of at most 8 bytes, in either byte order; strings, objects, records, complex, datetimes and
    ``float128`` are refused (the official server would hand those to the policy or fail inside NumPy).
    """
    cached = _DTYPES.get(name) if isinstance(name, str) else None
    if cached is not None:
        return cached
    if not isinstance(name, str) or not 0 < len(name) <= 32:
        raise WireFormatError(f"array dtype: {_short(name)} is not a dtype string such as 'float32' or '>f8'")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # deprecated spellings are refused, not half-accepted
            dtype = np.dtype(name)
    except (TypeError, ValueError, SyntaxError, Warning) as exc:
        raise WireFormatError(f"array dtype: {name!r} is not a NumPy dtype ({_short(str(exc))})") from exc
    if (dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None
            or dtype.itemsize > 8):
        raise WireFormatError(f"array dtype: {name!r} is not a bool, integer or float of at most 8 bytes "
                              f"(e.g. {sorted(ALLOWED_DTYPES)}, in either byte order)")
    if len(_DTYPES) < 256:  # only valid dtypes are cached, and only so many
        _DTYPES[name] = dtype
    return dtype


def decode_array(obj: dict[str, Any], max_bytes: int = MAX_FRAME_BYTES) -> np.ndarray:
    """A read-only array from a ``__numpy_array__`` object, validated before allocation.

    Arrays that arrive in the non-native byte order (``'>f8'`` on x86) hold the same values as the
    official decoder's ``np.frombuffer`` view, converted to native order so that policies (torch,
    JAX) can use them directly.
    """
    dtype = wire_dtype(obj.get("dtype"))
    shape = obj.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise WireFormatError(f"array shape: {_short(shape)} is not a list of at most {MAX_NDIM} non-negative integers")
    data = obj.get("data")
    if not isinstance(data, str):
        raise WireFormatError(f"array data: expected a base64 string, got {type(data).__name__}")
    nbytes = dtype.itemsize
    for dim in shape:
        nbytes *= dim  # Python ints: a hostile shape cannot overflow
    if nbytes > max_bytes:
        raise WireFormatError(f"array shape: {shape} of {dtype.str} needs {nbytes} bytes; the limit is {max_bytes}")
    expected_chars = 4 * ((nbytes + 2) // 3)
    if len(data) != expected_chars:
        raise WireFormatError(f"array data: {len(data)} base64 characters do not match shape {shape} of "
                              f"{obj.get('dtype')} ({nbytes} bytes, {expected_chars} characters)")
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise WireFormatError(f"array data: invalid base64 ({exc})") from exc
    if len(raw) != nbytes:
        raise WireFormatError(f"array data: {len(raw)} bytes do not match shape {shape} of {obj.get('dtype')}")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
        array.flags.writeable = False
    return array


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


def decode_message(body: bytes | bytearray | memoryview, counts: tuple[int, int] | None = None) -> Any:
    """The message tree of one frame body; raises :class:`WireFormatError` on any malformed input.

    Parsed by :func:`~robofollow_ros.jsonlimits.loads_bounded` within :data:`WIRE_JSON_LIMITS`, so
    the *shape* of a message cannot cost more memory than its size: 127 MiB of ``[{},{},...]`` is
    refused by counting, before one object is built. ``counts``: the body's
    :func:`~robofollow_ros.jsonlimits.structure_counts` if the caller has them already.
    """
    try:
        return loads_bounded(body if isinstance(body, bytes | bytearray) else bytes(body), WIRE_JSON_LIMITS,
                             what="message", object_hook=_object_hook, counts=counts)
    except WireFormatError:
        raise
    except JsonLimitError as exc:
        raise WireFormatError(str(exc)) from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise WireFormatError(f"message: invalid JSON ({_short(str(exc), 200)})") from exc
