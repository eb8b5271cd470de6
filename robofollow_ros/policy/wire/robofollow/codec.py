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

Speed (issue 23): an observation is ~1 MB of base64 inside ~1 KB of JSON. Base64 itself goes
through ``pybase64`` (SIMD; already installed as a dependency of ros2-numpy) where it is importable,
about 40 times faster than ``binascii``, which is the fallback: both refuse anything outside the
base64 alphabet, and with the length checks below they accept exactly the same texts
(test_protocol_fast_paths compares them). Both directions handle the base64 apart from the JSON:
the encoder splices it in after ``json.dumps`` (and can hand the pieces to the socket without
joining them, :func:`encode_message_parts`); the decoder cuts long ``"data"`` strings out of the
text before parsing (:func:`_cut_blobs`) and decodes them straight from the received buffer, so
the JSON scanner, the UTF-8 decoder and the structure count see only the ~1 KB skeleton. The
result is the one the plain parse gives, or the plain parse runs.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from robofollow_ros.jsonlimits import JsonLimitError, JsonLimits, loads_bounded
from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError

pybase64: ModuleType | None
try:  # SIMD base64 where installed (ros2-numpy requires it); binascii otherwise
    import pybase64
except ImportError:  # test_protocol_fast_paths runs the fallback too
    pybase64 = None

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
    name = _dtype_name(array.dtype)
    if name not in ALLOWED_DTYPES:
        raise WireFormatError(f"array dtype: {array.dtype} cannot be sent; allowed: {sorted(ALLOWED_DTYPES)}")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    data = b64encode(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    return {
        "__numpy_array__": True,
        "data": data if not inline else data.decode("ascii"),
        "dtype": name,
        "shape": list(array.shape),
    }


_NAMES: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    """``dtype.name`` (NumPy computes it in Python, ~1.5 µs), remembered for the few dtypes sent."""
    name = _NAMES.get(dtype)
    if name is None:
        name = dtype.name
        if len(_NAMES) < 64:
            _NAMES[dtype] = name
    return name


def b64encode(data: bytes | memoryview) -> bytes:
    """Base64 of ``data``, no newline (``pybase64`` where installed, else ``binascii``)."""
    if pybase64 is not None:
        return pybase64.b64encode(data)
    return binascii.b2a_base64(data, newline=False)


def b64decode_strict(text: str | bytes | memoryview) -> bytes:
    """The bytes of base64 ``text``; ``binascii.Error`` for any character outside the alphabet or
    padding out of place (``pybase64`` validating, else ``binascii`` in strict mode)."""
    if pybase64 is not None:
        return pybase64.b64decode(text, validate=True)
    if sys.version_info >= (3, 11):
        return binascii.a2b_base64(text, strict_mode=True)
    # Python 3.10: no strict mode; b64decode(validate=True) refuses what is outside the alphabet and padding
    # anywhere but at the end, and a2b_base64 under it refuses padding that does not complete a quantum
    return base64.b64decode(text, validate=True)


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


def decode_array(obj: dict[str, Any], max_bytes: int = MAX_FRAME_BYTES,
                 text: bytes | memoryview | None = None) -> np.ndarray:
    """A read-only array from a ``__numpy_array__`` object, validated before allocation.

    Arrays that arrive in the non-native byte order (``'>f8'`` on x86) hold the same values as the
    official decoder's ``np.frombuffer`` view, converted to native order so that policies (torch,
    JAX) can use them directly. ``text``: the base64 characters of ``data`` when the caller cut
    them out of the JSON text (they are checked exactly as a ``data`` string would be).
    """
    dtype = wire_dtype(obj.get("dtype"))
    shape = obj.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise WireFormatError(f"array shape: {_short(shape)} is not a list of at most {MAX_NDIM} non-negative integers")
    data: Any = obj.get("data") if text is None else text
    if text is None and not isinstance(data, str):
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
        raw = b64decode_strict(data)
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


# ------------------------------------------------------------------------ base64 kept out of JSON
#: ``"data"`` strings at least this long are cut out of the text before it is parsed (shorter
#: ones, like a joint vector's 152 characters, cost the JSON scanner nothing worth avoiding).
BLOB_MIN_CHARS = 1024
#: ``"data":`` keys looked at per message, cut or not: a hostile body full of them costs a bounded
#: number of steps; whatever follows is simply parsed as JSON.
MAX_BLOBS = 64
_DATA_KEY = b'"data":'
_QUOTE = 0x22
_SPACE = 0x20


class _PlainParse(Exception):
    """The skeleton's parse does not stand for the text's: parse the text as it is."""


def _cut_blobs(body: bytes | bytearray) -> tuple[bytes, dict[str, memoryview]] | None:
    """``(skeleton, blobs)``: ``body`` with the content of long ``"data"`` strings replaced by tokens.

    Each cut is the text between the quote after a ``"data":`` key (and at most one space) and the
    next quote. Tokens are a random 128-bit nonce plus an index, in the base64 alphabet.

    Why a successful parse of the skeleton is the parse of ``body`` (with each token standing for
    its blob): the two quotes around ``"data":`` are preceded by ``a`` and by ``:`` or a space, so
    neither is escaped, and no quote lies between them: one of them opens a string and the other
    closes it. If the second one closes it, the blob follows a string token directly, which is
    invalid JSON for any text of base64 characters (a token is such a text too): both parses fail
    at the same place. Otherwise the blob is the content of a string, and as it holds no quote and
    no backslash, exactly all of it. So when every blob is valid base64 (checked as it is decoded,
    strictly), the lexical structure of both texts is the same, left to right, and only those
    string values differ. :func:`_decode_cut` also requires every token to be used exactly once, as
    the ``data`` of an array object; anything else falls back to the plain parse.
    """
    n = len(body)
    pos = start = 0
    pieces: list[bytes | memoryview] = []
    blobs: dict[str, memoryview] = {}
    view: memoryview | None = None
    nonce = secrets.token_hex(16)
    for _ in range(MAX_BLOBS):
        key = body.find(_DATA_KEY, pos)
        if key < 0:
            break
        quote = key + len(_DATA_KEY)
        if quote < n and body[quote] == _SPACE:
            quote += 1
        pos = quote
        if quote >= n or body[quote] != _QUOTE:
            continue
        end = body.find(b'"', quote + 1)
        if end < 0:
            break
        pos = end + 1
        if end - quote - 1 < BLOB_MIN_CHARS:
            continue
        if view is None:
            view = memoryview(body)
        token = f"{nonce}x{len(blobs)}"
        pieces += (view[start:quote + 1], token.encode("ascii"))
        blobs[token] = view[quote + 1:end]
        start = end
    if not blobs:
        return None
    assert view is not None
    pieces.append(view[start:])
    return b"".join(pieces), blobs


def _decode_cut(skeleton: bytes, blobs: dict[str, memoryview],
                before_parse: Callable[[int, int], None] | None) -> Any:
    """The message of a cut body; raises :class:`_PlainParse` when the plain parse must decide."""
    used: set[str] = set()

    def hook(obj: dict[str, Any]) -> Any:
        if not obj.get("__numpy_array__"):
            return obj
        data = obj.get("data")
        if isinstance(data, str) and data in blobs:
            if data in used:
                raise _PlainParse("a token used twice")
            used.add(data)
            return decode_array(obj, text=blobs[data])
        return decode_array(obj)

    try:
        message = loads_bounded(skeleton, WIRE_JSON_LIMITS, what="message", object_hook=hook,
                                before_parse=before_parse)
    except (JsonLimitError, WireFormatError, _PlainParse) as exc:
        raise _PlainParse(str(exc)) from exc
    if len(used) != len(blobs):
        raise _PlainParse("a token was not an array's data")
    return message


# -------------------------------------------------------------------------------------- messages
def encode_message(message: Any) -> bytes:
    """JSON bytes of a message, arrays encoded, with Python's default separators and ASCII escaping.

    The bytes equal ``json.dumps(message, default=...)`` with base64 inlined, but the base64 text is
    spliced in afterwards: ``json.dumps`` would otherwise scan every character of ~1 MB of image
    data for escapes that base64 never contains (3-4 ms per observation). Each array's data is
    first replaced by a placeholder carrying a random 128-bit nonce, so no user string can collide.
    """
    parts = encode_message_parts(message)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def encode_message_parts(message: Any) -> list[bytes]:
    """:func:`encode_message` as the pieces whose concatenation it is (a socket can send them as
    they are, without first copying ~1 MB into one buffer)."""
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
        return [skeleton]
    pieces: list[bytes] = []
    rest = skeleton
    for index, blob in enumerate(blobs):  # placeholders appear in the order default() made them
        before, _, rest = rest.partition(f"{nonce}:{index}".encode("ascii"))
        pieces += (before, blob)
    pieces.append(rest)
    return pieces


def decode_message(body: bytes | bytearray | memoryview, counts: tuple[int, int] | None = None,
                   before_parse: Callable[[int, int], None] | None = None) -> Any:
    """The message tree of one frame body; raises :class:`WireFormatError` on any malformed input.

    Parsed by :func:`~robofollow_ros.jsonlimits.loads_bounded` within :data:`WIRE_JSON_LIMITS`, so
    the *shape* of a message cannot cost more memory than its size: 127 MiB of ``[{},{},...]`` is
    refused by counting, before one object is built. ``counts``: the body's
    :func:`~robofollow_ros.jsonlimits.structure_counts` if the caller has them already.
    ``before_parse(containers, commas)``: called with the counts of the text about to be parsed,
    once they passed the limits and before anything is built (a server charges its memory budget
    there; what it raises propagates). With long arrays cut out (see the module docstring) that is
    the skeleton's counts, which equal the body's whenever the cut parse stands; otherwise it is
    called again with the body's before the plain parse.
    """
    raw = body if isinstance(body, bytes | bytearray) else bytes(body)
    if len(raw) <= WIRE_JSON_LIMITS.max_bytes:
        cut = _cut_blobs(raw)
        if cut is not None:
            skeleton, blobs = cut
            try:
                return _decode_cut(skeleton, blobs, before_parse)
            except _PlainParse:
                pass  # the plain parse below decides, with its own error messages
            finally:
                for blob in blobs.values():
                    blob.release()
    return _decode_plain(raw, counts, before_parse)


def _decode_plain(raw: bytes | bytearray, counts: tuple[int, int] | None = None,
                  before_parse: Callable[[int, int], None] | None = None) -> Any:
    """:func:`decode_message` without cutting anything out: the whole text goes to the JSON parser."""
    try:
        return loads_bounded(raw, WIRE_JSON_LIMITS, what="message", object_hook=_object_hook, counts=counts,
                             before_parse=before_parse)
    except WireFormatError:
        raise
    except JsonLimitError as exc:
        raise WireFormatError(str(exc)) from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise WireFormatError(f"message: invalid JSON ({_short(str(exc), 200)})") from exc
