"""Bounded JSON: hostile shapes are refused with one line before they cost memory."""

from __future__ import annotations

import json

import pytest

from robofollow_ros.jsonlimits import JsonLimitError, JsonLimits, loads_bounded


def test_plain_documents_parse_as_json_does() -> None:
    doc = {"task": "L0_x", "frames": [[0.1, 2, -3e-5, True, None, "a,b{c}[d]"]] * 3, "n": -12}
    text = json.dumps(doc)
    assert loads_bounded(text) == json.loads(text)
    assert loads_bounded(text.encode()) == doc


@pytest.mark.parametrize(("payload", "needle"), [
    (b"[" + b"{}," * 1300 + b"{}]", "objects/arrays exceed"),
    (b"[" + b"0," * 1500 + b"0]", "elements exceed"),
    (b"[" * 100 + b"]" * 100, "nesting deeper than 16"),
    (b'{"a": ' + str(10**400).encode() + b"}", "integer with 401 digits"),
    (b'{"a": -' + str(10**80).encode() + b"}", "integer with 81 digits"),
    (b"[1e400]", "out of range"),
    (b"[NaN]", "non-finite"),
    (b'{"a": 1', "invalid JSON at line 1"),
    (b'["\xff"]', "not UTF-8"),
    (b"x" * 5000, "bytes exceed"),
])
def test_hostile_input_gets_one_named_line(payload: bytes, needle: str) -> None:
    limits = JsonLimits(max_bytes=4096, max_depth=16, max_containers=1000, max_commas=1000)
    with pytest.raises(JsonLimitError) as info:
        loads_bounded(payload, limits, what="FILE")
    message = str(info.value)
    assert message.startswith("FILE: ") and needle in message and "\n" not in message


def test_depth_counts_structure_not_brackets_inside_strings() -> None:
    limits = JsonLimits(max_depth=3, max_containers=100)
    text = json.dumps([[["[[[[[[", {"k": "]]]{{{"}]]])
    with pytest.raises(JsonLimitError, match="nesting deeper than 3"):
        loads_bounded(text, limits)
    assert loads_bounded(json.dumps([["[[[[[[[", "{{{{"]]), limits) == [["[[[[[[[", "{{{{"]]


def test_deep_nesting_beyond_the_recursion_limit_is_refused() -> None:
    payload = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(JsonLimitError, match="nesting"):
        loads_bounded(payload, JsonLimits(max_containers=200_000), what="message")


def test_nan_allowed_when_asked() -> None:
    value = loads_bounded("[NaN, 1.5]", JsonLimits(allow_nan=True))
    assert value[0] != value[0] and value[1] == 1.5


def test_object_hook_errors_propagate_unchanged() -> None:
    class HookError(ValueError):
        pass

    def hook(obj: dict) -> dict:
        if "bad" in obj:
            raise HookError("bad field")
        return obj

    with pytest.raises(HookError):
        loads_bounded('{"bad": 1}', object_hook=hook)
