"""Calibration recordings (pictures + joint states) and solving a camera from one.

A recording is a directory holding ``recording.yaml`` and the pictures it names::

    camera: left_wrist                 # head | left_wrist | right_wrist
    mode: eye-in-hand                  # or eye-to-hand (board held by the gripper, camera fixed)
    hand_link: left_link6              # URDF link whose pose the joints give (the board's or camera's mount)
    base_frame: world
    board: {type: charuco, squares_x: 5, squares_y: 7, square_m: 0.03, marker_m: 0.022, dictionary: 4x4_50}
    views:
      - {image: view_000.png, joints: [14 values, /joint_states order]}

The rig records the same thing (a picture and ``/joint_states`` per arm pose) as the simulator
writes in ``calib_sim.py``, so both go through ``solve_recording``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml

from robofollow_ros.contract import ACTION_DIM, CAMERA_FRAMES, CAMERA_NAMES
from robofollow_ros.perception.calib_board import BoardSpec, find_board
from robofollow_ros.perception.calib_solve import (
    HAND_EYE_MODES,
    CalibrationSolveError,
    Pose,
    View,
    board_pose,
    calibrate_intrinsics,
    hand_eye,
    refine_hand_eye,
)
from robofollow_ros.yamlio import read_yaml_mapping

RECORDING_FILE = "recording.yaml"


class RecordingError(ValueError):
    """A recording is missing or malformed; the message names the file and field."""


@dataclass(frozen=True)
class Recording:
    directory: Path
    camera: str
    mode: str
    hand_link: str
    base_frame: str
    board: BoardSpec
    images: tuple[str, ...]
    joints: tuple[tuple[float, ...], ...]

    @property
    def child_frame(self) -> str:
        return f"{CAMERA_FRAMES[self.camera]}_optical"


def write_recording(directory: Path, camera: str, mode: str, hand_link: str, board: BoardSpec,
                    pictures: list[np.ndarray], joints: list[np.ndarray], base_frame: str = "world") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    views = []
    for index, (picture, vector) in enumerate(zip(pictures, joints, strict=True)):
        name = f"view_{index:03d}.png"
        bgr = picture if picture.ndim == 2 else cv2.cvtColor(picture, cv2.COLOR_RGB2BGR)
        cv2.imwrite(str(directory / name), bgr)
        views.append({"image": name, "joints": [round(float(v), 9) for v in vector]})
    body = {"camera": camera, "mode": mode, "hand_link": hand_link, "base_frame": base_frame,
            "board": board.to_dict(), "views": views}
    path = directory / RECORDING_FILE
    path.write_text(yaml.safe_dump(body, sort_keys=False, default_flow_style=None), encoding="utf-8")
    return path


def read_recording(directory: Path) -> Recording:
    path = directory / RECORDING_FILE
    data = read_yaml_mapping(path, "recording", RecordingError)
    camera = data.get("camera")
    if camera not in CAMERA_NAMES:
        raise RecordingError(f"{path}: camera: expected one of {CAMERA_NAMES}, got {camera!r}")
    mode = data.get("mode")
    if mode not in HAND_EYE_MODES:
        raise RecordingError(f"{path}: mode: expected one of {HAND_EYE_MODES}, got {mode!r}")
    hand_link = data.get("hand_link")
    if not isinstance(hand_link, str) or not hand_link:
        raise RecordingError(f"{path}: hand_link: expected a URDF link name, got {hand_link!r}")
    board = BoardSpec.from_dict(data.get("board"))
    views = data.get("views")
    if not isinstance(views, list) or not views:
        raise RecordingError(f"{path}: views: expected a non-empty list")
    images, joints = [], []
    for index, view in enumerate(views):
        if not isinstance(view, dict) or not isinstance(view.get("image"), str):
            raise RecordingError(f"{path}: views[{index}].image: expected a file name")
        vector = view.get("joints")
        if not isinstance(vector, list) or len(vector) != ACTION_DIM:
            raise RecordingError(f"{path}: views[{index}].joints: expected {ACTION_DIM} values, got {vector!r}")
        images.append(view["image"])
        joints.append(tuple(float(v) for v in vector))
    return Recording(directory, camera, mode, hand_link, str(data.get("base_frame", "world")), board,
                     tuple(images), tuple(joints))


@dataclass
class CameraSolution:
    """What a recording gives: intrinsics, the camera's pose in its parent, and how well it fitted."""

    camera: str
    image_size: tuple[int, int]
    k: np.ndarray
    dist: np.ndarray
    rms_px: float
    parent_frame: str
    child_frame: str
    pose: Pose
    views_used: int
    views_total: int
    reprojection_px: float = float("nan")


def solve_recording(recording: Recording, distortion: str = "radial", kinematics: Any = None,
                    known_intrinsics: tuple[np.ndarray, np.ndarray] | None = None) -> CameraSolution:
    """Intrinsics (unless given) and the hand-eye extrinsic of the recording's camera."""
    if kinematics is None:
        from robofollow_ros.robot.kinematics import RigKinematics

        kinematics = RigKinematics()
    views: list[View] = []
    hands: list[Pose] = []
    size: tuple[int, int] | None = None
    for name, vector in zip(recording.images, recording.joints, strict=True):
        picture = cv2.imread(str(recording.directory / name), cv2.IMREAD_GRAYSCALE)
        if picture is None:
            raise RecordingError(f"{recording.directory / name}: missing or not an image")
        size = (picture.shape[1], picture.shape[0])
        found = find_board(picture, recording.board)
        if found is None:
            continue
        try:
            hand = kinematics.link_pose(np.asarray(vector), recording.hand_link)
        except ValueError as exc:
            raise RecordingError(f"hand_link: {exc}") from None
        views.append(found)
        hands.append((hand.rotation, hand.position))
    assert size is not None
    if len(views) < 3:
        raise CalibrationSolveError(f"views: the board was found in {len(views)} of {len(recording.images)} "
                                    "pictures; need at least 3")
    if known_intrinsics is None:
        k, dist, rms = calibrate_intrinsics(views, size, distortion)
    else:
        k, dist = known_intrinsics
        rms = float("nan")
    boards = [board_pose(view, k, dist) for view in views]
    pose = hand_eye(recording.mode, hands, boards)
    pose, reprojection = refine_hand_eye(recording.mode, hands, views, k, dist, pose)
    parent = recording.base_frame if recording.mode == "eye-to-hand" else recording.hand_link
    return CameraSolution(recording.camera, size, k, dist, rms, parent, recording.child_frame, pose,
                          len(views), len(recording.images), reprojection)


def intrinsics_from_images(paths: list[Path], board: BoardSpec, distortion: str = "radial"
                           ) -> tuple[np.ndarray, np.ndarray, float, tuple[int, int], int]:
    """(K, distortion, RMS px, image size, views used) from pictures of the board."""
    views: list[View] = []
    size: tuple[int, int] | None = None
    for path in paths:
        picture = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        if picture is None:
            raise RecordingError(f"{path}: missing or not an image")
        if size is not None and size != (picture.shape[1], picture.shape[0]):
            raise RecordingError(f"{path}: size {picture.shape[1]}x{picture.shape[0]} differs from {size[0]}x{size[1]}")
        size = (picture.shape[1], picture.shape[0])
        found = find_board(picture, board)
        if found is not None:
            views.append(found)
    if size is None:
        raise RecordingError("images: no pictures given")
    k, dist, rms = calibrate_intrinsics(views, size, distortion)
    return k, dist, rms, size, len(views)
