"""Both wire encodings, written from the protocol facts, decoded defensively (no pickle anywhere).

RoboFollow TCP: a 4-byte big-endian length N (1 <= N <= 128 MiB), then N bytes of JSON; NumPy
arrays anywhere in the tree are ``{"__numpy_array__": true, "data": <base64 of C-order bytes>,
"dtype": <name>, "shape": [...]}``; Python's default ``json.dumps`` separators.

openpi: msgpack (``use_bin_type``); an array is ``{b"__ndarray__": True, b"data": <bytes>,
b"dtype": dtype.str, b"shape": shape}``, a NumPy scalar ``{b"__npgeneric__": True, b"data",
b"dtype"}``.

Every decoder checks before it allocates: dtype kinds bool/int/uint/float only (at most 8 bytes),
at most ``MAX_NDIM`` dimensions, the shape's byte count equal to the data's, a bounded number of
JSON containers / msgpack values per message. Every failure is a :class:`WireError` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from typing import Any

import msgpack
import numpy as np

MAX_FRAME_BYTES = 128 * 1024 * 1024
MAX_NDIM = 32
NUMERIC_KINDS = frozenset("biuf")
#: JSON objects/arrays in one TCP message (a real observation has ~20); counted before parsing.
MAX_JSON_CONTAINERS = 100_000
#: msgpack values in one openpi message (a real request has ~30); counted before unpacking.
MAX_MSGPACK_OBJECTS = 100_000
_HEADER = struct.Struct(">I")


class WireError(ValueError):
    """A frame or message outside the protocol; the message names the field and the value."""


def wire_dtype(name: Any) -> np.dtype:
    """The dtype a peer named, if it is a plain bool, integer or float of at most 8 bytes."""
    text = name.decode("ascii", "replace") if isinstance(name, bytes) else name
    if not isinstance(text, str) or not 0 < len(text) <= 32:
        raise WireError(f"array dtype: {str(name)[:40]!r} is not a dtype string such as 'float32'")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError) as exc:
        raise WireError(f"array dtype: {text!r} is not a NumPy dtype") from exc
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None \
            or dtype.itemsize > 8:
        raise WireError(f"array dtype: {text!r} is not a bool, integer or float of at most 8 bytes")
    return dtype


def _checked_shape(shape: Any) -> list[int]:
    if (not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise WireError(f"array shape: {str(shape)[:80]} is not a list of at most {MAX_NDIM} non-negative integers")
    return list(shape)


def array_from_bytes(raw: bytes, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    nbytes = dtype.itemsize
    for dim in shape:
        nbytes *= dim
    if nbytes != len(raw):
        raise WireError(f"array data: {len(raw)} bytes do not match shape {shape} of {dtype.str} ({nbytes} bytes)")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


# ------------------------------------------------------------------------------ RoboFollow TCP
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        native = obj.astype(obj.dtype.newbyteorder("="), copy=False)
        return {"__numpy_array__": True,
                "data": base64.b64encode(np.ascontiguousarray(native).tobytes()).decode("ascii"),
                "dtype": native.dtype.name, "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"message: cannot encode {type(obj).__name__} as JSON")


def encode_json(message: Any) -> bytes:
    return json.dumps(message, default=_json_default).encode("ascii")


def _json_array(obj: dict[str, Any]) -> Any:
    if not obj.get("__numpy_array__"):
        return obj
    dtype = wire_dtype(obj.get("dtype"))
    shape = _checked_shape(obj.get("shape"))
    data = obj.get("data")
    if not isinstance(data, str):
        raise WireError(f"array data: expected a base64 string, got {type(data).__name__}")
    nbytes = dtype.itemsize * math.prod(shape)
    if len(data) != 4 * ((nbytes + 2) // 3):  # checked before decoding: a hostile shape costs nothing
        raise WireError(f"array data: {len(data)} base64 characters do not match shape {shape} of {dtype.str}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(f"array data: invalid base64 ({exc})") from exc
    return array_from_bytes(raw, dtype, shape)


def decode_json(body: bytes | bytearray) -> Any:
    """The message of one frame body. Containers are counted on the raw text first (brackets inside
    strings count too, which only errs on the safe side; base64 has none)."""
    containers = body.count(b"{") + body.count(b"[")
    if containers > MAX_JSON_CONTAINERS:
        raise WireError(f"message: more than {MAX_JSON_CONTAINERS:,} JSON objects/arrays (the limit)")
    try:
        return json.loads(body, object_hook=_json_array)
    except WireError:
        raise
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise WireError(f"message: invalid JSON ({str(exc)[:200]})") from exc


def frame(body: bytes) -> bytes:
    if not 1 <= len(body) <= MAX_FRAME_BYTES:
        raise WireError(f"frame length: {len(body)} is outside 1..{MAX_FRAME_BYTES}")
    return _HEADER.pack(len(body)) + body


def frame_length(header: bytes, max_bytes: int) -> int:
    (length,) = _HEADER.unpack(header)
    if not 1 <= length <= max_bytes:
        raise WireError(f"frame length: {length} is outside 1..{max_bytes}")
    return length


# --------------------------------------------------------------------------------------- openpi
def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"message: cannot encode {type(obj).__name__} as msgpack")


def packb(message: Any) -> bytes:
    return msgpack.packb(message, default=_pack_default, use_bin_type=True)


def _unpack_hook(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        data = obj.get(b"data")
        if not isinstance(data, bytes):
            raise WireError(f"array data: expected bytes, got {type(data).__name__}")
        return array_from_bytes(data, wire_dtype(obj.get(b"dtype")), _checked_shape(obj.get(b"shape")))
    if b"__npgeneric__" in obj:
        item = obj.get(b"data")
        if not isinstance(item, bool | int | float):
            raise WireError(f"scalar data: expected a number, got {type(item).__name__}")
        try:
            return wire_dtype(obj.get(b"dtype")).type(item)
        except (OverflowError, ValueError, TypeError) as exc:
            raise WireError(f"scalar data: {item!r} does not fit {obj.get(b'dtype')!r}") from exc
    return obj


def count_msgpack_objects(data: bytes, limit: int = MAX_MSGPACK_OBJECTS) -> int:
    """msgpack values in ``data``, counted by their headers (payloads skipped, nothing built);
    :class:`WireError` past ``limit``. Malformed tails are left to the unpacker."""
    pos, count, end = 0, 0, len(data)
    while pos < end:
        count += 1
        if count > limit:
            raise WireError(f"message: more than {limit:,} msgpack values (the limit)")
        b = data[pos]
        if b <= 0x9F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):  # fixint/fixmap/fixarray/nil/bool: header only
            pos += 1
        elif b <= 0xBF:  # fixstr
            pos += 1 + (b & 0x1F)
        elif b in _FIXED:
            pos += 1 + _FIXED[b]
        elif b in _SIZED:
            width = _SIZED[b]
            pos += 1 + width + int.from_bytes(data[pos + 1:pos + 1 + width], "big")
        elif b in _EXT:
            width = _EXT[b]
            pos += 2 + width + int.from_bytes(data[pos + 1:pos + 1 + width], "big")
        else:
            raise WireError(f"message: invalid msgpack (byte 0x{b:02x} at offset {pos})")
    return count


_FIXED = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,
          0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17, 0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}
_SIZED = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}
_EXT = {0xC7: 1, 0xC8: 2, 0xC9: 4}


def unpackb(data: bytes) -> Any:
    count_msgpack_objects(data)
    try:
        return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False, strict_map_key=False)
    except WireError:
        raise
    except (RecursionError, ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as exc:
        raise WireError(f"message: invalid msgpack ({type(exc).__name__}: {str(exc)[:200]})") from exc
