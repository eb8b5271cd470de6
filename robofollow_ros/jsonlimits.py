"""Bounded JSON: parse untrusted JSON without letting its *shape* cost unbounded memory or time.

``json.loads`` bounds nothing but the input length. 127 MiB of ``[{},{},...]`` becomes ~40 million
Python dicts (gigabytes), ``10**400`` becomes an integer that later overflows deep inside NumPy,
and 100k-deep nesting raises ``RecursionError`` from the C scanner. Every reader of JSON that
comes from a socket or a user file goes through :func:`loads_bounded` instead, which rejects such
input *before* building it, with one line naming what was too big.

How it stays cheap: the structural characters ``{ [ ,`` are counted before parsing
(:func:`structure_counts`: ``bytes.count`` for short texts, NumPy's vectorised compares in 1 MiB
slices for long ones, about four times faster than three ``bytes.count`` scans of a 1 MB
observation, with bounded scratch memory). Base64 payloads never contain them, and the counts are
an upper bound even when strings contain those characters (then the input is merely judged more
strictly). Depth is measured on the structural tokens only, and only when there are more
containers than the depth limit. Numbers are checked as they are parsed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["JsonLimitError", "JsonLimits", "loads_bounded", "structure_counts"]


class JsonLimitError(ValueError):
    """JSON that is malformed or exceeds a :class:`JsonLimits` bound; the message names which."""


@dataclass(frozen=True)
class JsonLimits:
    """Bounds on one JSON document. Defaults suit a trajectory file or a policy request."""

    max_bytes: int = 128 * 1024 * 1024
    #: Deepest nesting of objects and arrays.
    max_depth: int = 64
    #: Objects plus arrays in the whole document (an upper bound is counted).
    max_containers: int = 1_000_000
    #: Commas in the whole document: bounds the number of elements and members.
    max_commas: int = 10_000_000
    #: Digits of an integer literal (``10**400`` has 401).
    max_int_digits: int = 64
    #: Accept the non-standard ``NaN`` / ``Infinity`` literals that Python's encoder writes.
    allow_nan: bool = False


_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _max_depth(data: bytes | bytearray, limit: int) -> int:
    depth = deepest = 0
    for match in _STRUCTURE.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


#: Texts at least this long are counted with NumPy (below it, ``bytes.count`` is as fast).
_VECTOR_COUNT_FROM = 16 * 1024
#: Bytes compared per NumPy step: bounds the scratch memory of a count, whatever the text's length.
_VECTOR_COUNT_SLICE = 1 << 20


def structure_counts(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """``(containers, commas)`` of JSON text: upper bounds of its objects/arrays and of its elements."""
    if len(data) < _VECTOR_COUNT_FROM:
        raw = data if isinstance(data, bytes | bytearray) else bytes(data)
        return raw.count(b"{") + raw.count(b"["), raw.count(b",")
    text = np.frombuffer(data, np.uint8)  # a view: nothing copied
    scratch = np.empty(min(len(text), _VECTOR_COUNT_SLICE), np.bool_)
    containers = commas = 0
    for start in range(0, len(text), _VECTOR_COUNT_SLICE):
        piece = text[start:start + _VECTOR_COUNT_SLICE]
        hits = scratch[:len(piece)]
        containers += int(np.count_nonzero(np.equal(piece, 0x7B, out=hits)))  # {
        containers += int(np.count_nonzero(np.equal(piece, 0x5B, out=hits)))  # [
        commas += int(np.count_nonzero(np.equal(piece, 0x2C, out=hits)))  # ,
    return containers, commas


def loads_bounded(data: bytes | bytearray | memoryview | str, limits: JsonLimits = JsonLimits(),
                  what: str = "JSON", object_hook: Callable[[dict[str, Any]], Any] | None = None,
                  counts: tuple[int, int] | None = None,
                  before_parse: Callable[[int, int], None] | None = None) -> Any:
    """Parse ``data`` as JSON within ``limits``; raise :class:`JsonLimitError` naming ``what`` otherwise.

    ``object_hook`` is passed to :func:`json.loads` (the wire decoder turns arrays into NumPy there);
    exceptions it raises propagate unchanged. ``counts``: :func:`structure_counts` of ``data`` when
    the caller already has them, so the text is not scanned twice. ``before_parse(containers,
    commas)``: called once the counts passed the limits and before anything is decoded or built (a
    server charges its memory budget there); what it raises propagates unchanged.
    """
    # bytes and bytearray are used as they are: copying a 128 MiB frame would double its cost.
    raw: bytes | bytearray = (data.encode("utf-8") if isinstance(data, str)
                              else data if isinstance(data, bytes | bytearray) else bytes(data))
    if len(raw) > limits.max_bytes:
        raise JsonLimitError(f"{what}: {len(raw):,} bytes exceed the limit of {limits.max_bytes:,}")
    containers, commas = structure_counts(raw) if counts is None else counts
    if containers > limits.max_containers:
        raise JsonLimitError(f"{what}: {containers:,} objects/arrays exceed the limit of {limits.max_containers:,}")
    if commas > limits.max_commas:
        raise JsonLimitError(f"{what}: {commas:,} elements exceed the limit of {limits.max_commas:,}")
    if containers > limits.max_depth:
        depth = _max_depth(raw, limits.max_depth)
        if depth > limits.max_depth:
            raise JsonLimitError(f"{what}: nesting deeper than {limits.max_depth} levels")
    if before_parse is not None:
        before_parse(containers, commas)

    def parse_int(text: str) -> int:
        digits = len(text) - (text[0] == "-")
        if digits > limits.max_int_digits:
            raise JsonLimitError(f"{what}: an integer with {digits} digits exceeds {limits.max_int_digits} digits")
        return int(text)

    def parse_float(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise JsonLimitError(f"{what}: the number {text[:40]} is out of range for a float")
        return value

    def parse_constant(text: str) -> float:
        if not limits.allow_nan:
            raise JsonLimitError(f"{what}: {text} is not valid JSON (non-finite numbers are not allowed)")
        return float(text)

    try:
        text = raw.decode("utf-8")  # json.loads(bytes) takes the slow 'surrogatepass' path
        return json.loads(text, object_hook=object_hook, parse_int=parse_int, parse_float=parse_float,
                          parse_constant=parse_constant)
    except JsonLimitError:
        raise
    except RecursionError as exc:
        raise JsonLimitError(f"{what}: nesting too deep") from exc
    except UnicodeDecodeError as exc:
        raise JsonLimitError(f"{what}: not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise JsonLimitError(f"{what}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
