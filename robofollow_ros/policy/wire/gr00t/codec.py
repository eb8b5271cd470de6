"""GR00T's message encoding: one msgpack frame per message, NumPy arrays in either of two forms.

Facts (NVIDIA/Isaac-GR00T ``gr00t/policy/server_client.py`` N1.6 and ``gr00t/eval/service.py`` N1.5,
``MsgSerializer``): an array is ``{"__ndarray_class__": True, "as_npy": <np.save bytes, allow_pickle=False>}``
and a ``ModalityConfig`` ``{"__ModalityConfig_class__": True, "as_json": <dict (N1.6) or JSON text (N1.5)>}``.
Some N1.7 servers (third-party ones; NVIDIA's own N1.7 ``server_client.py`` keeps ``.npy``) use
msgpack-numpy instead (lebedov/msgpack-numpy 0.4.8 ``encode``): ``{b"nd": True, b"type":
dtype.str, b"kind": b"", b"shape": [...], b"data": <raw bytes>}`` and ``{b"nd": False, ...}`` for a scalar.
Both are decoded; :func:`packb` writes either (``array_form``), so a server can answer in the form
the request came in.

Defences: the ``.npy`` header is parsed here, never with ``np.load`` (which allocates what a hostile
shape asks for before it reads); only format 1.0/2.0 headers, numeric and bool dtypes
(:data:`~robofollow_ros.policy.wire.common.NUMERIC_KINDS`: no object, void, string or complex
arrays, so nothing can unpickle), at most :data:`MAX_NDIM` dimensions, and the payload length must
equal the shape's byte count; arrays are read-only views of the received bytes. msgpack-numpy's
``kind`` ``O`` (a pickle) and ``V`` (structured) are refused. The number of msgpack values one
message may build is bounded while unpacking (the list and map hooks count; past
:data:`GR00T_MAX_OBJECTS` the message is refused), and strings and containers have per-item limits.
Every malformed input is a :class:`~robofollow_ros.policy.wire.common.WireFormatError` naming the field.
"""

from __future__ import annotations

import ast
import io
import json
from typing import Any

import msgpack
import numpy as np

from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError, checked_dtype

#: Largest message either side accepts by default (ZMQ_MAXMSGSIZE): about 60 times a three-camera
#: 224×224 request, and eight times three raw 640×480 frames.
GR00T_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Most msgpack values (containers' items) one message may build; a real request holds about 40.
GR00T_MAX_OBJECTS = 100_000
#: Longest ``.npy`` header accepted (NumPy's own default limit).
MAX_NPY_HEADER = 10_000
ARRAY_FORMS = ("npy", "msgpack-numpy")
_NPY_MAGIC = b"\x93NUMPY"


# ---------------------------------------------------------------------------------------------- encode
def _npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def _encoder(array_form: str) -> Any:
    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray | np.generic):
            if obj.dtype.kind not in NUMERIC_KINDS:
                raise WireFormatError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
            if array_form == "msgpack-numpy":
                if isinstance(obj, np.generic):
                    return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
                return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": list(obj.shape),
                        b"data": np.ascontiguousarray(obj).tobytes()}
            return {"__ndarray_class__": True, "as_npy": _npy_bytes(np.asarray(obj))}
        raise TypeError(f"message: cannot encode {type(obj).__name__} as msgpack")
    return default


_DEFAULTS = {form: _encoder(form) for form in ARRAY_FORMS}


def packb(message: Any, array_form: str = "npy") -> bytes:
    """msgpack bytes of ``message``; arrays as ``.npy`` maps (GR00T N1.5/N1.6/N1.7) or msgpack-numpy maps."""
    if array_form not in _DEFAULTS:
        raise ValueError(f"array_form: {array_form!r} is not one of {', '.join(ARRAY_FORMS)}")
    packed: bytes = msgpack.packb(message, default=_DEFAULTS[array_form], use_bin_type=True)
    return packed


# ---------------------------------------------------------------------------------------------- decode
def _checked_dtype(text: Any, field: str) -> np.dtype:
    return checked_dtype(text, field)


def _checked_shape(shape: Any, field: str) -> tuple[int, ...]:
    if not isinstance(shape, list | tuple) or len(shape) > MAX_NDIM \
            or not all(type(n) is int and n >= 0 for n in shape):
        raise WireFormatError(f"{field}: {str(shape)[:80]} is not a list of at most {MAX_NDIM} integers >= 0")
    return tuple(shape)


def _view(data: bytes | memoryview, shape: tuple[int, ...], dtype: np.dtype, field: str,
          fortran: bool = False) -> np.ndarray:
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(data):
        raise WireFormatError(f"{field}: {len(data)} bytes do not match shape {list(shape)} of {dtype.str}")
    array: np.ndarray = np.ndarray(shape, dtype=dtype, buffer=data, order="F" if fortran else "C")
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    array.flags.writeable = False
    return array


def decode_npy(blob: Any) -> np.ndarray:
    """An array from ``np.save`` bytes, header parsed here (format 1.0/2.0), payload viewed, not copied."""
    field = "array as_npy"
    if not isinstance(blob, bytes):
        raise WireFormatError(f"{field}: expected bytes, got {type(blob).__name__}")
    if len(blob) < 10 or not blob.startswith(_NPY_MAGIC):
        raise WireFormatError(f"{field}: not .npy data (no magic string)")
    major, minor = blob[6], blob[7]
    if (major, minor) == (1, 0):
        size, start = int.from_bytes(blob[8:10], "little"), 10
    elif (major, minor) == (2, 0):
        size, start = int.from_bytes(blob[8:12], "little"), 12
    else:
        raise WireFormatError(f"{field}: .npy format {major}.{minor} is not accepted (1.0 and 2.0 only)")
    if size > MAX_NPY_HEADER or start + size > len(blob):
        raise WireFormatError(f"{field}: .npy header of {size} bytes is too long or truncated")
    try:
        header = ast.literal_eval(blob[start:start + size].decode("latin1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise WireFormatError(f"{field}: .npy header is not a literal dict ({type(exc).__name__})") from exc
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise WireFormatError(f"{field}: .npy header {str(header)[:80]} lacks descr/fortran_order/shape")
    dtype = _checked_dtype(header["descr"], f"{field} descr")
    shape = _checked_shape(header["shape"], f"{field} shape")
    return _view(memoryview(blob)[start + size:], shape, dtype, field, fortran=header["fortran_order"] is True)


def _decode_msgpack_numpy(obj: dict[Any, Any]) -> Any:
    field = "array (msgpack-numpy)"
    kind = obj.get(b"kind", b"")
    if kind not in (b"", ""):
        raise WireFormatError(f"{field}: kind {kind!r} is refused (object arrays are pickles, structured "
                              "arrays are not policy data)")
    dtype = _checked_dtype(obj.get(b"type"), f"{field} type")
    data = obj.get(b"data")
    if not isinstance(data, bytes):
        raise WireFormatError(f"{field} data: expected bytes, got {type(data).__name__}")
    if obj[b"nd"] is True:
        return _view(data, _checked_shape(obj.get(b"shape"), f"{field} shape"), dtype, field)
    return _view(data, (), dtype, field)[()]


def _modality_config(obj: dict[Any, Any]) -> Any:
    config = obj.get("as_json")
    if isinstance(config, str | bytes):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError) as exc:
            raise WireFormatError(f"ModalityConfig as_json: not JSON ({type(exc).__name__})") from exc
    if not isinstance(config, dict):
        raise WireFormatError(f"ModalityConfig as_json: expected an object, got {type(config).__name__}")
    return config


def _object_hook(obj: dict[Any, Any], forms: set[str] | None = None) -> Any:
    if "__ndarray_class__" in obj:
        if forms is not None:
            forms.add("npy")
        return decode_npy(obj.get("as_npy"))
    if b"nd" in obj:
        if forms is not None:
            forms.add("msgpack-numpy")
        return _decode_msgpack_numpy(obj)
    if "__ModalityConfig_class__" in obj:
        return _modality_config(obj)
    return obj


def unpackb(data: bytes | memoryview, max_objects: int = GR00T_MAX_OBJECTS, max_bytes: int = GR00T_MAX_MESSAGE_BYTES,
            forms: set[str] | None = None) -> Any:
    """The message in one msgpack frame; :class:`WireFormatError` on anything malformed or too large.
    ``forms``, when given, collects the array forms the message used (a server answers in the same).

    Containers are counted as they are built (their items added up); past ``max_objects`` unpacking
    stops, so a message of millions of empty maps costs at most ``max_objects`` of them.
    """
    if len(data) > max_bytes:
        raise WireFormatError(f"message: {len(data):,} bytes exceed the limit of {max_bytes:,}")
    built = [0]

    def count(n: int) -> None:
        built[0] += n + 1
        if built[0] > max_objects:
            raise WireFormatError(f"message: more than {max_objects:,} msgpack values (the limit)")

    def on_list(items: list[Any]) -> list[Any]:
        count(len(items))
        return items

    def on_map(obj: dict[Any, Any]) -> Any:
        count(2 * len(obj))
        return _object_hook(obj, forms)

    try:
        return msgpack.unpackb(data, object_hook=on_map, list_hook=on_list, raw=False,
                               max_str_len=1 << 20, max_array_len=max_objects, max_map_len=max_objects,
                               max_ext_len=0)
    except WireFormatError:
        raise
    except RecursionError as exc:
        raise WireFormatError("message: msgpack nested too deeply") from exc
    except (ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as exc:
        raise WireFormatError(f"message: invalid msgpack ({type(exc).__name__}: {str(exc)[:200]})") from exc
