"""RoboArena's dialect of the openpi protocol: ``openpi://...?dialect=roboarena`` against a stub server.

roboarena is not on PyPI (and pins numpy >= 2.3), so the server is a test double written from its
``policy_server.py`` / ``policy_client.py``: the ``PolicyServerConfig`` sent on connect, ``obs["endpoint"]``
read from every request (a request without it fails with a traceback text frame and an
INTERNAL_ERROR close, as theirs does), ``reset`` answered with the text ``"reset successful"``, and
openpi-client's ``msgpack_numpy`` as the codec (RoboArena's ``utils/msgpack_numpy.py`` is a copy of it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets.frames
import websockets.sync.server
from openpi_client import msgpack_numpy

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.drills.scripted import RecordingPolicy, make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.roboarena import HandshakeRefused

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
CONFIG = {"image_resolution": (224, 224), "needs_wrist_camera": True, "n_external_cameras": 1,
          "needs_stereo_camera": False, "needs_session_id": True, "action_space": "joint_position"}
CAMERAS = {"cam_high": "head_camera", "cam_left_wrist": "left_camera", "cam_right_wrist": "right_camera"}


class AlohaPolicy:
    """A RoboArena ``BasePolicy`` (``infer(obs)``, ``reset(reset_info)``) around one of our policies, fed
    openpi's ALOHA keys; an episode starts at the first ``infer`` of a session it has not seen.

    ``infer`` returns what RoboArena's own policies return: a bare ``(N, D)`` ndarray (its ``DummyPolicy``
    returns ``np.zeros((1, 8))``; ``scripts/test_policy_server.py`` asserts a 2-D ndarray), or with
    ``reply="dict"`` openpi's ``{"actions": ...}`` (what RoboArena's evaluator client indexes)."""

    def __init__(self, policy: Any, actions: np.ndarray | None = None, reply: str = "bare") -> None:
        self.policy, self.fixed, self.reply = policy, actions, reply
        self.session: Any = object()
        self.requests: list[dict[str, Any]] = []
        self.resets: list[dict[str, Any]] = []

    def infer(self, obs: dict[str, Any]) -> Any:
        self.requests.append(obs)
        if self.fixed is not None:
            actions = self.fixed
        else:
            if obs.get("session_id") != self.session:
                self.session = obs.get("session_id")
                self.policy.reset()
                self.policy.set_instruction(obs["prompt"])
            cameras = {CAMERAS[k]: {"rgb": np.asarray(v).transpose(1, 2, 0)} for k, v in obs["images"].items()}
            actions = np.asarray(self.policy.predict({"observation": cameras, "instruction": obs["prompt"],
                                                      "joint_action": {"vector": obs["state"]}}), np.float32)
        return {"actions": actions} if self.reply == "dict" else actions

    def reset(self, reset_info: dict[str, Any]) -> None:
        self.resets.append(reset_info)
        self.session = object()


class RoboArenaStub:
    """RoboArena's ``WebsocketPolicyServer._handler`` over a real (threaded) websocket server."""

    def __init__(self, policy: AlohaPolicy, config: dict[str, Any] | None = None,
                 reset_reply: str = "reset successful") -> None:
        self.policy, self.config, self.reset_reply = policy, {**CONFIG, **(config or {})}, reset_reply
        self.paths: list[str] = []
        self.raw: list[bytes] = []
        self.server = websockets.sync.server.serve(self._handler, "127.0.0.1", 0, compression=None, max_size=None)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RoboArenaStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join(20)

    def _handler(self, ws: websockets.sync.server.ServerConnection) -> None:
        assert ws.request is not None
        self.paths.append(ws.request.path)
        packer = msgpack_numpy.Packer()
        ws.send(packer.pack(self.config))
        while True:
            try:
                raw = ws.recv()
                self.raw.append(raw)
                obs = msgpack_numpy.unpackb(raw)
                endpoint = obs["endpoint"]
                del obs["endpoint"]
                if endpoint == "reset":
                    self.policy.reset(obs)
                    to_return: Any = self.reset_reply
                else:
                    to_return = packer.pack(self.policy.infer(obs))
                ws.send(to_return)
            except websockets.ConnectionClosed:
                break
            except Exception:
                ws.send(traceback.format_exc())
                ws.close(code=websockets.frames.CloseCode.INTERNAL_ERROR,
                         reason="Internal server error. Traceback included in previous frame.")
                break


@pytest.fixture
def stub() -> Iterator[RoboArenaStub]:
    with RoboArenaStub(AlohaPolicy(RecordingPolicy(chunk_size=4))) as server:
        yield server


def arena(port: int, path: str = "", **kwargs: Any) -> OpenpiWebsocketPolicy:
    return OpenpiWebsocketPolicy("127.0.0.1", port, path, timeout_s=20, connect_attempts=2, connect_interval_s=0.05,
                                 dialect="roboarena", **kwargs)


def test_a_plain_openpi_request_is_refused_as_roboarena_does(stub: RoboArenaStub) -> None:
    client = OpenpiWebsocketPolicy("127.0.0.1", stub.port, timeout_s=20)
    with pytest.raises(RemotePolicyError, match="KeyError: 'endpoint'"):
        client.predict(make_observation())
    client.close()


def test_the_default_dialect_sends_exactly_the_openpi_bytes(stub: RoboArenaStub) -> None:
    obs = make_observation(seed=7)
    client = OpenpiWebsocketPolicy("127.0.0.1", stub.port, timeout_s=20)
    client.set_instruction("pick")
    with pytest.raises(RemotePolicyError):
        client.predict(obs)
    assert stub.raw == [msgpack_numpy.packb(to_openpi_observation(obs, "pick"))]
    client.close()


def test_episodes_carry_endpoint_session_and_reset(stub: RoboArenaStub) -> None:
    client = arena(stub.port, "/v1/realtime/robot/openpi")
    assert client.server_info()["action_space"] == "joint_position"
    client.reset()  # the evaluator's probe: no episode yet, nothing sent
    client.set_instruction("pick the cube")
    assert client.predict(make_observation(seed=1)).shape == (4, 14)
    client.predict(make_observation(seed=2))
    client.reset()
    client.predict(make_observation(seed=3))
    client.close()  # ends the open episode too
    assert stub.paths == ["/v1/realtime/robot/openpi"] and client.connections_opened == 1
    requests, resets = stub.policy.requests, stub.policy.resets
    first = requests[0]
    assert set(first) == {"state", "images", "prompt", "session_id"} and first["prompt"] == "pick the cube"
    assert first["state"].shape == (14,) and first["images"]["cam_high"].shape == (3, 224, 224)
    assert requests[0]["session_id"] == requests[1]["session_id"] != requests[2]["session_id"]
    assert [r["session_id"] for r in resets] == [requests[0]["session_id"], requests[2]["session_id"]]
    assert all(b"endpoint" in raw for raw in stub.raw)


def test_url_session_id_and_handshake_resolution_and_cameras() -> None:
    policy = AlohaPolicy(RecordingPolicy())
    with RoboArenaStub(policy, {"image_resolution": [180, 320], "needs_wrist_camera": False,
                                "needs_session_id": False}) as server:
        client = load_policy(f"openpi://127.0.0.1:{server.port}/ws?dialect=roboarena&session_id=run-7", validate=False)
        client.predict(make_observation())
        client.predict(make_observation())
        client.close()
        assert server.paths == ["/ws"]
    assert set(policy.requests[0]["images"]) == {"cam_high"}
    assert policy.requests[0]["images"]["cam_high"].shape == (3, 180, 320)
    assert [r["session_id"] for r in policy.requests] == ["run-7", "run-7"]
    assert policy.resets == [{"session_id": "run-7"}]


@pytest.mark.parametrize(("config", "fragment"), [
    ({"action_space": "cartesian_position"}, "action_space='cartesian_position' is refused"),
    ({"action_space": "joint_velocity"}, "action_space='joint_velocity' is refused"),
    ({"needs_stereo_camera": True}, "needs_stereo_camera=True is refused"),
    ({"n_external_cameras": 2}, "n_external_cameras=2 is refused"),
    ({"image_resolution": "big"}, "image_resolution='big' is not"),
])
def test_handshakes_we_cannot_honour_are_refused_in_one_line(config: dict[str, Any], fragment: str) -> None:
    with RoboArenaStub(AlohaPolicy(RecordingPolicy()), config) as server:
        client = arena(server.port)
        with pytest.raises(HandshakeRefused, match=fragment) as info:
            client.predict(make_observation())
        assert "\n" not in str(info.value) and f"127.0.0.1:{server.port}" in str(info.value)
        assert server.policy.requests == []


@pytest.mark.parametrize("reply", ["bare", "dict"])
def test_both_reply_forms_give_the_chunk(reply: str) -> None:
    chunk = np.arange(3 * 14, dtype=np.float32).reshape(3, 14)
    with RoboArenaStub(AlohaPolicy(RecordingPolicy(), actions=chunk, reply=reply)) as server:
        client = arena(server.port)
        np.testing.assert_array_equal(client.predict(make_observation()), chunk)
        client.close()


@pytest.mark.parametrize("reply", ["bare", "dict"])
def test_a_droid_reply_is_refused_in_one_line_naming_the_shape(reply: str) -> None:
    # RoboArena's DummyPolicy: np.zeros((1, 8), dtype=np.float32)
    with RoboArenaStub(AlohaPolicy(RecordingPolicy(), actions=np.zeros((1, 8), np.float32), reply=reply)) as server:
        client = arena(server.port)
        with pytest.raises(WireFormatError, match=r"^roboarena server .*shape \(1, 8\).*DROID") as info:
            client.predict(make_observation())
        assert "\n" not in str(info.value) and "openpi server" not in str(info.value)
        client.close()


def test_a_server_failure_names_roboarena_and_its_reason_in_the_first_line() -> None:
    class Failing(AlohaPolicy):
        def infer(self, obs: dict[str, Any]) -> Any:
            raise ValueError("checkpoint expects observation/joint_position")

    with RoboArenaStub(Failing(RecordingPolicy())) as server:
        client = arena(server.port)
        with pytest.raises(RemotePolicyError) as info:
            client.predict(make_observation())
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"roboarena server ws://127.0.0.1:{server.port}: predict failed: ")
    assert first.endswith("ValueError: checkpoint expects observation/joint_position")
    assert "Traceback" in info.value.remote_traceback  # the whole text is kept for results.json


def test_a_reset_answered_otherwise_is_an_error() -> None:
    with RoboArenaStub(AlohaPolicy(RecordingPolicy()), reset_reply="nope") as server:
        client = arena(server.port)
        client.predict(make_observation())
        with pytest.raises(RemotePolicyError, match="reset failed"):
            client.reset()
        assert client._ws is None


def test_bad_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="dialect: 'grpc' is not one of openpi, roboarena"):
        load_policy("openpi://127.0.0.1:8000?dialect=grpc", validate=False)


TASKS = ("L0_s41_l_pick_yellow_cylinder",)  # one task: the wire is under test (rendering costs ~8 s a trial)
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def test_eval_through_the_stub_scores_the_memorizer_as_in_process(tmp_path: Path) -> None:
    local = tmp_path / "local"
    run_evaluation(EvalConfig(policy="memorizer", output=local, tasks=TASKS, rounds=1, render=False))
    reference = {r["task"]: {k: r.get(k) for k in COMPARED} for r in json.loads((local / "results.json").read_text())}
    assert set(reference) == set(TASKS) and all(r["completion_ok"] for r in reference.values())
    policy = AlohaPolicy(load_policy("memorizer"))
    with RoboArenaStub(policy) as server:
        spec = f"openpi://127.0.0.1:{server.port}/v1/realtime/robot/openpi?dialect=roboarena"
        proc = subprocess.run([*ROBOFOLLOW, "eval", "--policy", spec, "--tasks", ",".join(TASKS), "--rounds", "1",
                               "--render", "--output", str(tmp_path / "remote")],
                              capture_output=True, text=True, timeout=600, env={**os.environ})
        assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "remote" / "results.json").read_text())
    assert {r["task"]: {k: r.get(k) for k in COMPARED} for r in results} == reference
    assert len({r["session_id"] for r in policy.requests}) == len(TASKS)  # one session per episode
    assert "joint_position" in (tmp_path / "remote" / "run.json").read_text()
