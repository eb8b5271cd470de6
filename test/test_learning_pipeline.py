"""Demonstrations → LeRobot v3.0 dataset → independent reader → training → ``learned:CKPT`` evaluated.

Everything is real: the oracle in SAPIEN with the three cameras rendered (small pictures to keep CI
lean), AV1 video, the reader in its own environment (.venv-reader: pyarrow + pandas + PyAV, no
robofollow code), torch training, and a scored trial in the headless evaluator.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robofollow_ros.contract import JOINT_NAMES

ROOT = Path(__file__).resolve().parents[1]
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
READER_PYTHON = ROOT / ".venv-reader" / "bin" / "python"
TASKS = "pickup_yellow_block_1_left,push_left_cube_to_red_cylinder"

pytestmark = pytest.mark.timeout(900)


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*ROBOFOLLOW, *args], capture_output=True, text=True, timeout=800,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def read_independently(root: Path, arrays: Path | None = None) -> dict:
    """The independent reader's report; with ``arrays`` it also saves the columns and decoded frames there."""
    assert READER_PYTHON.exists(), "run `make setup-tests` (tools/setup_reader_env.sh) to create .venv-reader"
    extra = [str(arrays)] if arrays is not None else []
    out = subprocess.run([str(READER_PYTHON), str(ROOT / "test" / "lerobot_v3_reader.py"), str(root), *extra],
                         capture_output=True, text=True, timeout=300, env={"PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demos") / "ds"
    proc = run("collect", "--output", str(out), "--tasks", TASKS, "--episodes-per-task", "2",
               "--image-size", "64x48", "--workers", "2")
    assert "4 episodes written" in proc.stdout and "0 failed" in proc.stdout, proc.stdout
    assert "ETA" in proc.stderr  # progress with rate and ETA
    return out


def test_the_independent_reader_accepts_the_collected_dataset(dataset: Path, registry) -> None:  # type: ignore[no-untyped-def]
    report = read_independently(dataset)
    assert report["errors"] == []
    assert report["episodes"] == 4 and report["fps"] == 10
    lengths = report["episode_lengths"]
    assert sum(lengths) == report["frames"] and min(lengths) > 20
    for key in ("observation.images.head", "observation.images.left_wrist", "observation.images.right_wrist"):
        assert report["video_frames"][key] == lengths  # every video decodes to as many frames as the data has
    assert {"observation.state", "action", "timestamp", "frame_index", "episode_index", "index",
            "task_index"} <= set(report["features"])
    # The tasks are the training instructions, variants in turn (episode 0: variant 0, episode 1: variant 1).
    expected = [registry.training_task(t).instructions[e] for t in TASKS.split(",") for e in (0, 1)]
    assert report["tasks"] == expected
    info = json.loads((dataset / "meta" / "info.json").read_text())
    assert info["features"]["observation.state"]["names"] == list(JOINT_NAMES)
    assert info["features"]["observation.images.head"]["info"]["video.codec"] == "av1"


def test_actions_are_the_next_setpoints_and_episodes_end_holding_still(dataset: Path) -> None:
    from robofollow_ros.datasets.reader import load_dataset

    data = load_dataset(dataset)
    for start, length in zip(data.episode_starts, data.episode_lengths, strict=True):
        state, action = data.state[start:start + length], data.action[start:start + length]
        # The joints follow the commanded set-points closely (tracking error well below a step's motion).
        assert np.abs(action[:-1, :6] - state[1:, :6]).max() < 0.15
        np.testing.assert_allclose(action[-3:], action[-1:].repeat(3, 0), atol=1e-6)  # held at the end
        assert np.abs(action[:, :6] - state[:1, :6]).max() > 0.2  # and it moved in between


def test_frames_resized_while_decoding_equal_full_frames_resized(dataset: Path) -> None:
    # Training decodes whole files, resizing each frame as it comes (a file at full size does not fit in memory).
    import cv2

    from robofollow_ros.datasets.reader import load_dataset

    full, small = load_dataset(dataset), load_dataset(dataset, (32, 24))
    for camera, frames in full.images.items():
        assert small.images[camera].shape == (len(frames), 24, 32, 3)
        for k in (0, len(frames) // 2, len(frames) - 1):
            assert np.array_equal(small.images[camera][k], cv2.resize(frames[k], (32, 24),
                                                                      interpolation=cv2.INTER_AREA))


def test_a_batch_holds_each_cameras_frame_of_the_sampled_rows(dataset: Path) -> None:
    import torch

    from robofollow_ros.contract import CAMERA_NAMES
    from robofollow_ros.datasets.reader import load_dataset
    from robofollow_ros.learning.batches import Batches
    from robofollow_ros.policy.learned.scaling import images_tensor

    data = load_dataset(dataset)
    images, *_ = Batches(data, 5, 64).sample(6, torch.Generator().manual_seed(3), shift=0)
    rows = torch.randint(0, len(data.state), (6,), generator=torch.Generator().manual_seed(3)).numpy()
    for i, row in enumerate(rows):
        for c, camera in enumerate(CAMERA_NAMES):
            assert torch.equal(images[i, c], images_tensor(data.images[camera][row])), (row, camera)


def test_train_writes_a_checkpoint_that_eval_runs_and_resume_continues(dataset: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "bc.pt"
    proc = run("train", "--dataset", str(dataset), "--output", str(ckpt), "--steps", "40", "--batch", "8",
               "--checkpoint-every", "20", "--chunk", "20")
    assert json.loads(proc.stdout.strip().splitlines()[-1])["step"] == 40
    assert ckpt.with_name("bc.pt.loss.png").stat().st_size > 1000 and "steps/s" in proc.stderr
    losses = json.loads(ckpt.with_name("bc.pt.loss.json").read_text())
    assert [s for s, _ in losses] == [40] or losses[-1][0] == 40
    # --resume continues the same run to more steps; without --resume an existing output is refused.
    proc = run("train", "--dataset", str(dataset), "--output", str(ckpt), "--steps", "60", "--batch", "8",
               "--checkpoint-every", "20", "--chunk", "20", "--resume")
    assert json.loads(proc.stdout.strip().splitlines()[-1])["step"] == 60
    refused = run("train", "--dataset", str(dataset), "--output", str(ckpt), "--steps", "60", check=False)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    # a finished checkpoint resumes to nothing without loading the frames (the paper-scale dataset takes 13 min
    # and 8 GB): the dataset's tables alone, without a video, still match it; another dataset is still refused
    tables = tmp_path / "tables_only"
    shutil.copytree(dataset / "meta", tables / "meta")
    done = run("train", "--dataset", str(tables), "--output", str(ckpt), "--steps", "60", "--chunk", "20", "--resume")
    assert json.loads(done.stdout.strip().splitlines()[-1])["step"] == 60 and "nothing to do" in done.stderr
    (tables / "meta" / "info.json").write_text((tables / "meta" / "info.json").read_text().replace("}", ' }', 1))
    other = run("train", "--dataset", str(tables), "--output", str(ckpt), "--steps", "60", "--chunk", "20", "--resume",
                check=False)
    assert other.returncode == 2 and "different dataset" in other.stderr
    out = tmp_path / "run"
    proc = run("eval", "--policy", f"learned:{ckpt}", "--tasks", "L0_pickup_yellow_block_1_left", "--rounds", "1",
               "--max-steps", "2", "--actions-per-step", "20", "--output", str(out), "--json")
    results = json.loads((out / "results.json").read_text())
    entries = results["results"] if isinstance(results, dict) else results
    assert len(entries) == 1 and "policy_error" not in entries[0]
    assert entries[0]["policy_steps"] == 2  # two chunks predicted and executed


def test_learned_policy_serves_over_tcp_with_the_same_actions(dataset: Path, tmp_path: Path) -> None:
    from robofollow_ros.policy.drills.scripted import make_observation
    from robofollow_ros.policy.spec import load_policy

    ckpt = tmp_path / "bc.pt"
    run("train", "--dataset", str(dataset), "--output", str(ckpt), "--steps", "5", "--batch", "4", "--chunk", "8")
    proc = subprocess.Popen([*ROBOFOLLOW, "serve", "--port", "0", "--policy", f"learned:{ckpt}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        remote = load_policy(f"tcp://127.0.0.1:{int(line.rsplit(':', 1)[1])}", {"timeout_s": 60})
        local = load_policy(f"learned:{ckpt}")
        obs = make_observation(3)
        for policy in (remote, local):
            policy.reset()
            policy.set_instruction("Use your left arm to pick up the block to the right of the red ball.")
        a, b = remote.predict(obs), local.predict(obs)
        assert a.shape == (8, 14)
        np.testing.assert_allclose(a, b, atol=1e-5)
        remote.close()
        local.set_instruction("")  # the blank control: no words, a policy acting on images and joints alone
        blank = local.predict(obs)
        assert blank.shape == (8, 14) and np.isfinite(blank).all() and not np.allclose(blank, b, atol=1e-4)
    finally:
        proc.kill()
        proc.wait(30)


@pytest.mark.parametrize("make, fragment", [
    (lambda d, t: ["train", "--dataset", str(t), "--output", str(t / "x.pt")], "has no meta/info.json"),
    (lambda d, t: ["eval", "--policy", f"learned:{t / 'missing.pt'}", "--tasks", "L0_pickup_yellow_block_2",
                   "--rounds", "1", "--output", str(t / "r")], "no such file"),
    (lambda d, t: ["collect", "--output", str(d), "--tasks", "pickup_yellow_block_2"], "is not empty"),
    (lambda d, t: ["collect", "--output", str(t / "n"), "--tasks", "no_such_task"], "--tasks"),
    (lambda d, t: ["collect", "--output", str(t / "n"), "--fps", "7"], "--fps"),
])
def test_bad_input_is_one_line_and_exit_2(dataset: Path, tmp_path: Path, make, fragment: str) -> None:  # type: ignore[no-untyped-def]
    proc = run(*make(dataset, tmp_path), check=False)
    assert proc.returncode == 2, proc.stderr
    said = [line for line in proc.stderr.strip().splitlines() if not line.startswith("… ")]  # less progress lines
    assert fragment in proc.stderr and len(said) == 1, proc.stderr
