"""XPolicyLab websocket protocol: our ``xpolicylab://`` client against a stub XPolicyLab server.

XPolicyLab is not on PyPI, so the server here is a test double written from its protocol files
(``client_server/ws/protocol/{messages,codec,schemas}.py`` and ``ws/model_server.py``): frames are
decoded and encoded with the real ``msgpack_numpy`` exactly as their codec does (object dtypes
refused), every request envelope is checked field by field against their pydantic ``Frame``
(``extra="forbid"``: exactly these fields, these types), the lifecycle and error replies follow their
``PolicyServer`` (no answer to an undecodable frame, ``error`` frames with their codes), and the model
behind it has their model interface (``reset`` / ``prepare_case`` / ``update_obs`` + ``get_action`` /
``on_trial_end``). Real sockets throughout; the end-to-end test runs ``robofollow eval`` against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import msgpack
import msgpack_numpy
import numpy as np
import pytest
import websockets.sync.server

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.drills.scripted import RecordingPolicy, make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.common import RemotePolicyError, WireFormatError
from robofollow_ros.policy.wire.xpolicylab.client import XPolicyLabPolicy
from robofollow_ros.policy.wire.xpolicylab.codec import packb, unpackb
from robofollow_ros.policy.wire.xpolicylab.observation import ObservationError, from_xpolicylab_actions

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
#: Their Frame's wire fields (schemas.py ``to_wire_dict``) and the type each must have.
FRAME_FIELDS: dict[str, tuple[type, ...]] = {
    "message_type": (str,), "message_id": (str,), "evaluation_id": (str,), "action_case_id": (str, type(None)),
    "trial_id": (str, type(None)), "repeat_index": (int, type(None)), "step": (int,), "sent_at": (str,),
    "payload": (dict,)}
REQUESTS = {"hello": "hello_ack", "prepare_case": "prepare_case_ack", "reset": "reset_result",
            "infer": "infer_result", "trial_end": "trial_end_ack", "heartbeat": "heartbeat_ack"}
STATE_KEYS = (("left_arm_joint_state", 6), ("left_ee_joint_state", 1), ("right_arm_joint_state", 6),
              ("right_ee_joint_state", 1))


# ----------------------------------------------------------------------------- the stub server
def _decode_numpy(obj: dict[Any, Any]) -> Any:  # their codec's object hook
    if obj.get(b"nd") is True and obj.get(b"kind") == b"O":
        raise ValueError("object dtype numpy arrays are not supported")
    return msgpack_numpy.decode(obj)


def their_encode(frame: dict[str, Any]) -> bytes:
    return msgpack.packb(frame, default=msgpack_numpy.encode, use_bin_type=True)


def envelope_violations(frame: dict[str, Any]) -> list[str]:
    """What their pydantic ``Frame`` (extra="forbid") would refuse in a request envelope."""
    problems = [f"extra field {k!r}" for k in frame if k not in FRAME_FIELDS]
    problems += [f"missing field {k!r}" for k in FRAME_FIELDS if k not in frame]
    problems += [f"{k}: {type(frame[k]).__name__}" for k, types in FRAME_FIELDS.items()
                 if k in frame and (not isinstance(frame[k], types) or isinstance(frame[k], bool))]
    if frame.get("message_type") not in {*REQUESTS, "close"}:
        problems.append(f"message_type {frame.get('message_type')!r}")
    try:
        datetime.fromisoformat(str(frame.get("sent_at")))
    except ValueError:
        problems.append(f"sent_at {frame.get('sent_at')!r}")
    return problems


class RoboFollowModel:
    """An XPolicyLab model (their ``ModelTemplate`` interface) around one of our policies, decoding their
    v1.0 observation as their adapters do (``pack_robot_state`` order, ``vision.<cam>.color``)."""

    def __init__(self, policy: Any, as_dicts: bool = True) -> None:
        self.policy, self.as_dicts = policy, as_dicts
        self.obs: dict[str, Any] | None = None
        self.instruction: str | None = None
        self.calls: list[str] = []
        self.cases: list[dict[str, Any]] = []

    def prepare_case(self, case_meta: dict[str, Any]) -> None:
        self.calls.append("prepare_case")
        self.cases.append(case_meta)

    def reset(self) -> None:
        self.calls.append("reset")
        self.policy.reset()
        self.obs, self.instruction = None, None

    def update_obs(self, obs: dict[str, Any]) -> None:
        self.calls.append("update_obs")
        assert obs["data_format_version"] == "v1.0"
        self.obs = obs

    def get_action(self) -> Any:
        assert self.obs is not None
        if self.instruction != self.obs["instruction"]:
            self.instruction = self.obs["instruction"]
            self.policy.set_instruction(self.instruction)
        vector = np.concatenate([np.asarray(self.obs["state"][k]).reshape(-1) for k, _ in STATE_KEYS])
        names = {"cam_head": "head_camera", "cam_left_wrist": "left_camera", "cam_right_wrist": "right_camera"}
        cameras = {names[k]: {"rgb": v["color"]} for k, v in self.obs["vision"].items() if k in names}
        actions = np.asarray(self.policy.predict({"observation": cameras, "joint_action": {"vector": vector},
                                                  "instruction": self.instruction}), dtype=np.float32)
        if not self.as_dicts:
            return actions
        rows = []
        for row in actions:  # their unpack_robot_state(..., source_type="obs")
            step, offset = {}, 0
            for key, size in STATE_KEYS:
                step[key] = row[offset:offset + size]
                offset += size
            rows.append(step)
        return rows

    def on_trial_end(self, result: dict[str, Any]) -> None:
        self.calls.append("trial_end")


class XPolicyLabStub:
    """Their ``PolicyServer`` dispatch over a real websocket, one model under a lock.

    ``silent`` message types get no answer (a hung model); ``mangle`` rewrites a reply frame before it
    is sent (a misbehaving server)."""

    def __init__(self, model: Any, *, silent: frozenset[str] = frozenset(),
                 mangle: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.model, self.silent, self.mangle = model, silent, mangle
        self.frames: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self.lock = threading.Lock()
        self.server = websockets.sync.server.serve(self._handler, "127.0.0.1", 0, compression=None, max_size=None)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> XPolicyLabStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.thread.join(20)

    def types(self) -> list[str]:
        return [f["message_type"] for f in self.frames]

    def _handler(self, ws: websockets.sync.server.ServerConnection) -> None:
        for raw in ws:
            if not isinstance(raw, bytes):
                continue  # their server ignores text frames
            try:
                frame = msgpack.unpackb(raw, raw=False, object_hook=_decode_numpy)
            except Exception:
                continue  # ... and undecodable ones, without an answer
            self.frames.append(frame)
            self.violations += envelope_violations(frame)
            kind = frame.get("message_type")
            if kind == "close":
                ws.close()
                return
            if kind in self.silent:
                continue
            reply = self._dispatch(frame)
            if self.mangle is not None:
                reply = self.mangle(reply)
            ws.send(reply if isinstance(reply, str) else their_encode(reply))

    def _reply(self, frame: dict[str, Any], kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**{k: frame.get(k) for k in FRAME_FIELDS}, "message_type": kind, "payload": payload,
                "sent_at": datetime.now().astimezone().isoformat()}

    def _dispatch(self, frame: dict[str, Any]) -> dict[str, Any]:
        kind, payload = frame["message_type"], frame.get("payload") or {}
        try:
            with self.lock:
                if kind == "hello":
                    return self._reply(frame, "hello_ack", {"ok": True, "server": "xpolicylab_stub"})
                if kind == "prepare_case":
                    self.model.prepare_case({**payload, "action_case_id": frame["action_case_id"]})
                    return self._reply(frame, "prepare_case_ack", {"ok": True})
                if kind == "reset":
                    try:
                        self.model.reset()
                    except Exception as exc:
                        return self._error(frame, "reset_failed", str(exc))
                    return self._reply(frame, "reset_result", {"ok": True})
                if kind == "infer":
                    if payload.get("observation") is None:
                        return self._error(frame, "invalid_frame", "infer payload missing observation")
                    start = time.perf_counter()
                    try:
                        self.model.update_obs(payload["observation"])
                        actions = self.model.get_action()
                    except Exception as exc:
                        return self._error(frame, "infer_failed", str(exc))
                    return self._reply(frame, "infer_result", {"actions": actions,
                                                               "latency_ms": 1000 * (time.perf_counter() - start)})
                if kind == "trial_end":
                    self.model.on_trial_end(dict(payload))
                    return self._reply(frame, "trial_end_ack", {"ok": True})
                if kind == "heartbeat":
                    return self._reply(frame, "heartbeat_ack", {"ok": True})
                return self._error(frame, "unknown_message_type", f"unsupported request type: {kind}")
        except Exception as exc:
            return self._error(frame, "internal", str(exc))

    def _error(self, frame: dict[str, Any], code: str, message: str) -> dict[str, Any]:
        return self._reply(frame, "error", {"code": code, "message": message, "details": {}})


@pytest.fixture
def recorder() -> Iterator[tuple[XPolicyLabStub, RoboFollowModel, RecordingPolicy]]:
    policy = RecordingPolicy(chunk_size=5)
    model = RoboFollowModel(policy)
    with XPolicyLabStub(model) as stub:
        yield stub, model, policy


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes (a frame sent without an answer)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def client(port: int, **kwargs: Any) -> XPolicyLabPolicy:
    return XPolicyLabPolicy("127.0.0.1", port, **{"timeout_s": 20, "connect_attempts": 2,
                                                  "connect_interval_s": 0.05, **kwargs})


# ----------------------------------------------------------------------------- codec
def test_our_frames_decode_with_msgpack_numpy_and_theirs_with_ours() -> None:
    message = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.int64(7), "c": [np.ones(2, np.uint8)],
               "flag": np.bool_(True), "s": "x"}
    back = msgpack.unpackb(packb(message), raw=False, object_hook=msgpack_numpy.decode)
    np.testing.assert_array_equal(back["a"], message["a"])
    assert back["b"] == 7 and back["b"].dtype == np.int64 and back["flag"] == np.bool_(True)
    ours = unpackb(their_encode(message))
    np.testing.assert_array_equal(ours["a"], message["a"])
    assert ours["b"] == 7 and ours["b"].dtype == np.int64 and ours["c"][0].dtype == np.uint8 and ours["s"] == "x"
    # non-contiguous arrays travel by value
    np.testing.assert_array_equal(unpackb(packb({"t": message["a"].T}))["t"], message["a"].T)


@pytest.mark.parametrize(("payload", "fragment"), [
    (np.array([{"x": 1}, None], dtype=object), "kind"),                        # msgpack-numpy would pickle it
    (np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]), "kind"),                # structured
    (np.array(["ab", "cd"]), "refused"),                                      # unicode kind U
    (complex(1, 2), "complex"),
])
def test_dangerous_or_non_numeric_payloads_are_refused(payload: Any, fragment: str) -> None:
    with pytest.raises(WireFormatError, match=fragment):
        unpackb(their_encode({"x": payload}))


@pytest.mark.parametrize("mutate", [
    lambda m: m.__setitem__(b"shape", [1_000_000, 1_000_000]),    # a hostile shape allocates nothing
    lambda m: m.__setitem__(b"type", "|O"),
    lambda m: m.__setitem__(b"data", "text"),
    lambda m: m.__setitem__(b"shape", [-1]),
])
def test_malformed_arrays_are_wire_format_errors(mutate: Any) -> None:
    encoded = msgpack_numpy.encode(np.zeros((2, 3), np.float32))
    mutate(encoded)
    with pytest.raises(WireFormatError):
        unpackb(msgpack.packb({"x": encoded}, use_bin_type=True))


def test_object_count_is_bounded() -> None:
    with pytest.raises(WireFormatError, match="maps and lists"):
        unpackb(msgpack.packb([[] for _ in range(5000)]), max_objects=1000)
    assert len(unpackb(msgpack.packb([[] for _ in range(999)]), max_objects=1000)) == 999


def test_sending_object_arrays_is_refused() -> None:
    with pytest.raises(WireFormatError, match="cannot be sent"):
        packb({"x": np.array([None], dtype=object)})


# ----------------------------------------------------------------------------- actions
def test_actions_as_array_or_per_step_dicts_become_our_chunk() -> None:
    chunk = np.random.default_rng(0).normal(size=(4, 14)).astype(np.float32)
    np.testing.assert_array_equal(from_xpolicylab_actions(chunk), chunk)
    np.testing.assert_array_equal(from_xpolicylab_actions(chunk.tolist()), chunk)
    np.testing.assert_array_equal(from_xpolicylab_actions(chunk[0]), chunk[:1])
    dicts = [{"left_arm_joint_state": r[:6], "left_ee_joint_state": r[6:7], "right_arm_joint_state": r[7:13],
              "right_ee_joint_state": r[13:]} for r in chunk]
    np.testing.assert_array_equal(from_xpolicylab_actions(dicts), chunk)
    with pytest.raises(ValueError, match="right_ee_joint_state"):
        from_xpolicylab_actions([{k: v for k, v in dicts[0].items() if k != "right_ee_joint_state"}])
    with pytest.raises(ValueError, match=r"left_arm_joint_state: 7 values"):
        from_xpolicylab_actions([{**dicts[0], "left_arm_joint_state": np.zeros(7)}])
    with pytest.raises(ValueError, match=r"shape \(4, 8\)"):
        from_xpolicylab_actions(np.zeros((4, 8)))  # a single-arm 7+1 model cannot drive the rig


# ----------------------------------------------------------------------------- lifecycle against the stub
def test_lifecycle_envelopes_and_observation_match_their_protocol(recorder) -> None:
    stub, model, policy = recorder
    c = client(stub.port, evaluation_id="eval-1")
    c.reset()  # the evaluator's probe: nothing is sent
    assert c.server_info() == {"protocol": "xpolicylab", "hello_ack": {"ok": True, "server": "xpolicylab_stub"},
                               "evaluation_id": "eval-1"}
    c.set_instruction("pick the cube")
    obs = make_observation(seed=3)
    first = c.predict(obs)
    second = c.predict(make_observation(seed=4))
    assert first.shape == (5, 14) and first.dtype == np.float32 and first[0, 0] == 1.0 and second[0, 0] == 2.0
    c.reset()
    c.set_instruction("pick the cube")
    assert c.predict(obs)[0, 0] == 1.0  # a new trial: the model was reset
    c.reset()
    c.set_instruction("push the bowl")
    c.predict(obs)
    c.close()
    assert wait_for(lambda: "close" in stub.types())  # close has no answer
    assert stub.violations == []
    assert stub.types() == ["hello", "prepare_case", "reset", "infer", "infer", "trial_end", "reset", "infer",
                            "trial_end", "prepare_case", "reset", "infer", "trial_end", "close"]
    frames = stub.frames
    assert {f["evaluation_id"] for f in frames} == {"eval-1"} and len({f["message_id"] for f in frames}) == len(frames)
    infers = [f for f in frames if f["message_type"] == "infer"]
    assert [f["step"] for f in infers] == [0, 1, 0, 0]
    assert [f["trial_id"] for f in infers] == ["trial-0", "trial-0", "trial-1", "trial-2"]
    resets = [f for f in frames if f["message_type"] == "reset"]
    assert [(f["action_case_id"], f["repeat_index"]) for f in resets] == [("case-0", 0), ("case-0", 1), ("case-1", 0)]
    assert resets[0]["payload"] == {"trial_id": "trial-0"}
    assert model.cases[1] == {"action_case_id": "case-1", "instruction": "push the bowl"}
    sent = infers[0]["payload"]["observation"]
    assert set(sent) == {"vision", "state", "instruction", "data_format_version", "env_idx"}
    assert sent["instruction"] == "pick the cube"
    assert set(sent["vision"]) == {"cam_head", "cam_left_wrist", "cam_right_wrist"}
    np.testing.assert_array_equal(sent["vision"]["cam_left_wrist"]["color"], obs["observation"]["left_camera"]["rgb"])
    vector = obs["joint_action"]["vector"].astype(np.float32)
    assert sent["state"]["left_ee_joint_state"].tolist() == [vector[6]]
    assert sent["state"]["right_ee_joint_state"][0] == 1
    np.testing.assert_array_equal(sent["state"]["right_arm_joint_state"], vector[7:13])
    # our policy behind the stub got exactly what we sent
    predicted = [call[1] for call in policy.calls if call[0] == "predict"]
    np.testing.assert_array_equal(predicted[0]["joint_action"]["vector"], vector)


def test_camera_key_map_renames_and_leaves_out(recorder) -> None:
    stub, _, _ = recorder
    c = client(stub.port, cameras="head=cam_high,left_wrist=")
    c.predict(make_observation())
    assert set(stub.frames[-1]["payload"]["observation"]["vision"]) == {"cam_high", "cam_right_wrist"}
    c.close()
    with pytest.raises(ValueError, match="unknown camera names"):
        XPolicyLabPolicy("127.0.0.1", 9, cameras={"top": "cam_high"})


def test_a_missing_camera_is_refused_naming_it() -> None:
    obs = make_observation()
    del obs["observation"]["right_camera"]
    with pytest.raises(ObservationError, match=r"observation\.right_camera\.rgb: missing"):
        XPolicyLabPolicy("127.0.0.1", 9).predict(obs)


@pytest.mark.parametrize(("code", "fail"), [("infer_failed", "infer"), ("reset_failed", "reset")])
def test_error_replies_are_one_line_naming_server_and_code(code: str, fail: str) -> None:
    class Broken(RoboFollowModel):
        def reset(self) -> None:
            if fail == "reset":
                raise RuntimeError("no checkpoint\nloaded")

        def get_action(self) -> Any:
            raise RuntimeError("CUDA out of memory")

    with XPolicyLabStub(Broken(RecordingPolicy())) as stub:
        c = client(stub.port)
        with pytest.raises(RemotePolicyError) as info:
            c.predict(make_observation())
        text = str(info.value)
        assert "\n" not in text and f"127.0.0.1:{stub.port}" in text and f"{fail} failed: {code}:" in text
        assert ("CUDA out of memory" if fail == "infer" else "no checkpoint loaded") in text
        c.close()


def test_unknown_message_type_error_code_reaches_the_caller(recorder) -> None:
    stub, _, _ = recorder
    c = client(stub.port)
    c.server_info()
    with pytest.raises(RemotePolicyError, match="unknown_message_type"):
        c._request("infer_result", {})  # a type their server does not take as a request
    c.close()


def test_an_unanswered_request_times_out_and_drops_the_connection() -> None:
    with XPolicyLabStub(RoboFollowModel(RecordingPolicy()), silent=frozenset({"infer"})) as stub:
        c = client(stub.port, timeout_s=0.3)
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"no infer_result within 0\.3 s"):
            c.predict(make_observation())
        assert time.monotonic() - start < 10 and c._ws is None
        with pytest.raises(TimeoutError):  # a fresh connection, hello and a fresh trial first
            c.predict(make_observation())
        assert c.connections_opened == 2 and stub.types().count("reset") == 2 and stub.types().count("hello") == 2


@pytest.mark.parametrize(("mangle", "fragment"), [
    (lambda r: {**r, "message_id": "someone-else"}, "answers message_id 'someone-else'"),
    (lambda r: {**r, "extra": 1}, "unknown envelope fields"),
    (lambda r: {**r, "message_type": "reset_result"} if r["message_type"] == "infer_result" else r,
     "infer answered with reset_result"),
    (lambda r: "a text frame", "text"),
    (lambda r: {**r, "payload": {"actions": np.zeros((3, 7))}} if r["message_type"] == "infer_result" else r,
     r"shape \(3, 7\)"),
])
def test_misbehaving_servers_get_one_clear_error(mangle: Any, fragment: str) -> None:
    with XPolicyLabStub(RoboFollowModel(RecordingPolicy()), mangle=mangle) as stub:
        c = client(stub.port)
        with pytest.raises(WireFormatError, match=fragment):
            c.predict(make_observation())
        c.close()


def test_oversized_replies_and_requests_are_refused() -> None:
    big = lambda r: {**r, "payload": {**r["payload"], "pad": b"x" * 200_000}}  # noqa: E731
    with XPolicyLabStub(RoboFollowModel(RecordingPolicy()), mangle=big) as stub:
        c = client(stub.port, max_reply_bytes=100_000)
        with pytest.raises(ConnectionError, match=r"1009|too big"):
            c.predict(make_observation())
    with XPolicyLabStub(RoboFollowModel(RecordingPolicy())) as stub:
        c = client(stub.port, max_message_bytes=10_000)  # ~690 kB of images
        with pytest.raises(WireFormatError, match=r"infer request: .* exceed the limit of 10000"):
            c.predict(make_observation())
        assert "infer" not in stub.types()  # refused before sending
        c.close()


def test_unreachable_server_gives_up_after_the_configured_attempts() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match="no connection after 2 attempts"):
        client(port).predict(make_observation())


def test_spec_builds_the_client_with_url_options(recorder) -> None:
    stub, _, _ = recorder
    policy = load_policy(f"xpolicylab://127.0.0.1:{stub.port}?evaluation_id=from-url&timeout_s=15", validate=False)
    assert isinstance(policy, XPolicyLabPolicy) and policy.timeout_s == 15 and policy.evaluation_id == "from-url"
    assert policy.predict(make_observation()).shape == (5, 14)
    policy.close()


# ----------------------------------------------------------------------------- end to end
TASKS = ("L0_pickup_yellow_block_1_left",)  # one task: the wire is under test (rendering costs ~8 s a trial)
COMPARED = ("task", "intent_score", "exec_score", "completion_ok", "phases", "frames", "policy_steps")


def test_eval_through_the_stub_scores_the_memorizer_as_in_process(tmp_path: Path) -> None:
    local = tmp_path / "local"
    run_evaluation(EvalConfig(policy="memorizer", output=local, tasks=TASKS, rounds=1, render=False))
    reference = {r["task"]: {k: r.get(k) for k in COMPARED} for r in json.loads((local / "results.json").read_text())}
    assert set(reference) == set(TASKS) and all(r["completion_ok"] for r in reference.values())
    model = RoboFollowModel(load_policy("memorizer"))
    with XPolicyLabStub(model) as stub:
        proc = subprocess.run([*ROBOFOLLOW, "eval", "--policy", f"xpolicylab://127.0.0.1:{stub.port}", "--tasks",
                               ",".join(TASKS), "--rounds", "1", "--render", "--output", str(tmp_path / "remote")],
                              capture_output=True, text=True, timeout=600, env={**os.environ})
        assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "remote" / "results.json").read_text())
    assert {r["task"]: {k: r.get(k) for k in COMPARED} for r in results} == reference
    assert stub.violations == [] and stub.types().count("prepare_case") == len(TASKS)
    run = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert "xpolicylab_stub" in json.dumps(run)
