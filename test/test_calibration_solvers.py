"""Calibration maths without rendering: boards, intrinsics, hand-eye (both mountings), recordings."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from robofollow_ros.perception.calib_board import BoardError, BoardSpec, find_board
from robofollow_ros.perception.calib_record import RecordingError, read_recording, write_recording
from robofollow_ros.perception.calib_solve import (
    CalibrationSolveError,
    calibrate_intrinsics,
    hand_eye,
    pose_difference,
    refine_hand_eye,
)

K = np.array([[300.0, 0.0, 161.0], [0.0, 300.0, 118.0], [0.0, 0.0, 1.0]])
BOARD = BoardSpec(squares_x=6, squares_y=8, square_m=0.03, marker_m=0.022)


def _rot(rx: float, ry: float, rz: float) -> np.ndarray:
    r, _ = cv2.Rodrigues(np.array([rx, ry, rz], dtype=np.float64))
    return np.asarray(r)


def _inv(pose):  # type: ignore[no-untyped-def]
    return pose[0].T, -pose[0].T @ pose[1]


def _mul(a, b):  # type: ignore[no-untyped-def]
    return a[0] @ b[0], a[0] @ b[1] + a[1]


def _corners() -> np.ndarray:
    xs, ys = np.meshgrid(np.arange(1, BOARD.squares_x), np.arange(1, BOARD.squares_y))
    return np.column_stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)]) * BOARD.square_m


def _project(board_in_camera, noise: float = 0.0, rng=None):  # type: ignore[no-untyped-def]
    objects = _corners()
    cam = objects @ board_in_camera[0].T + board_in_camera[1]
    uv = cam @ K.T
    pixels = uv[:, :2] / uv[:, 2:]
    if noise:
        pixels = pixels + rng.normal(0, noise, pixels.shape)
    return objects, pixels


def test_board_description_errors_name_the_field() -> None:
    with pytest.raises(BoardError, match=r"board\.type"):
        BoardSpec(type="circles")
    with pytest.raises(BoardError, match=r"board\.marker_m"):
        BoardSpec(square_m=0.03, marker_m=0.04)
    with pytest.raises(BoardError, match=r"board\.dictionary"):
        BoardSpec(dictionary="7x7")
    with pytest.raises(BoardError, match="unknown field 'colour'"):
        BoardSpec.from_dict({"colour": "red"})


@pytest.mark.parametrize("kind", ["charuco", "checkerboard"])
def test_the_printed_board_is_found_with_every_inner_corner(kind: str) -> None:
    board = BoardSpec(type=kind, squares_x=6, squares_y=8, square_m=0.03, marker_m=0.022)
    picture = board.image(pixels_per_square=60, margin_squares=0.5)
    found = find_board(picture, board)
    assert found is not None
    objects, pixels = found
    assert len(objects) == (board.squares_x - 1) * (board.squares_y - 1)
    expected = 30 + objects[:, :2] / board.square_m * 60
    assert np.abs(pixels - expected).max() < 1.0  # corners where the drawing put them
    assert find_board(np.full((240, 320), 200, np.uint8), board) is None


def test_intrinsics_are_recovered_from_tilted_views() -> None:
    rng = np.random.default_rng(1)
    views = []
    for _ in range(12):
        rx, ry = rng.uniform(-0.6, 0.6, 2)
        rotation = _rot(rx, ry, rng.uniform(-0.3, 0.3))
        translation = np.array([*rng.uniform(-0.05, 0.05, 2), rng.uniform(0.35, 0.5)]) - rotation @ [0.09, 0.12, 0]
        views.append(_project((rotation, translation), 0.05, rng))
    k, dist, rms = calibrate_intrinsics(views, (320, 240), "radial")
    assert abs(k[0, 0] - 300.0) < 1.0 and abs(k[0, 2] - 161.0) < 1.0 and abs(k[1, 2] - 118.0) < 1.0
    assert rms < 0.1 and np.abs(dist).max() < 0.05
    with pytest.raises(CalibrationSolveError, match="at least 3 views"):
        calibrate_intrinsics(views[:2], (320, 240))
    with pytest.raises(CalibrationSolveError, match="distortion"):
        calibrate_intrinsics(views, (320, 240), "fisheye")


@pytest.mark.parametrize("mode", ["eye-in-hand", "eye-to-hand"])
def test_hand_eye_recovers_the_camera_mount_and_refinement_beats_pixel_noise(mode: str) -> None:
    rng = np.random.default_rng(7)
    truth = (_rot(0.3, -0.2, 1.0), np.array([0.07, -0.02, 0.05]))  # camera in hand (or in base)
    mount = (_rot(math.pi, 0.1, 0.2), np.array([-0.1, 0.12, 0.0]))  # board in base (or in hand)
    hands, boards, views = [], [], []
    for _ in range(12):
        # The board in front of the camera, tilted; the hand pose then follows from the mountings.
        rx, ry, rz = rng.uniform(-0.5, 0.5, 3)
        rotation = _rot(rx, ry, rz)
        board_in_camera = (rotation, np.array([*rng.uniform(-0.04, 0.04, 2), 0.4]) - rotation @ [0.09, 0.12, 0])
        if mode == "eye-in-hand":  # board fixed in base; camera = hand * truth
            hand = _mul(_mul(mount, _inv(board_in_camera)), _inv(truth))
        else:  # camera fixed in base (truth); board = hand * mount
            hand = _mul(_mul(truth, board_in_camera), _inv(mount))
        hands.append(hand)
        views.append(_project(board_in_camera, 0.3, rng))
        rvec_t = cv2.solvePnP(views[-1][0], views[-1][1], K, np.zeros(5))
        boards.append((np.asarray(cv2.Rodrigues(rvec_t[1])[0]), rvec_t[2].reshape(3)))
    closed_form = hand_eye(mode, hands, boards)
    refined, rms = refine_hand_eye(mode, hands, views, K, np.zeros(5), closed_form)
    t_closed, _ = pose_difference(closed_form, truth)
    t_refined, r_refined = pose_difference(refined, truth)
    assert t_refined < 0.002 and r_refined < 0.2
    assert t_refined <= t_closed + 1e-6
    assert 0.2 < rms < 0.5  # the pixel noise put in, no more


def test_a_recording_round_trips_and_bad_ones_name_the_field(tmp_path: Path) -> None:
    picture = np.zeros((24, 32, 3), np.uint8)
    write_recording(tmp_path, "left_wrist", "eye-in-hand", "left_link6", BOARD, [picture] * 2, [np.zeros(14)] * 2)
    recording = read_recording(tmp_path)
    assert recording.images == ("view_000.png", "view_001.png") and recording.board == BOARD
    assert recording.child_frame == "left_wrist_camera_optical"
    body = yaml.safe_load((tmp_path / "recording.yaml").read_text())
    for field, value, message in (("mode", "eye-on-hand", "mode"), ("camera", "nose", "camera"),
                                  ("views", [{"image": "a.png", "joints": [0.0] * 13}], r"views\[0\].joints")):
        broken = dict(body, **{field: value})
        (tmp_path / "recording.yaml").write_text(yaml.safe_dump(broken))
        with pytest.raises(RecordingError, match=message):
            read_recording(tmp_path)
    with pytest.raises(RecordingError, match="does not exist"):
        read_recording(tmp_path / "missing")
