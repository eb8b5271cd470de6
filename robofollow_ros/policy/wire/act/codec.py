"""json_numpy, the encoding of the ``/act`` family, written here and decoded defensively.

json_numpy (PyPI ``json-numpy``, the peers' codec) writes a NumPy array or scalar as the JSON object
``{"__numpy__": base64(raw C-order bytes), "dtype": descr, "shape": [...]}``; ``shape == []`` is a
scalar. ``descr`` is ``numpy.lib.format.dtype_to_descr``: ``"<f4"``, ``"|u1"`` for the dtypes we allow.

Peers use it in three ways, all handled here:

- **inline** (openvla-oft, GR00T: ``json_numpy.patch()`` then ``requests.post(url, json=obs)``): the
  maps sit in the request body's JSON;
- **double encoded** (openvla-oft, GR00T): the body is ``{"encoded": "<json_numpy text>"}`` and the
  reply is a JSON *string* holding json_numpy text (:func:`encode_body` / :func:`decode_body`);
- **per field** (X-VLA's README): each array is ``json_numpy.dumps(array)``, a JSON string inside
  a plain JSON body (:func:`field_string`; :func:`decode_value` opens such strings on request).

Decoding never unpickles and accepts only the dtype kinds of
:data:`~robofollow_ros.policy.wire.common.NUMERIC_KINDS` (no object, string or structured dtypes), at
most :data:`~robofollow_ros.policy.wire.common.MAX_NDIM` dimensions, and exactly the bytes the shape
needs; the JSON's shape is bounded by :func:`~robofollow_ros.jsonlimits.loads_bounded` before anything
is built. Every malformed input is a :class:`~robofollow_ros.policy.wire.common.WireFormatError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from robofollow_ros.jsonlimits import JsonLimitError, JsonLimits, loads_bounded
from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError, checked_dtype

#: Largest request body our server reads and largest reply our client reads, by default: about 40
#: times a three-camera 224×224 request (json_numpy's base64 costs 4/3 of the raw bytes).
ACT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: A real body has a few dozen objects and lists; these leave room for actions sent as JSON lists
#: (GR00T's and X-VLA's ``tolist()``) while keeping what a hostile body builds to tens of MB.
ACT_JSON_LIMITS = JsonLimits(max_bytes=ACT_MAX_BODY_BYTES, max_depth=32, max_containers=200_000,
                             max_commas=2_000_000, max_int_digits=64, allow_nan=False)
NUMPY_KEY = "__numpy__"


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic):
        if obj.dtype.kind not in NUMERIC_KINDS:
            raise WireFormatError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
        array = np.ascontiguousarray(obj)
        return {NUMPY_KEY: base64.b64encode(array.data if array.size else b"").decode("ascii"),
                "dtype": array.dtype.str, "shape": list(np.shape(obj))}
    raise TypeError(f"message: cannot encode {type(obj).__name__} as JSON")


def dumps(value: Any) -> str:
    """json_numpy text of ``value`` (what ``json_numpy.dumps`` writes, compact)."""
    return json.dumps(value, default=_default, separators=(",", ":"), allow_nan=False)


def field_string(array: np.ndarray) -> str:
    """One array as X-VLA's fields carry it: ``json_numpy.dumps(array)``, to be put in a JSON string."""
    return dumps(array)


def encode_body(value: Any, encoded: bool = False) -> bytes:
    """A request or reply body: inline json_numpy, or ``{"encoded": text}`` when ``encoded``."""
    text = dumps(value)
    return (json.dumps({"encoded": text}) if encoded else text).encode("utf-8")


def encode_reply(value: Any, encoded: bool) -> bytes:
    """A reply body: inline json_numpy, or (to an ``encoded`` request) a JSON string of json_numpy text."""
    text = dumps(value)
    return (json.dumps(text) if encoded else text).encode("utf-8")




def _dtype(value: Any) -> np.dtype:
    if not isinstance(value, str):  # json_numpy writes dtype.str, never bytes
        raise WireFormatError(f"array dtype: {str(value)[:40]!r} is not a dtype string such as '<f4'")
    return checked_dtype(value)


def _array(obj: dict[str, Any]) -> np.ndarray | np.generic:
    """The array of one ``__numpy__`` map, every field checked."""
    if set(obj) != {NUMPY_KEY, "dtype", "shape"}:
        raise WireFormatError(f"array: keys {sorted(obj)[:6]}; expected __numpy__, dtype, shape")
    dtype = _dtype(obj["dtype"])
    shape = obj["shape"]
    if type(shape) is not list or len(shape) > MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise WireFormatError(f"array shape: {str(shape)[:80]} is not a list of at most {MAX_NDIM} integers >= 0")
    data = obj[NUMPY_KEY]
    if not isinstance(data, str):
        raise WireFormatError(f"array __numpy__: expected a base64 string, got {type(data).__name__}")
    count = math.prod(shape) if shape else 1
    expected = count * dtype.itemsize
    # base64 is 4 characters per 3 bytes: compare lengths before decoding anything
    if len(data) != 4 * ((expected + 2) // 3):
        raise WireFormatError(f"array __numpy__: {len(data)} base64 characters do not hold shape {shape} of "
                              f"{dtype.str} ({expected} bytes)")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireFormatError(f"array __numpy__: not base64 ({exc})") from exc
    if len(raw) != expected:
        raise WireFormatError(f"array __numpy__: {len(raw)} bytes do not match shape {shape} of {dtype.str}")
    array = np.frombuffer(raw, dtype=dtype)
    if not dtype.isnative:
        array = array.astype(dtype.newbyteorder("="))
    return array.reshape(shape) if shape else array[0]


def _hook(obj: dict[str, Any]) -> Any:
    return _array(obj) if NUMPY_KEY in obj else obj


def loads(data: bytes | bytearray | str, what: str = "message",
          before_parse: Callable[[int, int], None] | None = None) -> Any:
    """JSON with json_numpy arrays decoded, within :data:`ACT_JSON_LIMITS`."""
    try:
        return loads_bounded(data, ACT_JSON_LIMITS, what=what, object_hook=_hook, before_parse=before_parse)
    except WireFormatError:
        raise
    except JsonLimitError as exc:
        raise WireFormatError(str(exc)) from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise WireFormatError(f"{what}: invalid JSON ({str(exc)[:200]})") from exc


def decode_body(body: bytes | bytearray, before_parse: Callable[[int, int], None] | None = None) -> tuple[Any, bool]:
    """``(request, was_encoded)`` of a request body, opening ``{"encoded": text}`` (which must be alone)."""
    request = loads(body, "request", before_parse)
    if isinstance(request, dict) and "encoded" in request:
        if len(request) != 1 or not isinstance(request["encoded"], str):
            raise WireFormatError("request: 'encoded' must be the only key and hold a JSON string")
        return loads(request["encoded"], "request.encoded"), True
    return request, False


def decode_reply(body: bytes | bytearray, encoded: bool) -> Any:
    """A reply body: inline json_numpy, or a JSON string of json_numpy text when ``encoded`` was sent.

    The string ``"error"`` is returned as it is (the caller raises), never parsed further.
    """
    reply = loads(body, "reply")
    if encoded and isinstance(reply, str) and reply != "error":
        return loads(reply, "reply (double encoded)")
    return reply


def decode_value(value: Any, field: str) -> Any:
    """A field that may be a json_numpy *string* (X-VLA's fields) or already decoded."""
    if isinstance(value, str) and value.startswith("{") and NUMPY_KEY in value[:16]:
        return loads(value, field)
    return value
