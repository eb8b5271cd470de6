"""``robofollow calibrate``: SAPIEN-rendered ChArUco pictures → intrinsics and hand-eye → the URDF's mounts.

One camera (the left wrist, eye-in-hand) with fewer pictures than the default keeps the test short;
``robofollow calibrate sim-verify`` with defaults checks all three (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from robofollow_ros.cli import main
from robofollow_ros.perception.camera_model import quat_xyzw_to_matrix
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:  # type: ignore[type-arg]
    out = tmp_path_factory.mktemp("calib")
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["calibrate", "sim-verify", "--cameras", "left_wrist", "--views", "10",
                     "--intrinsic-views", "30", "--out", str(out), "--json"])
    return code, json.loads(buffer.getvalue()), out


def test_sim_verify_recovers_the_wrist_camera_within_5mm_and_half_a_degree(verified) -> None:  # type: ignore[no-untyped-def]
    code, report, out = verified
    assert code == 0 and report["ok"]
    (camera,) = report["cameras"]
    assert camera["camera"] == "left_wrist" and camera["parent_frame"] == "left_link6"
    assert camera["translation_error_m"] < 0.005 and camera["rotation_error_deg"] < 0.5
    assert abs(camera["focal_error_px"]) < 2.0
    written = yaml.safe_load((out / "extrinsics.yaml").read_text())["left_wrist"]
    committed = yaml.safe_load((DEFAULT_CALIBRATION_DIR / "extrinsics.yaml").read_text())["left_wrist"]
    assert written["parent_frame"] == committed["parent_frame"] and written["child_frame"] == committed["child_frame"]
    assert np.linalg.norm(np.subtract(written["translation"], committed["translation"])) < 0.005
    relative = quat_xyzw_to_matrix(written["rotation_xyzw"]).T @ quat_xyzw_to_matrix(committed["rotation_xyzw"])
    assert np.degrees(np.arccos(np.clip((np.trace(relative) - 1) / 2, -1, 1))) < 0.5
    info = yaml.safe_load((out / "left_wrist.yaml").read_text())
    assert info["image_width"] == 320 and info["frame_id"] == "left_wrist_camera_optical"


def test_rig_commands_solve_the_recorded_files(verified, tmp_path: Path,  # type: ignore[no-untyped-def]
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, _, out = verified
    info = tmp_path / "left_wrist.yaml"
    assert main(["calibrate", "intrinsics", "--images", str(out / "left_wrist_intrinsics"), "--camera", "left_wrist",
                 "--squares", "6x8", "--square-m", "0.03", "--marker-m", "0.022", "--out", str(info), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["views_used"] >= 25 and abs(summary["fx"] - 219.65853) < 2.0
    extrinsics = tmp_path / "extrinsics.yaml"
    extrinsics.write_text(yaml.safe_dump({"head": {"parent_frame": "world", "keep": True}}))
    assert main(["calibrate", "extrinsics", "--recording", str(out / "left_wrist_handeye"), "--camera-info",
                 str(info), "--out", str(extrinsics), "--json"]) == 0
    capsys.readouterr()
    merged = yaml.safe_load(extrinsics.read_text())
    assert merged["head"] == {"parent_frame": "world", "keep": True}  # other cameras are kept
    committed = yaml.safe_load((DEFAULT_CALIBRATION_DIR / "extrinsics.yaml").read_text())["left_wrist"]
    assert np.linalg.norm(np.subtract(merged["left_wrist"]["translation"], committed["translation"])) < 0.005


@pytest.mark.parametrize(("argv", "message"), [
    (["sim-verify", "--cameras", "nose"], "--cameras: expected one of head, left_wrist, right_wrist, got 'nose'"),
    (["sim-verify", "--views", "2"], "argument --views: must be an integer in 3..1000, got '2'"),
    (["intrinsics", "--images", ".", "--camera", "head", "--out", "x.yaml", "--squares", "5by7"], "--squares"),
    (["intrinsics", "--images", ".", "--camera", "head", "--out", "x.yaml", "--squares", "100000x7"],
     "--squares: each side must be 3..100 squares, got '100000x7'"),
    (["intrinsics", "--images", ".", "--camera", "head", "--out", "x.yaml", "--marker-m", "0.05"], "board.marker_m"),
    (["extrinsics", "--recording", "/no/such/dir", "--camera-info", "x.yaml", "--out", "y.yaml"], "does not exist"),
])
def test_bad_input_exits_2_naming_the_field(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", *argv]) == 2
    assert message in capsys.readouterr().err
