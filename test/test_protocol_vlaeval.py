"""vla-eval protocol (allenai vla-evaluation-harness): conformance against vla-eval's own code, run in
.venv-vlaeval (``tools/setup_vlaeval_env.sh``; vla-eval 0.8.0 from PyPI) through test/vlaeval_peer.py:

- our ``vla-eval://`` client against a model server built on vla-eval's ``PredictModelServer`` and
  served by vla-eval's ``serve_async`` (and refusing one whose specs or protocol version differ);
- vla-eval's own ``Connection`` (what its orchestrator drives) against our server, with vla-eval's
  own spec check against its RoboTwin benchmark's specs;
- ``robofollow eval --policy vla-eval://...`` against ``robofollow serve --protocol vla-eval`` gives
  the in-process memorizer's verdicts;

plus the codec's and the server's refusals, with real sockets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.drills.scripted import FaultyPolicy, RecordingPolicy, make_observation
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError
from robofollow_ros.policy.wire.vlaeval.client import ProtocolVersionError, VlaEvalPolicy
from robofollow_ros.policy.wire.vlaeval.codec import (
    EncodedImage,
    encode_image,
    pack_message,
    unpack_message,
)
from robofollow_ros.policy.wire.vlaeval.server import VlaEvalPolicyServer
from robofollow_ros.policy.wire.vlaeval.specs import (
    SpecMismatchError,
    check_action_spec,
    check_observation_spec,
)

ROOT = Path(__file__).resolve().parents[1]
PEER_PYTHON = ROOT / ".venv-vlaeval" / "bin" / "python"
PEER = [str(PEER_PYTHON), str(ROOT / "test" / "vlaeval_peer.py")]
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
CHUNK = 8  # vlaeval_peer.CHUNK


@pytest.fixture(scope="module", autouse=True)
def peer_venv() -> None:
    if not PEER_PYTHON.exists():
        subprocess.run(["bash", str(ROOT / "tools" / "setup_vlaeval_env.sh")], check=True, timeout=600)
    assert PEER_PYTHON.exists(), "tools/setup_vlaeval_env.sh did not create .venv-vlaeval"


@contextmanager
def process_printing_port(args: list[str], marker: str) -> Iterator[int]:
    """A child that prints ``<marker><port>`` once listening; terminated (then killed) on exit."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the child listens or dies
        assert line.startswith(marker), (line, proc.stderr.read() if proc.stderr else "")
        yield int(line[len(marker):].strip())
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def vlaeval_model_server(*options: str) -> Any:
    return process_printing_port([*PEER, "model-server", *options], "PORT ")


def connect(uri: str, **kwargs: Any) -> ClientConnection:
    """A raw websocket client kept open across calls (websockets >= 17 wants that said explicitly)."""
    return ws_connect(uri, legacy=True, **kwargs)


def client(port: int, **kwargs: Any) -> VlaEvalPolicy:
    return VlaEvalPolicy(port=port, timeout_s=20, connect_attempts=1, **kwargs)


# ------------------------------------------------------------------- our client, vla-eval's model server
def test_our_client_gets_the_known_chunk_from_vlaevals_predict_model_server() -> None:
    with vlaeval_model_server() as port:
        policy = client(port)
        try:
            info = policy.server_info()
            assert info["model_server"] == "KnownChunk" and info["protocol_version"] == 1
            assert info["action_spec"]["joints"] == {"name": "joints", "dims": 14, "format": "joint_positions"}
            json.dumps(info)  # goes into run.json as it is
            policy.reset()
            policy.set_instruction("stack the cups")
            obs = make_observation(seed=3)
            actions = policy.predict(obs)
            state = obs["joint_action"]["vector"].astype(np.float32)
            expected = state[None, :] + 0.01 * np.arange(1, CHUNK + 1, dtype=np.float32)[:, None]
            assert actions.shape == (CHUNK, 14) and actions.dtype == np.float32
            np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-6)
            echo = policy.last_reply["echo"]
            assert echo["task_description"] == "stack the cups" and echo["step"] == 0
            # vla-eval's task keys (its RoboTwin benchmark: name = task id, suite, episode_idx, instruction);
            # no name: the task id is privileged, never sent to a policy
            assert echo["task"] == {"suite": "robofollow", "episode_idx": 0, "instruction": "stack the cups"}
            assert echo["state_keys"] == ["joint_state", "state"]
            for camera in ("head_camera", "left_camera", "right_camera"):  # png on the wire: lossless
                image = obs["observation"][camera]["rgb"]
                assert echo["images"][camera] == ["uint8", [240, 320, 3], int(image.astype(np.int64).sum())]
            policy.predict(make_observation(seed=4))
            assert policy.last_reply["echo"]["step"] == 1
            policy.reset()  # episode_end; the next predict starts a new episode on the same connection
            policy.predict(obs)
            assert policy.last_reply["echo"]["step"] == 0 and policy.last_reply["echo"]["task"]["episode_idx"] == 1
            assert policy.episodes == 2 and policy.connections_opened == 1
        finally:
            policy.close()


def test_our_client_refuses_a_vlaeval_server_that_produces_end_effector_deltas() -> None:
    with vlaeval_model_server("--action-spec", "eef") as port:
        policy = client(port)
        with pytest.raises(SpecMismatchError) as refused:
            policy.server_info()
        message = str(refused.value)
        assert "\n" not in message and f"ws://127.0.0.1:{port}" in message
        assert "position: delta_xyz 3-D" in message and "joints: joint_positions 14-D" in message
        policy.close()


def test_our_client_refuses_another_protocol_version_in_one_line() -> None:
    with vlaeval_model_server("--protocol-version", "2") as port:
        policy = client(port)
        with pytest.raises(ProtocolVersionError, match=r"protocol_version 2 \(harness 0\.8\.0\); we speak 1$"):
            policy.server_info()
        policy.close()


# ------------------------------------------------------------------- vla-eval's Connection, our server
def test_vlaevals_connection_gets_our_policys_chunks_and_passes_its_spec_check(tmp_path: Path) -> None:
    policy = RecordingPolicy(chunk_size=5)
    with VlaEvalPolicyServer(policy, port=0, metadata={"policy": "recording"}).start() as server:
        sent_file = tmp_path / "sent.npz"
        done = subprocess.run([*PEER, "client", str(server.address[1]), str(sent_file), "3", "stack the cups"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["warnings"] == []  # vla-eval's check_specs: our specs against its RoboTwin benchmark's
    assert result["hello"]["protocol_version"] == 1 and result["hello"]["robofollow"] == {"policy": "recording"}
    actions = np.asarray(result["actions"])
    assert actions.shape == (3, 5, 14)
    assert [float(a[0, 0]) for a in actions] == [1.0, 2.0, 3.0]  # RecordingPolicy: the call count since reset
    assert [c[0] for c in policy.calls] == ["reset", "set_instruction", "predict", "predict", "predict"]
    assert policy.calls[1] == ("set_instruction", "stack the cups")
    sent = np.load(sent_file)
    predicts = [obs for kind, obs in policy.calls if kind == "predict"]
    for step, obs in enumerate(predicts):  # vla-eval sent png: our server decoded the exact pixels
        for camera in ("head_camera", "left_camera", "right_camera"):
            np.testing.assert_array_equal(obs["observation"][camera]["rgb"], sent[f"{step}/{camera}"])
        np.testing.assert_array_equal(obs["joint_action"]["vector"], sent[f"{step}/joint_state"])
        assert obs["instruction"] == "stack the cups"
    assert server.stats["episodes"] == 1 and server.stats["errors"] == 0


# ------------------------------------------------------------------- the CLI end to end: same verdicts
TASKS = ("L0_pickup_yellow_block_1_left", "L0_pickup_left_cube")
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def scored(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["task"]: {k: r.get(k) for k in COMPARED} for r in results}


def test_eval_over_vlaeval_gives_the_in_process_memorizers_verdicts(tmp_path: Path) -> None:
    run_evaluation(EvalConfig(policy="memorizer", output=tmp_path / "local", tasks=TASKS, rounds=1, render=False))
    local = scored(json.loads((tmp_path / "local" / "results.json").read_text()))
    assert set(local) == set(TASKS) and all(r["completion_ok"] for r in local.values())
    serve = [*ROBOFOLLOW, "serve", "--protocol", "vla-eval", "--policy", "memorizer", "--port", "0"]
    with process_printing_port(serve, "Policy server: 127.0.0.1:") as port:
        done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", f"vla-eval://127.0.0.1:{port}", "--tasks",
                               ",".join(TASKS), "--rounds", "1", "--no-render", "--output", str(tmp_path / "remote")],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert scored(json.loads((tmp_path / "remote" / "results.json").read_text())) == local
    run = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert '"model_server": "robofollow"' in json.dumps(run)  # the server's hello is recorded


def test_a_chunked_vlaeval_server_answers_one_action_per_call_and_a_rows_budget_counts_rows(tmp_path: Path) -> None:
    """vla-eval's own model servers set ``chunk_size`` (pi0 10, oft 10, groot 16): ``PredictModelServer``
    buffers the chunk and answers one action per call. A calls budget then runs max_steps rows (and says
    so); ``--budget rows`` runs max_steps x actions_per_step rows, as a chunked policy's trial."""
    with vlaeval_model_server("--chunk-size", str(CHUNK)) as port:
        policy = client(port)
        try:
            policy.reset()
            first, second = make_observation(seed=3), make_observation(seed=4)
            state = first["joint_action"]["vector"].astype(np.float32)
            a, b = policy.predict(first), policy.predict(second)
            assert a.shape == b.shape == (1, 14)  # one action per call
            # the second answer is the *first* observation's chunk, row 2: the server buffered it
            np.testing.assert_allclose(a[0], state + 0.01, rtol=0, atol=1e-6)
            np.testing.assert_allclose(b[0], state + 0.02, rtol=0, atol=1e-6)
        finally:
            policy.close()
        runs = {}
        for budget in ("calls", "rows"):
            out = tmp_path / budget
            done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", f"vla-eval://127.0.0.1:{port}", "--tasks", TASKS[0],
                                   "--rounds", "1", "--no-render", "--max-steps", "2", "--actions-per-step", "5",
                                   "--budget", budget, "--output", str(out)],
                                  capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert done.returncode == 0, done.stderr[-3000:]
            (result,) = json.loads((out / "results.json").read_text())
            runs[budget] = (result["policy_steps"], result["rows_executed"], json.loads((out / "run.json").read_text()),
                            done.stderr)
    calls, rows = runs["calls"], runs["rows"]
    assert calls[:2] == (2, 2) and rows[:2] == (10, 10)
    assert calls[2]["step_budget"] == {"unit": "calls", "limit": 2, "official": True}
    assert rows[2]["step_budget"] == {"unit": "rows", "limit": 10, "official": False}
    assert calls[2]["budget_used"] == {"calls": 2, "rows": 2} and rows[2]["budget_used"] == {"calls": 10, "rows": 10}
    assert rows[2]["execution"] == {"mode": "lockstep", "budget": "rows"}
    assert "got one row per policy call" in calls[3] and "--budget rows" in calls[3]
    assert "one row per policy call" not in rows[3]


# ------------------------------------------------------------------- refusals: codec, specs, server
def test_the_codec_refuses_what_vla_eval_refuses_and_what_it_would_trust() -> None:
    def envelope(payload: Any) -> bytes:
        return msgpack.packb({"type": "action", "payload": payload, "seq": 1, "timestamp": 0.0}, use_bin_type=True)

    obj = {"__ndarray__": True, "data": b"\0" * 8, "dtype": "|O", "shape": [1]}
    with pytest.raises(WireFormatError,
                       match=re.escape("array dtype: '|O' is not numeric or bool (allowed kinds: b, i, u, f)")):
        unpack_message(envelope({"actions": obj}))
    with pytest.raises(WireFormatError, match="do not match shape"):
        unpack_message(envelope({"actions": {"__ndarray__": True, "data": b"\0" * 8, "dtype": "<f4",
                                             "shape": [1000, 1000]}}))
    png = encode_image(np.zeros((4, 4, 3), np.uint8), "png")
    with pytest.raises(WireFormatError, match="image format: 'png' is not accepted here"):
        unpack_message(envelope({"actions": png}))  # our client decodes only raw images in replies
    liar = {**png, "shape": [4000, 4000, 3]}  # a 4×4 png that claims to be large: refused before decoding
    _, payload, _ = unpack_message(envelope({"image": liar}), image_formats=("png",))
    assert isinstance(payload["image"], EncodedImage) and payload["image"].nbytes == 4000 * 4000 * 3
    with pytest.raises(WireFormatError, match="holds 4×4 pixels"):
        payload["image"].decode()
    with pytest.raises(WireFormatError, match=r"fields \['seq', 'timestamp'\] missing"):
        unpack_message(msgpack.packb({"type": "action", "payload": {}}))
    with pytest.raises(WireFormatError, match="more than 10 msgpack objects"):
        unpack_message(envelope({"actions": list(range(64))}), max_objects=10)
    image = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    _, back, _ = unpack_message(pack_message("observation", {"im": image}, 3, image_format="png"),
                                image_formats=("png",))
    np.testing.assert_array_equal(back["im"].decode(), image)


@pytest.mark.parametrize(("spec", "ok"), [
    (None, True),
    ({"actions": {"name": "raw", "dims": 0, "format": "raw"}}, True),
    ({"left": {"name": "l", "dims": 7, "format": "joint_positions"},
      "right": {"name": "r", "dims": 7, "format": "joint_positions"}}, True),
    ({"joints": {"name": "joints", "dims": 7, "format": "joint_positions"}}, False),
    ({"position": {"name": "position", "dims": 3, "format": "delta_xyz"}}, False),
])
def test_action_specs_we_accept_and_refuse(spec: Any, ok: bool) -> None:
    if ok:
        check_action_spec(spec, "ws://x:1")
    else:
        with pytest.raises(SpecMismatchError, match="does not match ours"):
            check_action_spec(spec, "ws://x:1")


def test_an_end_effector_state_request_is_refused_naming_it() -> None:
    check_observation_spec({"image": {"name": "image", "dims": 0, "format": "rgb_hwc_uint8"},
                            "state": {"name": "state", "dims": 0, "format": "joint_positions"}}, "ws://x:1")
    with pytest.raises(SpecMismatchError, match="asks for 'state' as eef_pos3_axisangle3_gripper2 8-D"):
        check_observation_spec({"state": {"name": "state", "dims": 8, "format": "eef_pos3_axisangle3_gripper2"}},
                               "ws://x:1")


def raw_session(port: int) -> Any:
    ws = connect(f"ws://127.0.0.1:{port}", max_size=None)
    ws.send(pack_message("hello", {"protocol_version": 1}, 1))
    kind, hello, seq = unpack_message(ws.recv(timeout=10))
    assert (kind, seq, hello["model_server"]) == ("hello", 1, "robofollow")
    return ws


def observation_message(seq: int) -> bytes:
    obs = make_observation(seed=seq)
    payload = {"images": {cam: obs["observation"][cam]["rgb"] for cam in ("head_camera", "left_camera")},
               "task_description": "push", "state": obs["joint_action"]["vector"]}
    return pack_message("observation", payload, seq, image_format="jpeg")


def test_a_policy_error_is_an_error_reply_with_its_seq_and_the_connection_stays() -> None:
    with VlaEvalPolicyServer(FaultyPolicy("raise"), port=0).start() as server:
        ws = raw_session(server.address[1])
        ws.send(observation_message(7))
        kind, payload, seq = unpack_message(ws.recv(timeout=10))
        assert (kind, seq) == ("error", 7) and "\n" not in payload["error"] and payload["error"]
        ws.send(pack_message("episode_end", {}, 8))
        ws.send(observation_message(9))  # still served (and still failing)
        assert unpack_message(ws.recv(timeout=10))[0::2] == ("error", 9)
        ws.close()


def test_garbage_and_a_wrong_protocol_version_get_an_error_then_the_close() -> None:
    with VlaEvalPolicyServer(RecordingPolicy(), port=0).start() as server:
        for message, fragment in ((b"\xc1garbage", "invalid msgpack"),
                                  (pack_message("hello", {"protocol_version": 9}, 1), "protocol_version 9"),
                                  (pack_message("observation", {"images": {"agentview": np.zeros((2, 2, 3), np.uint8)},
                                                                "state": np.zeros(14)}, 1), None)):
            ws = connect(f"ws://127.0.0.1:{server.address[1]}")
            ws.send(message)
            kind, payload, _ = unpack_message(ws.recv(timeout=10))
            assert kind == "error"
            if fragment is None:  # a camera that is not ours: refused, the connection stays
                assert "unknown camera names ['agentview']" in payload["error"]
                ws.close()
                continue
            assert fragment in payload["error"]
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
        assert server.stats["errors"] == 3


def test_a_connection_over_the_cap_is_closed_with_try_again_later() -> None:
    with VlaEvalPolicyServer(RecordingPolicy(), port=0, max_connections=1).start() as server:
        first = raw_session(server.address[1])
        second = connect(f"ws://127.0.0.1:{server.address[1]}")
        with pytest.raises(ConnectionClosed) as closed:
            second.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        assert "1 connections are open" in closed.value.rcvd.reason
        first.send(observation_message(2))
        assert unpack_message(first.recv(timeout=10))[0] == "action"
        first.close()


def test_a_remote_error_reaches_our_client_as_remote_policy_error() -> None:
    with VlaEvalPolicyServer(FaultyPolicy("raise"), port=0).start() as server:
        policy = client(server.address[1])
        with pytest.raises(RemotePolicyError, match=f"vla-eval server ws://127.0.0.1:{server.address[1]}"):
            policy.predict(make_observation())
        policy.close()


def test_serve_stops_cleanly_on_sigterm_with_a_client_connected() -> None:
    proc = subprocess.Popen([*ROBOFOLLOW, "serve", "--protocol", "vla-eval", "--policy", "hold", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), line
        ws = raw_session(int(line.rsplit(":", 1)[1]))
        ws.send(observation_message(2))
        kind, payload, _ = unpack_message(ws.recv(timeout=30))
        assert kind == "action" and payload["actions"].shape[1] == 14
        proc.terminate()
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001  # going away
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err[-2000:]
        assert "policy server stopped, policies closed" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
