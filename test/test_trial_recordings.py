"""Every recorded trial is complete from t = 0: ``eval --record`` over many consecutive trials, each trial's
bag read back with ``rosbags``: every camera's first image lies within one control period of the trial's
first joint state (issue 24, item 4: the live-view image limiter kept its schedule across trials while each
trial's clock restarted, so later trials lost their first images)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.contract import CAMERA_NAMES

SEC = 1_000_000_000
TASK = "L0_pickup_yellow_block_1_left"
ROUNDS = 10  # ten consecutive trials in one worker: what the limiter carried from one trial to the next
pytestmark = pytest.mark.timeout(600)


def _small_images(monkeypatch: pytest.MonkeyPatch) -> None:
    """``eval`` renders at the protocol size; 64x48 keeps ten rendered trials quick on two CPU cores."""
    from robofollow_ros.sim import world
    from robofollow_ros.sim.camera_settings import CameraSettings

    class SmallWorld(world.SimWorld):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(cameras=CameraSettings(64, 48), **kwargs)

    monkeypatch.setattr(world, "SimWorld", SmallWorld)


def record_run(out: Path, **extra: Any) -> Path:
    """``robofollow eval --policy oracle --tasks TASK --rounds 10 --max-steps 3 --actions-per-step 2 --record``,
    in this process (``--backend inline``) so the images can be small; returns the run directory."""
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation

    with pytest.MonkeyPatch.context() as monkeypatch:
        _small_images(monkeypatch)
        config = EvalConfig(policy="oracle", output=out, tasks=(TASK,), rounds=ROUNDS, settings=EpisodeSettings(3, 2),
                            render=True, record=True, backend="inline", **extra)
        outcome = run_evaluation(config)
    assert outcome.recorded == ROUNDS and not outcome.failed_trials
    return out


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten trials recorded the default way (``eval --record``: the cameras when the policy gets them)."""
    return record_run(tmp_path_factory.mktemp("policy_rate") / "run")


def stamps(bag: Path) -> dict[str, list[int]]:
    """Header stamps of the joint states and of each camera's images, read with rosbags."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    roles = {"/joint_states": "state", **{f"/cameras/{c}/image_raw/compressed": c for c in CAMERA_NAMES}}
    out: dict[str, list[int]] = {role: [] for role in roles.values()}
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        for conn, _t, raw in reader.messages(connections=[c for c in reader.connections if c.topic in roles]):
            stamp = reader.deserialize(raw, conn.msgtype).header.stamp  # type: ignore[attr-defined]
            out[roles[conn.topic]].append(stamp.sec * SEC + stamp.nanosec)
    return out


def assert_complete_from_the_start(bags: list[Path]) -> None:
    assert len(bags) == ROUNDS
    for bag in bags:
        seen = stamps(bag)
        state = seen["state"]
        assert len(state) >= 2, f"{bag.name}: {len(state)} joint states"
        period = int(np.median(np.diff(state)))  # the recording's control period
        for camera in CAMERA_NAMES:
            assert seen[camera], f"{bag.name}: no {camera} image at all"
            late = seen[camera][0] - state[0]
            assert 0 <= late <= period, (f"{bag.name}: the first {camera} image comes {late / 1e9:.3f} s after the "
                                         f"first joint state (control period {period / 1e9:.3f} s)")


def test_ten_consecutive_policy_rate_recordings_start_their_cameras_with_the_trial(policy_run: Path) -> None:
    assert_complete_from_the_start(sorted((policy_run / "mcap").glob("*.mcap")))
