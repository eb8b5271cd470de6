"""Episodes start where a peer's client starts them (issue 36), on servers whose protocol has no
episode message: ``serve --protocol openpi`` (openpi's clients keep one ``WebsocketClientPolicy`` for
every episode) and ``serve --protocol act`` (openvla-oft's ``run_aloha_eval`` posts observations with no
session header and no reset). The rule is ``policy/wire/episodes.py``.

End to end: the memorizer served, driven by each peer's own client inside our evaluator over
``--rounds 2``, gives the verdicts of the memorizer in process; with ``episode_per="signals"`` (the old
behaviour) round 2 continues round 1 and does not. The protocols whose clients do say when an episode
starts are held to the same: vla-eval (its own ``Connection``, in ``.venv-vlaeval``), GR00T (its
``PolicyClient`` transcribed) and RoboFollow TCP (the official ``remote_policy.py``'s wire, spec section f)."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import json_numpy
import numpy as np
import pytest
import requests
from openpi_client import image_tools
from openpi_client.websocket_client_policy import WebsocketClientPolicy

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.act.server import ActPolicyServer
from robofollow_ros.policy.wire.episodes import START_POSE_TOL, EpisodeStarts
from robofollow_ros.policy.wire.gr00t.server import Gr00tPolicyServer
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.policy.wire.vlaeval.server import VlaEvalPolicyServer
from said import error_lines

pytestmark = [pytest.mark.timeout(600),  # openpi-client's own connect() call, not ours:
              pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")]
TASK = "L0_s41_l_pick_yellow_cylinder"
COMPARED = ("task", "round", "intent_score", "exec_score", "completion_ok", "frames", "policy_steps")
CAMERAS = {"cam_high": "head_camera", "cam_left_wrist": "left_camera", "cam_right_wrist": "right_camera"}


def _obs(joints: list[float] | np.ndarray) -> dict[str, Any]:
    return {"joint_action": {"vector": np.asarray(joints, dtype=np.float64)}}


HOME = np.linspace(-0.5, 0.5, 14)
AWAY = HOME + 0.2


def test_the_rules() -> None:
    auto = EpisodeStarts("auto")
    assert auto.starts("pick", _obs(HOME))  # the first request
    assert not auto.starts("pick", _obs(HOME))  # still at the start pose: the arm has not moved yet
    assert not auto.starts("pick", _obs(AWAY))
    assert not auto.starts("pick", _obs(AWAY + 0.1))
    assert auto.starts("pick", _obs(HOME + START_POSE_TOL / 2))  # back at the start pose: round 2
    assert not auto.starts("pick", _obs(HOME))
    assert auto.starts("place", _obs(HOME))  # a new instruction
    assert not auto.starts("place", _obs(HOME + 2 * START_POSE_TOL))  # moved a little: not back "at" it
    assert auto.episodes == 3
    signals = EpisodeStarts("signals")
    assert [signals.starts("pick", _obs(j)) for j in (HOME, AWAY, HOME)] == [True, False, False]
    assert signals.starts("place", _obs(HOME))
    with pytest.raises(ValueError, match="episode_per: 'trial' is not one of auto, signals"):
        EpisodeStarts("trial")


class OpenpiPeer:
    """What an evaluator gets with openpi's own client (openpi-client from PyPI): ONE
    ``WebsocketClientPolicy`` for every episode, as openpi's examples keep it; ``reset`` sends nothing
    (openpi's ``ActionChunkBroker.reset`` only empties the client's own queue); ALOHA observations made
    as openpi's ALOHA example makes them (``resize_with_pad`` to 224, ``convert_to_uint8``, CHW)."""

    def __init__(self, port: int) -> None:
        self.client = WebsocketClientPolicy("127.0.0.1", port)
        self.prompt = ""

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        self.prompt = text

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        images = {key: image_tools.convert_to_uint8(image_tools.resize_with_pad(
            np.asarray(obs["observation"][camera]["rgb"]), 224, 224)).transpose(2, 0, 1)
            for key, camera in CAMERAS.items()}
        request = {"state": np.asarray(obs["joint_action"]["vector"], np.float32), "images": images,
                   "prompt": self.prompt}
        return np.asarray(self.client.infer(request)["actions"])

    def close(self) -> None:
        self.client._ws.close()  # openpi-client has no close(); its connection is this attribute


class OpenvlaOftPeer:
    """What an evaluator gets with openvla-oft's ``run_aloha_eval.get_action_from_server``: the body that
    ``requests.post(url, json=obs)`` sends under ``json_numpy.patch()`` (full/left/right images 224x224x3,
    ``state``, ``instruction``), no session header, no reset; the reply read with ``json_numpy``."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/act"
        self.instruction = ""

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        self.instruction = text

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        cams = obs["observation"]
        request = {key: image_tools.resize_with_pad(np.asarray(cams[camera]["rgb"]), 224, 224)
                   for key, camera in (("full_image", "head_camera"), ("left_wrist_image", "left_camera"),
                                       ("right_wrist_image", "right_camera"))}
        request |= {"state": np.asarray(obs["joint_action"]["vector"]), "instruction": self.instruction}
        reply = requests.post(self.url, data=json_numpy.dumps(request), timeout=60,
                              headers={"Content-Type": "application/json"})
        reply.raise_for_status()
        return np.asarray(json_numpy.loads(reply.text))


class VlaEvalPeer:
    """What an evaluator gets with vla-eval's own ``Connection`` (``vlaeval_peer.py relay``, in .venv-vlaeval):
    one connection for every episode, ``start_episode`` before an episode's first observation and
    ``end_episode`` after its last (vla-eval's ``SyncEpisodeRunner``), RoboTwin-style observations."""

    ROOT = Path(__file__).resolve().parents[1]

    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen([str(self.ROOT / ".venv-vlaeval" / "bin" / "python"),
                                      str(self.ROOT / "test" / "vlaeval_peer.py"), "relay", str(port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.instruction, self.open, self.episodes = "", False, 0

    def _call(self, *command: Any) -> list[Any]:
        import msgpack
        assert self.proc.stdin is not None and self.proc.stdout is not None
        body = msgpack.packb(list(command))
        self.proc.stdin.write(len(body).to_bytes(4, "big") + body)
        self.proc.stdin.flush()
        reply = msgpack.unpackb(self.proc.stdout.read(int.from_bytes(self.proc.stdout.read(4), "big")))
        assert reply[0] != "error", reply[1]
        return list(reply)

    @staticmethod
    def _npy(array: np.ndarray) -> bytes:
        out = io.BytesIO()
        np.save(out, np.asarray(array), allow_pickle=False)
        return out.getvalue()

    def reset(self) -> None:
        if self.open:
            self._call("end")
        self.open = False

    def set_instruction(self, text: str) -> None:
        self.instruction = text

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        if not self.open:
            self._call("start", {"name": "robofollow", "suite": "robofollow", "episode_idx": self.episodes,
                                 "instruction": self.instruction})
            self.open, self.episodes = True, self.episodes + 1
        images = {camera: self._npy(obs["observation"][camera]["rgb"])
                  for camera in ("head_camera", "left_camera", "right_camera")}
        reply = self._call("act", images, self._npy(obs["joint_action"]["vector"]), self.instruction)
        return np.load(io.BytesIO(reply[1]), allow_pickle=False)

    def close(self) -> None:
        self.reset()
        self._call_close()

    def _call_close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the relay reads EOF as close
        assert self.proc.wait(30) == 0


class TcpPeer:
    """The official ``remote_policy.py`` client as the RoboFollow spec (section f) states its wire: a 4-byte
    big-endian length and JSON, arrays as ``__numpy_array__`` objects (base64), ``{"cmd", "obs"}`` requests
    for reset / set_instruction / predict, ``{"res"}`` replies; one connection for every episode."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.instruction = ""

    @staticmethod
    def _encode(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return {"__numpy_array__": True, "data": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode(),
                    "dtype": value.dtype.name, "shape": list(value.shape)}
        if isinstance(value, dict):
            return {k: TcpPeer._encode(v) for k, v in value.items()}
        return value

    def _call(self, cmd: str, obs: Any) -> Any:
        body = json.dumps({"cmd": cmd, "obs": self._encode(obs)}).encode()
        self.sock.sendall(len(body).to_bytes(4, "big"))
        self.sock.sendall(body)
        size = int.from_bytes(self._read(4), "big")
        reply = json.loads(self._read(size))
        assert "res" in reply, reply.get("error")
        res = reply["res"]
        if isinstance(res, dict) and res.get("__numpy_array__"):
            return np.frombuffer(base64.b64decode(res["data"]), dtype=res["dtype"]).reshape(res["shape"])
        return res

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    def reset(self) -> None:
        self._call("reset", None)

    def set_instruction(self, text: str) -> None:
        self.instruction = text
        self._call("set_instruction", text)

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        payload = {"observation": {camera: {"rgb": np.asarray(obs["observation"][camera]["rgb"])}
                                   for camera in ("head_camera", "right_camera", "left_camera")},
                   "joint_action": {"vector": np.asarray(obs["joint_action"]["vector"])},
                   "instruction": self.instruction}
        return np.asarray(self._call("predict", payload))

    def close(self) -> None:
        self.sock.close()


def _scored(path: Path) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in COMPARED} for r in json.loads((path / "results.json").read_text())]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("local")
    run_evaluation(EvalConfig(policy="memorizer", output=out, tasks=(TASK,), rounds=2, render=False))
    local = _scored(out)
    assert [r["completion_ok"] for r in local] == [True, True]  # verdicts worth comparing
    return local


def _peer_run(out: Path, peer: str, port: int) -> list[dict[str, Any]]:
    spec = peer if ":" in peer else f"test_served_episodes:{peer}"
    run_evaluation(EvalConfig(policy=spec, policy_kwargs={"port": port}, output=out,
                              tasks=(TASK,), rounds=2, render=True, backend="inline"))
    return _scored(out)


@pytest.mark.parametrize("server_class", [OpenpiPolicyServer, ActPolicyServer], ids=["openpi", "act"])
def test_a_peers_client_over_two_rounds_scores_as_in_process(server_class: Any, in_process: list[dict[str, Any]],
                                                             tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    peer = "OpenpiPeer" if server_class is OpenpiPolicyServer else "OpenvlaOftPeer"
    with caplog.at_level(logging.WARNING), server_class(lambda: load_policy("memorizer"), port=0).start() as server:
        assert _peer_run(tmp_path / "peer", peer, server.address[1]) == in_process
    if server_class is ActPolicyServer:  # no episode signal at all: said once in the server's log
        warnings = [r.getMessage() for r in caplog.records if "X-Session-ID" in r.getMessage()]
        assert len(warnings) == 1 and "start pose" in warnings[0]


@pytest.mark.parametrize("server_class, peer", [
    (VlaEvalPolicyServer, "VlaEvalPeer"), (Gr00tPolicyServer, "test_protocol_gr00t:Gr00tPeerPolicy"),
    (RoboFollowTcpServer, "TcpPeer")], ids=["vla-eval", "gr00t", "tcp"])
def test_clients_that_say_when_episodes_start_score_two_rounds_as_in_process(
        server_class: Any, peer: str, in_process: list[dict[str, Any]], tmp_path: Path) -> None:
    if server_class is VlaEvalPolicyServer and not (VlaEvalPeer.ROOT / ".venv-vlaeval" / "bin" / "python").exists():
        subprocess.run(["bash", str(VlaEvalPeer.ROOT / "tools" / "setup_vlaeval_env.sh")], check=True, timeout=600)
    with server_class(lambda: load_policy("memorizer"), port=0).start() as server:
        assert _peer_run(tmp_path / "peer", peer, server.address[1]) == in_process


def test_without_the_start_pose_rule_round_2_continues_round_1(in_process: list[dict[str, Any]],
                                                               tmp_path: Path) -> None:
    """The control: the rule is what makes round 2 score (before it, the same round 2 scored IS 0.0)."""
    with OpenpiPolicyServer(lambda: load_policy("memorizer"), port=0, episode_per="signals").start() as server:
        first, second = _peer_run(tmp_path / "peer", "OpenpiPeer", server.address[1])
    assert first == in_process[0] and second != in_process[1]


def test_episode_per_is_refused_where_the_client_says_when_episodes_start() -> None:
    from robofollow_ros.exit_status import EXIT_BAD_INPUT

    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "serve", "--protocol", "vla-eval", "--policy",
                           "hold", "--port", "0", "--episode-per", "signals"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == EXIT_BAD_INPUT and len(error_lines(done.stderr)) == 1, done.stderr
    assert "--episode-per: only with --protocol openpi or act" in done.stderr
