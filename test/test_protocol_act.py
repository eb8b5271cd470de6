"""The json_numpy ``POST /act`` family (issue 25): our ``act+http://`` client against a stub of the peers
(``act_stub_server.py``, json-numpy from PyPI as the codec) for each preset, and our ``serve --protocol
act`` against a client written like openvla-oft's ``run_aloha_eval.get_action_from_server``; real
sockets throughout. The end-to-end test scores the memorizer over the wire as in process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import json_numpy
import numpy as np
import pytest
import requests

from act_stub_server import StubActServer
from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.act.server import ActPolicyServer
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError

pytestmark = pytest.mark.timeout(300)
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


def oft_chunk(payload: dict[str, Any]) -> np.ndarray:
    """What the stub's "model" answers: 25 rows of the state plus the row index (a chunk that depends on the input)."""
    return (np.asarray(payload["state"], np.float32)[None] + np.arange(25, dtype=np.float32)[:, None] * 0.01)


def test_openvla_oft_preset_sends_the_aloha_keys_and_reads_the_chunk() -> None:
    with StubActServer(lambda p: (200, oft_chunk(p))) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}", {"timeout_s": 10})
        client.reset()
        client.set_instruction("pick the cube")
        obs = make_observation(seed=3)
        chunk = client.predict(obs)
        payload, encoded, headers = stub.requests[-1]
    assert not encoded
    assert set(payload) == {"full_image", "left_wrist_image", "right_wrist_image", "state", "instruction"}
    for key in ("full_image", "left_wrist_image", "right_wrist_image"):
        assert payload[key].dtype == np.uint8 and payload[key].shape == (224, 224, 3)
    np.testing.assert_array_equal(payload["state"], np.float32(obs["joint_action"]["vector"]))
    assert payload["instruction"] == "pick the cube" and len(headers["X-Session-ID"]) == 16
    assert chunk.dtype == np.float32 and chunk.shape == (25, ACTION_DIM)
    np.testing.assert_allclose(chunk, oft_chunk(payload))


def test_double_encoding_round_trips_and_the_error_string_is_a_failure() -> None:
    mode = {"fail": False}

    def respond(p: dict[str, Any]) -> tuple[int, Any]:
        if mode["fail"]:
            raise RuntimeError("model crashed")
        return 200, oft_chunk(p)

    with StubActServer(respond) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}/act?encoded=true", {"timeout_s": 10})
        chunk = client.predict(make_observation(seed=1))
        assert stub.requests[-1][1] is True  # the stub saw {"encoded": ...}
        np.testing.assert_allclose(chunk, oft_chunk(stub.requests[-1][0]))
        mode["fail"] = True
        with pytest.raises(RemotePolicyError, match='answered "error"'):
            client.predict(make_observation(seed=1))


@pytest.mark.parametrize("empty", [[], np.zeros((0, ACTION_DIM), np.float32)], ids=["list", "rows"])
def test_an_empty_reply_is_called_empty_not_zero_columns(empty: Any) -> None:
    with StubActServer(lambda p: (200, empty)) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}", {"timeout_s": 10})
        with pytest.raises(WireFormatError, match=r"reply: empty \(shape \((0,|0, 14)\)\)") as info:
            client.predict(make_observation())
    assert "columns" not in str(info.value)


def test_xvla_preset_refuses_ee6d_and_with_joints_speaks_xvla_fields_and_errors() -> None:
    with pytest.raises(ValueError, match="EE6D"):
        load_policy("act+http://127.0.0.1:8000?preset=xvla&domain_id=3", {})
    with pytest.raises(ValueError, match="domain_id"):
        load_policy("act+http://127.0.0.1:8000?preset=xvla&action_space=joints", {})

    def respond(p: dict[str, Any]) -> tuple[int, Any]:
        if p["language_instruction"] == "bad":
            return 400, {"error": "proprio has the wrong shape"}
        proprio = json_numpy.loads(p["proprio"])  # X-VLA fields are json_numpy strings
        return 200, {"action": np.tile(proprio, (30, 1)).tolist()}

    with StubActServer(respond) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}/act?preset=xvla&action_space=joints&domain_id=3",
                             {"timeout_s": 10})
        obs = make_observation(seed=2)
        client.set_instruction("fold")
        chunk = client.predict(obs)
        payload = stub.requests[-1][0]
        assert payload["domain_id"] == 3 and payload["steps"] == 10 and payload["language_instruction"] == "fold"
        image0 = json_numpy.loads(payload["image0"])
        assert image0.shape == (240, 320, 3) and isinstance(payload["image2"], str)
        proprio = json_numpy.loads(payload["proprio"])
        assert proprio.shape == (20,) and not proprio[14:].any()
        np.testing.assert_allclose(chunk, np.tile(np.float32(obs["joint_action"]["vector"]), (30, 1)))
        client.set_instruction("bad")
        with pytest.raises(RemotePolicyError, match="HTTP 400: proprio has the wrong shape"):
            client.predict(obs)


def test_gr00t_http_preset_wraps_the_observation_and_concatenates_the_action_parts() -> None:
    def respond(p: dict[str, Any]) -> tuple[int, Any]:
        o = p["observation"]
        assert o["video.cam_high"].shape == (1, 240, 320, 3)
        rows = 16
        return 200, {k.replace("state.", "action."): np.repeat(v, rows, axis=0).tolist()
                     for k, v in o.items() if k.startswith("state.")}

    with StubActServer(respond) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}/act?preset=gr00t-http&gripper=closed1",
                             {"timeout_s": 10})
        obs = make_observation(seed=4)
        chunk = client.predict(obs)
        sent = stub.requests[-1][0]["observation"]
    assert sent["state.left_gripper"].tolist() == [[0.0]]  # ours 1 = open is the peer's 0 with closed1
    assert set(sent) >= {"state.left_arm", "state.right_arm", "annotation.human.task_description"}
    np.testing.assert_allclose(chunk, np.tile(np.float32(obs["joint_action"]["vector"]), (16, 1)))  # and back


def test_a_silent_server_times_out_and_an_oversize_reply_is_refused() -> None:
    release = threading.Event()

    def respond(p: dict[str, Any]) -> tuple[int, Any]:
        if p["instruction"] == "slow":
            release.wait(30)
        return 200, np.zeros((4000, 14)) if p["instruction"] == "huge" else oft_chunk(p)

    with StubActServer(respond) as stub:
        client = load_policy(f"act+http://127.0.0.1:{stub.port}",
                             {"timeout_s": 0.5, "max_reply_bytes": 100_000})
        client.set_instruction("slow")
        with pytest.raises(TimeoutError, match=r"within 0\.5 s"):
            client.predict(make_observation())
        release.set()
        client.set_instruction("huge")
        with pytest.raises(WireFormatError, match="exceeds the limit of 100,000"):
            client.predict(make_observation())


def test_the_key_map_names_the_bad_field() -> None:
    with pytest.raises(ValueError, match="unknown option"):
        load_policy("act+http://127.0.0.1:8777?imagekeys=x", {})
    with pytest.raises(ValueError, match="state_key"):
        load_policy("act+http://127.0.0.1:8777?state_key=a:0:6", {})
    with pytest.raises(ValueError, match="preset"):
        load_policy("act+http://127.0.0.1:8777?preset=nope", {})


@pytest.mark.filterwarnings("ignore:elementwise comparison failed:FutureWarning")  # inside json_numpy
def test_openvla_oft_style_client_gets_a_valid_chunk_from_our_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """As run_aloha_eval does: json_numpy.patch() (undone after the test), requests.post(url, json=obs).json()."""
    monkeypatch.setattr(json, "dumps", json_numpy.dumps)
    monkeypatch.setattr(json, "loads", json_numpy.loads)
    rng = np.random.default_rng(0)
    observation = {k: rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
                   for k in ("full_image", "left_wrist_image", "right_wrist_image")}
    observation |= {"state": rng.uniform(-1, 1, 14), "instruction": "stack the blocks"}
    with ActPolicyServer(lambda: HoldPolicy(25), port=0).start() as server:
        url = f"http://127.0.0.1:{server.address[1]}/act"
        actions = requests.post(url, json=observation, timeout=30).json()
        encoded = requests.post(url, json={"encoded": json_numpy.dumps(observation)}, timeout=30).json()
        bad = requests.post(url, json={"state": [1, 2]}, timeout=30)
    expected = HoldPolicy(25).predict({"joint_action": {"vector": observation["state"]}})
    assert isinstance(actions, np.ndarray) and actions.shape == (25, 14)
    np.testing.assert_allclose(actions, expected)
    np.testing.assert_allclose(json_numpy.loads(encoded), expected)  # double-encoded reply to an encoded request
    assert bad.status_code == 400 and "state" in bad.json()["error"]


def _raw(port: int, request: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_server_requires_a_bounded_body_that_arrives_in_time() -> None:
    with ActPolicyServer(lambda: HoldPolicy(25), port=0, frame_timeout_s=0.5, max_body_bytes=1 << 20).start() as server:
        port = server.address[1]
        no_length = _raw(port, b"POST /act HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        too_big = _raw(port, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n")
        partial = _raw(port, b"POST /act HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"sta")
        health = requests.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
    assert no_length.startswith(b"HTTP/1.1 411") and b"Content-Length: missing" in no_length
    assert too_big.startswith(b"HTTP/1.1 413") and b"exceed the limit of 1,048,576" in too_big
    assert partial.startswith(b"HTTP/1.1 408") and b"not complete within 0.5 s" in partial
    assert health["protocol"] == "act" and health["session_header"] == "X-Session-ID"
    assert server.stats["timeouts"] == 1


TASKS = ["L0_pickup_red_cylinder"]  # one task: the wire, not the scorer, is under test (rendering costs ~8 s a trial)
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def test_eval_over_act_http_gives_the_in_process_verdicts(tmp_path: Path) -> None:
    run_evaluation(EvalConfig(policy="memorizer", output=tmp_path / "local", tasks=tuple(TASKS), rounds=1,
                              render=False))
    local = {r["task"]: {k: r.get(k) for k in COMPARED}
             for r in json.loads((tmp_path / "local" / "results.json").read_text())}
    proc = subprocess.Popen([*ROBOFOLLOW, "serve", "--protocol", "act", "--policy", "memorizer", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        result = subprocess.run([*ROBOFOLLOW, "eval", "--policy", f"act+http://127.0.0.1:{port}", "--tasks",
                                 ",".join(TASKS), "--rounds", "1", "--render", "--output", str(tmp_path / "remote")],
                                capture_output=True, text=True, timeout=280)
        assert result.returncode == 0, result.stderr[-3000:]
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    remote = {r["task"]: {k: r.get(k) for k in COMPARED}
              for r in json.loads((tmp_path / "remote" / "results.json").read_text())}
    assert set(local) == set(TASKS) and all(r["completion_ok"] for r in local.values())
    assert remote == local
    run = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert "act" in json.dumps(run)
