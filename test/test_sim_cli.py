"""``robofollow sim``: snapshot pictures, calibration files that match the committed ones, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import pytest

from robofollow_ros.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_snapshot_writes_three_camera_pngs_and_a_layout_picture(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap"
    assert main(["sim", "snapshot", "--task", "L0_s41_l_pick_cube_in_bowl", "--round", "2", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scene"] == "scene4" and report["layout"] == "scene4_1"
    for name in ("head", "left_wrist", "right_wrist"):
        image = cv2.imread(str(out / f"{name}.png"))
        assert image is not None and image.shape == (240, 320, 3), name
    layout = cv2.imread(str(out / "layout_topdown.png"))
    assert layout is not None and layout.shape[0] > 300


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "no_such_task"], "no_such_task"),
    (["--task", "L0_s41_l_pick_cube_in_bowl", "--round", "11"],
     "argument --round: must be an integer in 1..10, got '11'"),
    (["--task", "L0_s41_l_pick_cube_in_bowl", "--width", "0"], "--width"),
])
def test_snapshot_bad_input_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    argv: list[str], message: str) -> None:
    assert main(["sim", "snapshot", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_snapshot_of_a_training_task_needs_a_seed(registry, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    task_id = registry.training_tasks("scene1")[0].task_id
    assert main(["sim", "snapshot", "--task", task_id, "--out", str(tmp_path)]) == 2
    assert "--seed" in capsys.readouterr().err


def test_committed_calibration_is_current(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "calibration", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for name in ("head.yaml", "left_wrist.yaml", "right_wrist.yaml", "extrinsics.yaml"):
        committed = (REPO / "calibration" / "sim" / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, f"regenerate calibration/sim/{name}"


def test_bad_rig_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "calibration", "--out", str(tmp_path), "--rig", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_urdf_command_writes_the_committed_urdf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "urdf", "--out", str(tmp_path / "rig.urdf")]) == 0
    capsys.readouterr()
    committed = (REPO / "urdf" / "robofollow_rig.urdf").read_text(encoding="utf-8")
    assert (tmp_path / "rig.urdf").read_text(encoding="utf-8") == committed
