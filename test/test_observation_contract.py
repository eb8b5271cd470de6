"""What an evaluated policy is handed, on every path (issue 24): the observation contract of the official
``remote_policy.py`` — three RGB images, the joint vector, the instruction — and nothing else, unless
the policy is a built-in that declares ``needs_privileged`` (in process only) or the run was started
with ``--privileged`` (then it is recorded in run.json).

The witness is the ``spy`` drill, which writes down every key path of every observation it receives:
in process (``run_evaluation`` and ``robofollow eval``), behind ``robofollow serve`` over RoboFollow TCP
(``tcp://``) and over openpi (``openpi://``). A raw socket server stands in for a policy server to read
the exact bytes the ``tcp://`` client sends. The ROS ``policy_node`` path is in ``test_node_policy.py``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.evaluation.worker_errors import START_BAD_SPEC, WorkerStartError
from robofollow_ros.exit_status import EXIT_BAD_INPUT
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.drills.spy import read_record
from robofollow_ros.policy.interface import ValidatedPolicy, receives_privileged
from robofollow_ros.policy.spec import PolicySpecError, load_policy, load_served_policy
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message

pytestmark = pytest.mark.timeout(600)

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
SPY = "robofollow_ros.policy.drills.spy:spy"
TASK = "L0_pickup_red_cylinder"
#: The documented observation, every key path down to the leaves (docs/protocols.md).
CONTRACT = {"observation.head_camera.rgb", "observation.left_camera.rgb", "observation.right_camera.rgb",
            "joint_action.vector", "instruction"}
#: What the three cameras and the joints are at the protocol's size, rendered.
RENDERED = {"observation.head_camera.rgb": "uint8 (240, 320, 3)", "observation.left_camera.rgb": "uint8 (240, 320, 3)",
            "observation.right_camera.rgb": "uint8 (240, 320, 3)", "instruction": "str"}
SECRETS = (b"privileged", b"task_id", b"objects", b"object_quats")


def _evaluate(out: Path, policy: str, kwargs: dict[str, Any] | None = None, *, privileged: bool = False,
              render: bool = False) -> dict[str, Any]:
    """One trial of TASK, two policy calls, in this process (``--backend inline``); run.json."""
    run_evaluation(EvalConfig(policy=policy, policy_kwargs=dict(kwargs or {}), output=out, tasks=(TASK,), rounds=1,
                              render=render, backend="inline", settings=EpisodeSettings(2, 1), privileged=privileged))
    results = json.loads((out / "results.json").read_text())
    assert [r.get("policy_error") for r in results] == [None], results
    return json.loads((out / "run.json").read_text())


def _seen(record: Path) -> list[dict[str, Any]]:
    lines = read_record(str(record))
    assert len(lines) == 2  # one line per predict: max_steps
    return lines


def _privileged(keys: list[str]) -> set[str]:
    return {k for k in keys if k.startswith("privileged")}


def _assert_privileged_keys(keys: list[str]) -> None:
    assert set(keys) - _privileged(keys) == CONTRACT
    assert "privileged.task_id" in keys
    assert "privileged.objects.large_red_cylinder" in keys and "privileged.object_quats.large_red_cylinder" in keys


@contextmanager
def _served(record: Path, *extra: str) -> Iterator[int]:
    """``robofollow serve --policy spy`` in its own process, as a user serves a model; yields its port."""
    cmd = [*ROBOFOLLOW, "serve", "--policy", SPY, "--kwargs", json.dumps({"record": str(record)}), "--port", "0",
           *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server listens (or died: empty line)
        match = re.match(r"Policy server: 127\.0\.0\.1:(\d+)", line)
        assert match, (line, proc.stderr.read() if proc.stderr else "")
        yield int(match[1])
    finally:
        proc.terminate()
        proc.wait(30)


# ----------------------------------------------------------------------------------------- in process
@pytest.mark.parametrize("rig", ["robofollow", "aloha"])
def test_in_process_a_policy_is_handed_the_contract_and_nothing_else(tmp_path: Path, rig: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """On the built-in rig and on the ALOHA twin (its meshes rendered): the same keys, shapes and types."""
    monkeypatch.setenv("ROBOFOLLOW_RIG", rig)
    record = tmp_path / "seen.jsonl"
    run = _evaluate(tmp_path / "run", SPY, {"record": str(record)}, render=True)
    for line in _seen(record):
        assert set(line["keys"]) == CONTRACT  # no privileged, no depth, no segmentation
        assert {k: line["leaves"][k] for k in RENDERED} == RENDERED
        assert line["leaves"]["joint_action.vector"] == "float64 (14,)"
    assert run["arguments"]["privileged"] is False
    assert run["rig"]["name"] == rig


def test_robofollow_eval_with_privileged_hands_it_over_and_records_it(tmp_path: Path) -> None:
    record = tmp_path / "seen.jsonl"
    done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", SPY, "--kwargs", json.dumps({"record": str(record)}),
                           "--privileged", "--tasks", TASK, "--rounds", "1", "--max-steps", "2", "--actions-per-step",
                           "1", "--no-render", "--output", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for line in _seen(record):
        _assert_privileged_keys(line["keys"])
    assert json.loads((tmp_path / "run" / "run.json").read_text())["arguments"]["privileged"] is True


def test_a_drill_that_declares_it_gets_it_in_process_without_the_flag(tmp_path: Path) -> None:
    record = tmp_path / "seen.jsonl"
    run = _evaluate(tmp_path / "run", SPY, {"record": str(record), "needs_privileged": True})
    for line in _seen(record):
        _assert_privileged_keys(line["keys"])
    assert run["arguments"]["privileged"] is False  # the flag was not given: the built-in asked for itself
    # run.json says what it was handed: privileged, by its own declaration (read from the built policy: a drill
    # reached by module:function with kwargs, which no list of names could know)
    assert (run["privileged"], run["privileged_source"]) == (True, "policy")
    assert {"privileged.task_id", "privileged.objects"} <= set(run["policy"]["observation_keys"])


@pytest.mark.parametrize(("spec", "kwargs", "declared"), [
    ("oracle", {}, True),
    ("blind", {}, True),
    ("memorizer", {}, False),  # never looks at the scene: it is not handed it either
    ("hold", {}, False),
    ("robofollow_ros.policy.drills.scripted:dying", {"mode": "sleep", "task": TASK}, True),
    ("robofollow_ros.policy.drills.scripted:gated", {"gate": "/nonexistent", "inner": "oracle"}, True),
    ("robofollow_ros.policy.drills.scripted:gated", {"gate": "/nonexistent", "inner": "hold"}, False),
    ("tcp://127.0.0.1:9", {}, False),  # a wire: never by declaration
])
def test_who_receives_privileged_state(spec: str, kwargs: dict[str, Any], declared: bool) -> None:
    policy = load_policy(spec, kwargs)
    assert receives_privileged(policy) is declared
    assert receives_privileged(load_policy(spec, kwargs, privileged=True)) is True
    assert getattr(load_policy(spec, kwargs, validate=False), "forward_privileged", False) is False


class Greedy:
    """A model of the user's own that asks for the ground truth."""

    needs_privileged = True

    def reset(self) -> None: ...

    def set_instruction(self, text: str) -> None: ...

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        return np.zeros((1, 14), np.float32)


def greedy() -> Greedy:
    return Greedy()


def test_a_users_policy_that_declares_it_is_refused_without_the_flag(tmp_path: Path) -> None:
    spec = f"{__name__}:greedy"
    with pytest.raises(PolicySpecError, match=r"declares needs_privileged = True.*--privileged"):
        load_policy(spec)
    with pytest.raises(WorkerStartError) as refused:  # robofollow eval: exit 2 (START_EXIT[bad_spec])
        _evaluate(tmp_path / "refused", spec)
    assert refused.value.kind == START_BAD_SPEC and "--privileged" in str(refused.value)
    assert receives_privileged(load_policy(spec, privileged=True))
    # Served, it is handed what each request carries: the evaluating run decides (robofollow serve).
    assert receives_privileged(load_served_policy(spec))
    # A factory's own wrapper cannot smuggle it in either: the run decides, not the wrapper.
    assert not receives_privileged(load_policy(f"{__name__}:wrapped_hold"))


def wrapped_hold() -> ValidatedPolicy:
    return ValidatedPolicy(load_policy("hold", validate=False), privileged=True)


# ----------------------------------------------------------------------------------------- over TCP
def test_over_tcp_the_served_policy_is_handed_the_contract_and_privileged_only_with_the_flag(tmp_path: Path) -> None:
    record = tmp_path / "seen.jsonl"
    with _served(record) as port:
        run = _evaluate(tmp_path / "plain", f"tcp://127.0.0.1:{port}", render=True)
        for line in _seen(record):
            assert set(line["keys"]) == CONTRACT
            assert {k: line["leaves"][k] for k in RENDERED} == RENDERED
        assert run["arguments"]["privileged"] is False
        record.unlink()
        run = _evaluate(tmp_path / "privileged", f"tcp://127.0.0.1:{port}", privileged=True)
        for line in _seen(record):
            _assert_privileged_keys(line["keys"])
            # run.json says what the server received: the contract and the privileged.* fields (8 keys)
            received = {".".join(k.split(".")[:2]) if k.startswith("privileged.") else k for k in line["keys"]}
            assert set(run["policy"]["observation_keys"]) == received and len(received) == 8
        assert run["arguments"]["privileged"] is True


class CapturingServer:
    """A RoboFollow policy server on a raw socket that keeps the exact bytes of every request frame and
    answers like a ``hold`` policy (the frame's joints, one row)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.frames: list[bytes] = []
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while (head := _read(conn, 4)) is not None:
                body = _read(conn, int.from_bytes(head, "big"))
                if body is None:
                    return
                self.frames.append(head + body)
                request = decode_message(body)
                obs = request.get("obs")
                res = np.asarray(obs["joint_action"]["vector"], np.float32)[None, :] \
                    if request["cmd"] == "predict" else None
                reply = encode_message({"res": res})
                conn.sendall(len(reply).to_bytes(4, "big") + reply)

    def predicts(self) -> list[bytes]:
        return [f for f in self.frames if b'"cmd": "predict"' in f]

    def close(self) -> None:
        self.sock.close()


def _read(conn: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data.extend(chunk)
    return bytes(data)


def test_without_the_flag_nothing_privileged_leaves_the_process(tmp_path: Path) -> None:
    server = CapturingServer()
    try:
        _evaluate(tmp_path / "plain", f"tcp://127.0.0.1:{server.port}")
        plain = server.predicts()
        assert len(plain) == 2
        for frame in plain:
            assert not [s for s in SECRETS if s in frame], frame[:300]
            obs = decode_message(frame[4:])["obs"]
            assert set(obs) == {"observation", "joint_action", "instruction"}
            assert obs["observation"] == {k: {"rgb": None} for k in ("head_camera", "left_camera", "right_camera")}
            assert set(obs["joint_action"]) == {"vector"} and obs["instruction"].startswith("Use your")
        server.frames.clear()
        _evaluate(tmp_path / "privileged", f"tcp://127.0.0.1:{server.port}", privileged=True)  # the control
        assert len(server.predicts()) == 2
        assert all(b'"privileged": {"task_id": "L0_pickup_red_cylinder"' in f for f in server.predicts())
        # The client itself never forwards what it is handed unless its run asked for it.
        server.frames.clear()
        client = load_policy(f"tcp://127.0.0.1:{server.port}", validate=False)
        obs = make_observation(1, 8, 6, "pick")
        obs["privileged"] = {"task_id": TASK, "objects": {"large_red_cylinder": [0.0, 0.0, 0.8]}}
        obs["observation"]["head_camera"]["depth"] = np.zeros((6, 8), np.float32)
        client.predict(obs)
        client.close()
        assert len(server.predicts()) == 1 and not [s for s in (*SECRETS, b"depth") if s in server.predicts()[0]]
    finally:
        server.close()


# ----------------------------------------------------------------------------------------- over openpi
def test_over_openpi_the_served_policy_is_handed_the_contract(tmp_path: Path) -> None:
    record = tmp_path / "seen.jsonl"
    with _served(record, "--protocol", "openpi") as port:
        run = _evaluate(tmp_path / "run", f"openpi://127.0.0.1:{port}", render=True)
    for line in _seen(record):
        assert set(line["keys"]) == CONTRACT
        # openpi clients send 224x224 CHW (resize with pad); the server hands them on as HWC views
        assert line["leaves"]["observation.head_camera.rgb"] == "uint8 (224, 224, 3)"
    assert run["arguments"]["privileged"] is False
    # openpi's request has no place for it: --privileged is refused at once, naming the flag and the SPEC
    with pytest.raises(ValueError, match=r"--privileged: openpi://127\.0\.0\.1:9 cannot carry privileged state"):
        EvalConfig(policy="openpi://127.0.0.1:9", output=tmp_path / "x", privileged=True)
    done = subprocess.run([*ROBOFOLLOW, "eval", "--policy", "openpi://127.0.0.1:9", "--privileged", "--output",
                           str(tmp_path / "refused")], capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_BAD_INPUT and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--privileged" in done.stderr and "openpi://127.0.0.1:9" in done.stderr


def test_a_resumed_run_keeps_its_privileged_flag(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _evaluate(out, "hold")
    with pytest.raises(ValueError, match=r"privileged: False .*True|privileged.*differ"):
        run_evaluation(EvalConfig(policy="hold", output=out, tasks=(TASK,), rounds=1, render=False, backend="inline",
                                  settings=EpisodeSettings(2, 1), resume=True, privileged=True))
