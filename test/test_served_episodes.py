"""Episodes start where a peer's client starts them (issue 36), on servers whose protocol has no
episode message: ``serve --protocol openpi`` (openpi's clients keep one ``WebsocketClientPolicy`` for
every episode) and ``serve --protocol act`` (openvla-oft's ``run_aloha_eval`` posts observations with no
session header and no reset). The rule is ``policy/wire/episodes.py``.

End to end: the memorizer served, driven by each peer's own client inside our evaluator over
``--rounds 2``, gives the verdicts of the memorizer in process; with ``episode_per="signals"`` (the old
behaviour) round 2 continues round 1 and does not."""

from __future__ import annotations

import json
import logging
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
from robofollow_ros.policy.wire.openpi.server import OpenpiPolicyServer

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
    run_evaluation(EvalConfig(policy=f"test_served_episodes:{peer}", policy_kwargs={"port": port}, output=out,
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


def test_without_the_start_pose_rule_round_2_continues_round_1(in_process: list[dict[str, Any]],
                                                               tmp_path: Path) -> None:
    """The control: the rule is what makes round 2 score (before it, the same round 2 scored IS 0.0)."""
    with OpenpiPolicyServer(lambda: load_policy("memorizer"), port=0, episode_per="signals").start() as server:
        first, second = _peer_run(tmp_path / "peer", "OpenpiPeer", server.address[1])
    assert first == in_process[0] and second != in_process[1]


def test_episode_per_is_refused_where_the_client_says_when_episodes_start() -> None:
    import subprocess
    import sys

    from robofollow_ros.exit_status import EXIT_BAD_INPUT

    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "serve", "--protocol", "vla-eval", "--policy",
                           "hold", "--port", "0", "--episode-per", "signals"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == EXIT_BAD_INPUT and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--episode-per: only with --protocol openpi or act" in done.stderr
