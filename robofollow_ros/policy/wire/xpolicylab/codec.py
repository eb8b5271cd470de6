"""XPolicyLab's frame encoding: msgpack with NumPy arrays in msgpack-numpy's form, decoded defensively.

XPolicyLab (``client_server/ws/protocol/codec.py``) packs with ``use_bin_type=True`` and
``msgpack_numpy.encode``: an array is ``{b"nd": True, b"type": dtype.str, b"kind": b"", b"shape":
shape, b"data": raw bytes}`` and a NumPy scalar ``{b"nd": False, b"type": dtype.str, b"data": raw
bytes}`` (the keys travel as msgpack bin, so they decode as ``bytes``). msgpack-numpy itself
*unpickles* ``kind == b"O"`` arrays; XPolicyLab refuses object dtypes on both sides and so do we,
without importing msgpack-numpy at all: the decoder accepts only numeric and boolean dtypes
(:data:`~robofollow_ros.policy.wire.common.NUMERIC_KINDS`), checks that the shape's byte count equals
the data length, refuses structured (``V``), object (``O``) and complex payloads, and counts the
maps and lists a frame builds (at most ``max_objects``), so a small hostile frame cannot become
gigabytes of Python objects. Every malformed input is a
:class:`~robofollow_ros.policy.wire.common.WireFormatError`.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError

#: Largest frame the client sends (three raw 480×640 frames are ~2.8 MB).
XPOLICYLAB_MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: Largest frame the client accepts: replies are acks and action chunks (a 50×14 chunk is ~3 kB,
#: as a list of per-step dicts ~20 kB); 4 MiB leaves two orders of magnitude.
XPOLICYLAB_MAX_REPLY_BYTES = 4 * 1024 * 1024
#: Most maps plus lists one frame may build (a reply holds tens to a few thousand).
XPOLICYLAB_MAX_OBJECTS = 100_000


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireFormatError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": obj.shape,
                b"data": obj.data if obj.flags.c_contiguous else obj.tobytes()}
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireFormatError(f"scalar dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    raise WireFormatError(f"value: {type(obj).__name__} cannot be sent over the XPolicyLab wire")


def packb(message: Any) -> bytes:
    """One binary frame, as XPolicyLab's ``encode_frame`` writes it."""
    return msgpack.packb(message, default=_pack_default, use_bin_type=True)


def _dtype(value: Any) -> np.dtype:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        raise WireFormatError(f"array type: expected a dtype string, got {type(value).__name__}")
    try:
        dtype = np.dtype(value)
    except TypeError as exc:
        raise WireFormatError(f"array type: {value[:40]!r} is not a dtype") from exc
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise WireFormatError(f"array type: {dtype} is refused (numeric and bool only)")
    return dtype


def _decode_nd(obj: dict[Any, Any]) -> Any:
    data = obj.get(b"data")
    if not isinstance(data, bytes):
        raise WireFormatError("array data: expected bytes")
    kind = obj.get(b"kind", b"")
    if kind not in (b"", ""):
        raise WireFormatError(f"array kind: {kind!r} is refused (object and structured arrays never decode)")
    dtype = _dtype(obj.get(b"type"))
    if obj[b"nd"] is not True:
        if len(data) != dtype.itemsize:
            raise WireFormatError(f"scalar data: {len(data)} bytes for dtype {dtype}")
        return np.frombuffer(data, dtype=dtype)[0]
    shape = obj.get(b"shape")
    if not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise WireFormatError(f"array shape: {str(shape)[:80]} is not a list of at most {MAX_NDIM} sizes")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(data):
        raise WireFormatError(f"array data: {len(data)} bytes do not fill shape {tuple(shape)} of {dtype}")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


class _Hooks:
    """Counts the containers one frame builds and turns ``nd`` maps into arrays."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def _tick(self) -> None:
        self.count += 1
        if self.count > self.limit:
            raise WireFormatError(f"frame: more than {self.limit:,} maps and lists (the limit)")

    def list_hook(self, value: list[Any]) -> list[Any]:
        self._tick()
        return value

    def object_hook(self, obj: dict[Any, Any]) -> Any:
        self._tick()
        if b"nd" in obj:
            return _decode_nd(obj)
        if b"complex" in obj:
            raise WireFormatError("complex value: refused (numeric and bool only)")
        return obj


def unpackb(data: bytes, max_objects: int = XPOLICYLAB_MAX_OBJECTS) -> Any:
    """The message in one binary frame; raises :class:`WireFormatError` on anything malformed."""
    hooks = _Hooks(max_objects)
    try:
        return msgpack.unpackb(data, raw=False, object_hook=hooks.object_hook,
                               list_hook=hooks.list_hook)
    except WireFormatError:
        raise
    except RecursionError as exc:
        raise WireFormatError("frame: msgpack nested too deeply") from exc
    except (ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as exc:
        raise WireFormatError(f"frame: invalid msgpack ({type(exc).__name__}: {str(exc)[:200]})") from exc
