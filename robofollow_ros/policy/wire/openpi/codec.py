"""openpi's message encoding: msgpack with NumPy arrays as ``__ndarray__`` maps (wire facts in
peers-bridge.md section 1.1), decoded defensively.

An array is ``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": dtype.str, b"shape": shape}``
and a NumPy scalar ``{b"__npgeneric__": True, b"data": item, b"dtype": dtype.str}``. The decoder
accepts only numeric and boolean dtypes, checks that the shape's byte count equals the data length
(so a hostile shape cannot allocate anything) and turns every malformed input into a
:class:`~robofollow_ros.policy.wire.common.WireFormatError`. Nothing here can unpickle.

The bounds cost (next to) nothing (issue 23): a message can hold no more msgpack values than it has
bytes, so one no longer than the object limit is not counted at all; a longer one, or a server that
charges the count to its memory budget, counts by headers with a table, skipping payloads.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack
import numpy as np

from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError, checked_dtype

#: Largest websocket message either openpi side accepts by default: about 70 times a 3-camera
#: 224×224 request (and 12 times three raw 640×480 frames).
OPENPI_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Most msgpack objects (containers and scalars) one message may hold. msgpack can turn every byte
#: into one Python object (32 MiB of empty maps would be ~2 GiB of dicts); a real request holds
#: about 30, and a million keep a hostile message to tens of MB. Counted before unpacking.
OPENPI_MAX_OBJECTS = 1_000_000


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireFormatError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        return {
            b"__ndarray__": True,
            # a memoryview of a C-contiguous array packs without an intermediate copy
            b"data": obj.data if obj.flags.c_contiguous else obj.tobytes(),
            b"dtype": obj.dtype.str,
            b"shape": obj.shape,
        }
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireFormatError(f"scalar dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"message: cannot encode {type(obj).__name__} as msgpack")


#: A thread's packer is kept between calls (``msgpack.packb`` builds one, buffer and all, per call);
#: after a message larger than this it is dropped, so no thread keeps a large buffer (which would
#: also change how the C allocator serves everything else).
_KEEP_PACKER_BELOW = 64 * 1024
_PACKERS = threading.local()


def packb(message: Any) -> bytes:
    """msgpack bytes of ``message`` with arrays as ``__ndarray__`` maps."""
    packer = getattr(_PACKERS, "packer", None)
    if packer is None:
        packer = msgpack.Packer(default=_pack_default, use_bin_type=True)
    else:
        _PACKERS.packer = None  # a packer is used by one call at a time, even from a nested one
    packed: bytes = packer.pack(message)  # on an error this packer is simply not kept
    if len(packed) < _KEEP_PACKER_BELOW:
        _PACKERS.packer = packer
    return packed


_DTYPE_CACHE: dict[Any, np.dtype] = {}


def _dtype(value: Any) -> np.dtype:
    """``common.checked_dtype``, remembered here too for the fast path of ``_unpack_hook``."""
    dtype = checked_dtype(value)
    if dtype.isnative and isinstance(value, str | bytes) and len(_DTYPE_CACHE) < 256:
        _DTYPE_CACHE[value] = dtype
    return dtype


def _unpack_hook(obj: dict[Any, Any]) -> Any:
    if b"__ndarray__" in obj:
        try:  # fast path: a well-formed array of a dtype seen before; anything odd gets the full checks
            data, shape = obj[b"data"], obj[b"shape"]
            if type(data) is bytes and type(shape) is list:
                array: np.ndarray = np.ndarray(shape=shape, dtype=_DTYPE_CACHE[obj[b"dtype"]], buffer=data)
                if array.nbytes == len(data):
                    return array
        except Exception:  # the checked path below names the problem
            pass
        return _checked_array(obj)
    if b"__npgeneric__" in obj:
        dtype = _dtype(obj.get(b"dtype"))
        item = obj.get(b"data")
        if not isinstance(item, bool | int | float):
            raise WireFormatError(f"scalar data: expected a number, got {type(item).__name__}")
        try:
            return dtype.type(item)
        except (OverflowError, ValueError, TypeError) as exc:
            raise WireFormatError(f"scalar data: {item!r} does not fit {dtype.str}") from exc
    return obj


def _checked_array(obj: dict[Any, Any]) -> np.ndarray:
    """Validate every field of an ``__ndarray__`` map and raise a :class:`WireFormatError` naming the bad one."""
    dtype = _dtype(obj.get(b"dtype"))
    shape = obj.get(b"shape")
    data = obj.get(b"data")
    if type(shape) is not list or len(shape) > MAX_NDIM:
        raise WireFormatError(f"array shape: {str(shape)[:80]} is not a list of at most {MAX_NDIM} integers")
    if not isinstance(data, bytes):
        raise WireFormatError(f"array data: expected bytes, got {type(data).__name__}")
    try:
        # A view of the received bytes: NumPy checks the dims (integers >= 0; a bool counts as
        # 0/1) and that the buffer is large enough, and never allocates: a hostile shape costs nothing.
        checked: np.ndarray = np.ndarray(shape=shape, dtype=dtype, buffer=data)
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireFormatError(f"array data: {len(data)} bytes do not match shape {str(shape)[:80]} of "
                              f"{dtype.str} ({exc})") from exc
    if checked.nbytes != len(data):  # NumPy accepts a larger buffer; we want exactly the payload
        raise WireFormatError(f"array data: {len(data)} bytes do not match shape {str(shape)[:80]} of {dtype.str}")
    if not dtype.isnative:  # '>f4' from a big-endian peer: same values, in the order policies can use
        checked = checked.astype(dtype.newbyteorder("="))
        checked.flags.writeable = False
    return checked


def _header_table() -> tuple[int, ...]:
    """For each first byte of a msgpack value: how to step over it (see :func:`check_object_count`).

    ``n >= 0``: the header and ``n`` more bytes (fixed-size values; container headers, whose
    elements follow as values). ``-w`` (w = 1, 2, 4): bin/str whose length field is ``w`` bytes.
    ``-8 - w``: ext, a length field of ``w`` bytes, then a type byte. :data:`_INVALID`: 0xc1.
    """
    table = [0] * 256  # fixint, fixmap, fixarray, negative fixint: header only
    for byte in range(0xA0, 0xC0):  # fixstr
        table[byte] = byte & 0x1F
    fixed = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2,
             0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
             0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}  # array16/32, map16/32: the count only
    for byte, size in fixed.items():
        table[byte] = size
    for byte, width in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():
        table[byte] = -width
    for byte, width in {0xC7: 1, 0xC8: 2, 0xC9: 4}.items():
        table[byte] = -8 - width
    table[0xC1] = _INVALID
    return tuple(table)


_INVALID = -100
_HEADERS = _header_table()


def check_object_count(data: bytes | bytearray | memoryview, limit: int = OPENPI_MAX_OBJECTS) -> int:
    """Count the msgpack values in ``data`` by their headers (payloads are skipped, nothing is built).

    Raises :class:`WireFormatError` past ``limit``, so the cost of a hostile message is bounded by
    the limit, not by its length. Truncation and other malformations are left to the unpacker.
    """
    view = data if isinstance(data, bytes | bytearray) else memoryview(data).cast("B")
    end, pos, count = len(view), 0, 0
    headers = _HEADERS
    while pos < end:
        count += 1
        if count > limit:
            raise WireFormatError(f"message: more than {limit:,} msgpack objects (the limit)")
        step = headers[view[pos]]
        if step >= 0:
            pos += 1 + step
        elif step > -8:  # bin, str: length field, payload
            pos += 1 - step + int.from_bytes(view[pos + 1:pos + 1 - step], "big")
        elif step > _INVALID:  # ext: length field, type byte, payload
            width = -8 - step
            pos += 2 + width + int.from_bytes(view[pos + 1:pos + 1 + width], "big")
        else:
            raise WireFormatError(f"message: invalid msgpack (byte 0x{view[pos]:02x} at offset {pos})")
    return count


def unpackb(data: bytes | bytearray | memoryview, max_objects: int = OPENPI_MAX_OBJECTS,
            counted: bool = False) -> Any:
    """The message in one msgpack frame; raises :class:`WireFormatError` on anything malformed.

    At most ``max_objects`` values (:func:`check_object_count`), counted before unpacking unless the
    caller already did (``counted``: a server that charged the count to its memory budget) or the
    message is too short to exceed it (every value takes at least one byte).
    """
    if not counted and len(data) > max_objects:
        check_object_count(data, max_objects)
    try:
        return msgpack.unpackb(data, object_hook=_unpack_hook, raw=False)
    except WireFormatError:
        raise
    except RecursionError as exc:
        raise WireFormatError("message: msgpack nested too deeply") from exc
    except (ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as exc:
        raise WireFormatError(f"message: invalid msgpack ({type(exc).__name__}: {str(exc)[:200]})") from exc
