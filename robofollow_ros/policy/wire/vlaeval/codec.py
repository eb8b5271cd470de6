"""vla-eval's message encoding (allenai vla-evaluation-harness, ``vla_eval/protocol/``), decoded defensively.

Every websocket message is one msgpack map ``{"type", "payload", "seq", "timestamp"}`` (``messages.py``);
``type`` is one of :data:`MESSAGE_TYPES`. Inside the payload (``numpy_codec.py``, ``image_codec.py``):

- an array is ``{"__ndarray__": True, "data": <raw bytes>, "dtype": dtype.str, "shape": [...]}``; only
  the dtype kinds b, i, u, f are accepted (vla-eval's own rule, and ours: ``common.NUMERIC_KINDS``);
- an HWC uint8 image (1, 3 or 4 channels) is ``{"__image__": True, "format": "raw"|"jpeg"|"png",
  "data", "shape"[, "dtype"]}``; vla-eval sends png unless told otherwise; jpeg is quality 95 as there;
- NumPy scalars travel as plain msgpack numbers (vla-eval converts them the same way).

Decoding never unpickles and never trusts a size it was told: a raw array's bytes must match its
shape exactly (a view is checked before anything is allocated); a png/jpeg image's header is read
first and must announce the declared shape, at most ``MAX_IMAGE_SIDE`` pixels a side, before Pillow
decompresses it (no decompression bombs); a message holds at most :data:`VLAEVAL_MAX_OBJECTS` msgpack
values, counted by their headers before anything is built. Which image formats a decoder accepts is
the caller's choice: our client takes only ``raw`` in replies (a server has no reason to compress an
action), our server takes all three (vla-eval's own client sends png). Anything malformed is a
:class:`~robofollow_ros.policy.wire.common.WireFormatError` naming the field.
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Collection
from typing import Any

import msgpack
import numpy as np
from PIL import Image

from robofollow_ros.policy.observation import MAX_IMAGE_SIDE
from robofollow_ros.policy.wire.common import MAX_NDIM, NUMERIC_KINDS, WireFormatError, checked_dtype

#: ``vla_eval.protocol.messages.PROTOCOL_VERSION``: the version both sides announce in ``hello``.
PROTOCOL_VERSION = 1
HELLO, OBSERVATION, ACTION, EPISODE_START, EPISODE_END, ERROR = (
    "hello", "observation", "action", "episode_start", "episode_end", "error")
MESSAGE_TYPES = frozenset({HELLO, OBSERVATION, ACTION, EPISODE_START, EPISODE_END, ERROR})
IMAGE_FORMATS = ("raw", "jpeg", "png")
ALL_IMAGE_FORMATS = frozenset(IMAGE_FORMATS)
#: Largest message either side accepts by default (vla-eval itself sets no limit): three raw
#: 640×480 frames are 2.7 MiB, a png observation of our 320×240 cameras about 0.3 MiB.
VLAEVAL_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Most msgpack values one message may hold (an observation holds about 40).
VLAEVAL_MAX_OBJECTS = 1_000_000
_NDARRAY, _IMAGE = "__ndarray__", "__image__"
_PIL_FORMATS = {"png": "PNG", "jpeg": "JPEG"}


# ------------------------------------------------------------------------------------------ encoding
def _is_image(array: np.ndarray) -> bool:
    """vla-eval's heuristic (``image_codec._is_image_array``): HWC uint8 with 1, 3 or 4 channels."""
    return array.ndim == 3 and array.dtype == np.uint8 and array.shape[2] in (1, 3, 4)


def encode_image(image: np.ndarray, fmt: str) -> dict[str, Any]:
    if fmt == "raw":
        return {_IMAGE: True, "format": "raw", "data": np.ascontiguousarray(image).tobytes(),
                "dtype": image.dtype.str, "shape": list(image.shape)}
    if fmt not in _PIL_FORMATS:
        raise ValueError(f"image_format: {fmt!r} is not one of {IMAGE_FORMATS}")
    pil = Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
    if fmt == "jpeg" and pil.mode != "RGB":
        raise WireFormatError(f"image: jpeg needs 3-channel RGB, got shape {image.shape}; use png or raw")
    buffer = io.BytesIO()
    pil.save(buffer, format=_PIL_FORMATS[fmt], **({"quality": 95} if fmt == "jpeg" else {}))
    return {_IMAGE: True, "format": fmt, "data": buffer.getvalue(), "shape": list(image.shape)}


def _encoder(image_format: str) -> Any:
    if image_format not in ALL_IMAGE_FORMATS:
        raise ValueError(f"image_format: {image_format!r} is not one of {IMAGE_FORMATS}")

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in NUMERIC_KINDS:
                raise WireFormatError(f"array dtype: {obj.dtype} cannot be sent (numeric and bool only)")
            if _is_image(obj):
                return encode_image(obj, image_format)
            return {_NDARRAY: True, "data": np.ascontiguousarray(obj).tobytes(), "dtype": obj.dtype.str,
                    "shape": list(obj.shape)}
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            return float(obj)
        raise TypeError(f"message: cannot encode {type(obj).__name__} as msgpack")

    return default


def pack_message(kind: str, payload: dict[str, Any], seq: int, *, image_format: str = "raw",
                 timestamp: float | None = None) -> bytes:
    """One vla-eval message; HWC uint8 arrays in ``payload`` go as ``image_format`` images."""
    if kind not in MESSAGE_TYPES:
        raise ValueError(f"message type: {kind!r} is not one of {sorted(MESSAGE_TYPES)}")
    envelope = {"type": kind, "payload": payload, "seq": seq,
                "timestamp": time.time() if timestamp is None else timestamp}
    packed: bytes = msgpack.packb(envelope, default=_encoder(image_format), use_bin_type=True)
    return packed


# ------------------------------------------------------------------------------------------ decoding
def _dtype(value: Any) -> np.dtype:
    if not isinstance(value, str):  # vla-eval writes dtype.str, never bytes
        raise WireFormatError(f"array dtype: {str(value)[:40]!r} is not a dtype string such as '<f4'")
    return checked_dtype(value)


def _shape(value: Any, field: str) -> list[int]:
    if type(value) is not list or len(value) > MAX_NDIM or not all(type(d) is int and d >= 0 for d in value):
        raise WireFormatError(f"{field} shape: {str(value)[:80]} is not a list of at most {MAX_NDIM} sizes")
    return value


def _raw_array(obj: dict[str, Any], field: str) -> np.ndarray:
    dtype, shape, data = _dtype(obj.get("dtype")), _shape(obj.get("shape"), field), obj.get("data")
    if not isinstance(data, bytes):
        raise WireFormatError(f"{field} data: expected bytes, got {type(data).__name__}")
    try:  # a view: NumPy checks the buffer is large enough and allocates nothing
        array: np.ndarray = np.ndarray(shape=shape, dtype=dtype, buffer=data)
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireFormatError(f"{field} data: {len(data)} bytes do not match shape {shape} of {dtype.str}") from exc
    if array.nbytes != len(data):
        raise WireFormatError(f"{field} data: {len(data)} bytes do not match shape {shape} of {dtype.str}")
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


class EncodedImage:
    """A png/jpeg image as it arrived, not yet decompressed: its declared shape is checked, and
    :attr:`nbytes` says what decoding it will build, so that a server can check the payload's
    structure (which cameras, how many) and charge its memory budget before any pixel is inflated."""

    __slots__ = ("data", "fmt", "shape")

    def __init__(self, fmt: str, data: Any, shape: Any) -> None:
        shape = _shape(shape, "image")
        if len(shape) != 3 or shape[2] not in (1, 3, 4) or not (1 <= shape[0] <= MAX_IMAGE_SIDE
                                                                and 1 <= shape[1] <= MAX_IMAGE_SIDE):
            raise WireFormatError(f"image shape: {shape} is not H×W×C with 1 <= H, W <= {MAX_IMAGE_SIDE} and "
                                  "C in 1, 3, 4")
        if not isinstance(data, bytes):
            raise WireFormatError(f"image data: expected bytes, got {type(data).__name__}")
        self.fmt, self.data, self.shape = fmt, data, shape

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.shape[2]

    def decode(self) -> np.ndarray:
        """The uint8 HWC pixels; the header must announce the declared size before anything is inflated."""
        fmt, shape = self.fmt, self.shape
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                pil = Image.open(io.BytesIO(self.data), formats=[_PIL_FORMATS[fmt]])  # reads the header only
                if pil.size != (shape[1], shape[0]):
                    raise WireFormatError(f"image: the {fmt} holds {pil.size[0]}×{pil.size[1]} pixels, the message "
                                          f"says shape {shape}")
                array = np.asarray(pil)
        except WireFormatError:
            raise
        except Exception as exc:  # Pillow raises many types on corrupt data
            raise WireFormatError(f"image data: not a valid {fmt} ({type(exc).__name__}: {str(exc)[:120]})") from exc
        if array.ndim == 2:
            array = array[:, :, None]
        if array.dtype != np.uint8 or list(array.shape) != shape:
            raise WireFormatError(f"image: the {fmt} decodes to {array.dtype} {list(array.shape)}, the message says "
                                  f"uint8 {shape}")
        return array


def _hook(formats: Collection[str]) -> Any:
    def hook(obj: dict[Any, Any]) -> Any:
        if _IMAGE in obj:
            fmt = obj.get("format")
            if not isinstance(fmt, str) or fmt not in formats:
                raise WireFormatError(f"image format: {str(fmt)[:20]!r} is not accepted here "
                                      f"(accepted: {', '.join(sorted(formats))})")
            if fmt == "raw":
                image = _raw_array(obj, "image")
                if not _is_image(image):
                    raise WireFormatError(f"image: raw {image.dtype} {list(image.shape)} is not HWC uint8")
                return image
            return EncodedImage(fmt, obj.get("data"), obj.get("shape"))
        if _NDARRAY in obj:
            return _raw_array(obj, "array")
        return obj

    return hook


def unpack_message(data: bytes, *, image_formats: Collection[str] = ("raw",),
                   max_objects: int = VLAEVAL_MAX_OBJECTS, counted: bool = False) -> tuple[str, dict[str, Any], int]:
    """``(type, payload, seq)`` of one message; :class:`WireFormatError` on anything malformed.

    The values are counted first (:func:`count_objects`) unless the caller did (``counted``) or the
    message is too short to hold more than ``max_objects`` (every value takes at least one byte)."""
    if not isinstance(data, bytes | bytearray):
        raise WireFormatError(f"message: expected a binary msgpack frame, got {type(data).__name__}")
    if not counted and len(data) > max_objects:
        count_objects(data, max_objects)
    try:
        raw = msgpack.unpackb(data, object_hook=_hook(image_formats), raw=False, strict_map_key=True)
    except WireFormatError:
        raise
    except RecursionError as exc:
        raise WireFormatError("message: msgpack nested too deeply") from exc
    except (ValueError, TypeError, KeyError, OverflowError, msgpack.UnpackException) as exc:
        raise WireFormatError(f"message: invalid msgpack ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(raw, dict):
        raise WireFormatError(f"message: expected a map, got {type(raw).__name__}")
    missing = [k for k in ("type", "payload", "seq", "timestamp") if k not in raw]
    if missing:
        raise WireFormatError(f"message: fields {missing} missing (keys {sorted(map(str, raw))[:6]})")
    kind, payload, seq = raw["type"], raw["payload"], raw["seq"]
    if kind not in MESSAGE_TYPES:
        raise WireFormatError(f"message type: {str(kind)[:40]!r} is not one of {sorted(MESSAGE_TYPES)}")
    if not isinstance(payload, dict):
        raise WireFormatError(f"{kind} payload: expected a map, got {type(payload).__name__}")
    if type(seq) is not int:
        raise WireFormatError(f"{kind} seq: expected an integer, got {str(seq)[:40]!r}")
    return kind, payload, seq


# ------------------------------------------------------------------------------------------ bounds
def _steps() -> tuple[int, ...]:
    """For each first byte of a msgpack value, how to step over it: ``n >= 0`` the header and ``n``
    more bytes (fixed values; container headers, whose elements follow); ``-w`` a bin/str with a
    ``w``-byte length; ``-8 - w`` an ext with a ``w``-byte length and a type byte; -100: invalid."""
    table = [0] * 256
    for byte in range(0xA0, 0xC0):
        table[byte] = byte & 0x1F
    for byte, size in {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,
                       0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,
                       0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}.items():
        table[byte] = size
    for byte, width in {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}.items():
        table[byte] = -width
    for byte, width in {0xC7: 1, 0xC8: 2, 0xC9: 4}.items():
        table[byte] = -8 - width
    table[0xC1] = -100
    return tuple(table)


_STEPS = _steps()


def count_objects(data: bytes | bytearray, limit: int = VLAEVAL_MAX_OBJECTS) -> int:
    """The number of msgpack values in ``data``, read from their headers (payloads skipped, nothing
    built); :class:`WireFormatError` past ``limit``."""
    end, pos, count = len(data), 0, 0
    while pos < end:
        count += 1
        if count > limit:
            raise WireFormatError(f"message: more than {limit:,} msgpack objects (the limit)")
        step = _STEPS[data[pos]]
        if step >= 0:
            pos += 1 + step
        elif step > -8:
            pos += 1 - step + int.from_bytes(data[pos + 1:pos + 1 - step], "big")
        elif step > -100:
            pos += 2 - 8 - step + int.from_bytes(data[pos + 1:pos - 7 - step], "big")
        else:
            raise WireFormatError(f"message: invalid msgpack (byte 0xc1 at offset {pos})")
    return count
