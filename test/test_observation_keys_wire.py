"""run.json's ``policy.observation_keys`` are the keys each peer protocol's client really sends: every
client's transport is replaced by a spy that keeps the request of one ``predict`` and stops there, and
the request's key paths must equal what run.json would record for that SPEC (issue 38: internal names
were recorded for act, vla-eval and gr00t). The tcp path with --privileged is checked against a real
server in test_observation_contract.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from robofollow_ros.evaluation.provenance import observation_keys
from robofollow_ros.policy.remote import parse_remote


class Sent(Exception):
    """Raised by a spy once it holds the request."""

    def __init__(self, request: Any) -> None:
        super().__init__("sent")
        self.request = request


def key_paths(value: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            out += key_paths(item, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def observation() -> dict[str, Any]:
    image = np.full((240, 320, 3), 7, dtype=np.uint8)
    return {"observation": {cam: {"rgb": image} for cam in ("head_camera", "left_camera", "right_camera")},
            "joint_action": {"vector": np.linspace(0.0, 1.0, 14)}, "instruction": "pick up the red cylinder"}


def build(spec: str, kwargs: dict[str, Any]) -> Any:
    import importlib

    remote = parse_remote(spec)
    assert remote is not None
    module, name = remote.client.factory.split(":")
    return getattr(importlib.import_module(module), name)(**remote.client_kwargs(kwargs))


def spy_act(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from robofollow_ros.policy.wire.act.codec import decode_body

    def post(_path: str, body: bytes) -> Any:
        raise Sent(decode_body(body)[0])
    monkeypatch.setattr(client, "_post", post)


def spy_vlaeval(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from robofollow_ros.policy.wire.vlaeval.codec import OBSERVATION  # type: ignore[attr-defined]

    def send(kind: str, payload: dict[str, Any]) -> int:
        if kind == OBSERVATION:
            raise Sent(payload)
        return 1
    monkeypatch.setattr(client, "_connection", lambda: None)
    monkeypatch.setattr(client, "_send", send)


def spy_gr00t(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def call(endpoint: str, data: Any = None) -> Any:
        raise Sent(data["observation"] if client.api == "n1.6" else data)
    monkeypatch.setattr(client, "_ensure_checked", lambda: None)
    monkeypatch.setattr(client, "call", call)


def spy_xpolicylab(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def start(_instruction: str) -> None:
        client._trial, client._case = "t", "c"

    def request(kind: str, payload: dict[str, Any], **_fields: Any) -> Any:
        raise Sent(payload["observation"])
    monkeypatch.setattr(client, "_start_trial", start)
    monkeypatch.setattr(client, "_request", request)


@pytest.mark.parametrize(("spec", "kwargs", "spy"), [
    ("act+http://127.0.0.1:9", {}, spy_act),
    ("act+http://127.0.0.1:9/act?preset=gr00t-http", {}, spy_act),
    ("vla-eval://127.0.0.1:9", {}, spy_vlaeval),
    ("gr00t://127.0.0.1:9", {}, spy_gr00t),
    ("gr00t://127.0.0.1:9", {"api": "n1.5"}, spy_gr00t),
    ("xpolicylab://127.0.0.1:9", {}, spy_xpolicylab),
])
def test_run_json_lists_the_keys_the_client_sends(spec: str, kwargs: dict[str, Any], spy: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    client = build(spec, kwargs)
    spy(client, monkeypatch)
    client.set_instruction("pick up the red cylinder")
    with pytest.raises(Sent) as sent:
        client.predict(observation())
    recorded = observation_keys(spec, False, kwargs)
    assert recorded == key_paths(sent.value.request)
    assert "observation.head_camera.rgb" not in recorded  # the peer's names, not ours
    if hasattr(client, "_context"):
        client._context.term()
