"""Camera calibration with OpenCV: intrinsics from board views, extrinsics from hand-eye solvers.

- Intrinsics: ``cv2.calibrateCamera`` over the views' corner correspondences, written as a ROS
  ``camera_info`` YAML (same layout as ``calibration/sim/<camera>.yaml``).
- Eye-to-hand (head camera, board held by a gripper): ``cv2.calibrateHandEye`` fed the inverse of the
  gripper poses returns the camera in the robot's base frame (here ``world``).
- Eye-in-hand (wrist camera, board on the table): ``cv2.calibrateHandEye`` returns the camera in the
  hand link's frame.
Poses are (R 3×3, t 3) with ``x_parent = R x_child + t``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from robofollow_ros.perception.camera_model import matrix_to_quat_xyzw

Pose = tuple[np.ndarray, np.ndarray]
View = tuple[np.ndarray, np.ndarray]  # (object points N×3, image points N×2)
DISTORTION_MODELS = ("none", "radial", "full")
HAND_EYE_MODES = ("eye-to-hand", "eye-in-hand")


class CalibrationSolveError(ValueError):
    """Not enough usable views, or a solver failed; the message says which and why."""


def calibrate_intrinsics(views: Sequence[View], image_size: tuple[int, int], distortion: str = "radial"
                         ) -> tuple[np.ndarray, np.ndarray, float]:
    """(K, distortion coefficients (5), RMS reprojection error in pixels) from at least 3 views."""
    if distortion not in DISTORTION_MODELS:
        raise CalibrationSolveError(f"distortion: expected one of {DISTORTION_MODELS}, got {distortion!r}")
    if len(views) < 3:
        raise CalibrationSolveError(f"views: intrinsics need at least 3 views with the board found, got {len(views)}")
    flags = cv2.CALIB_FIX_ASPECT_RATIO
    if distortion in ("none", "radial"):
        flags |= cv2.CALIB_ZERO_TANGENT_DIST | cv2.CALIB_FIX_K3
    if distortion == "none":
        flags |= cv2.CALIB_FIX_K1 | cv2.CALIB_FIX_K2
    width, height = image_size
    f0 = float(max(width, height))
    k0 = np.array([[f0, 0, width / 2], [0, f0, height / 2], [0, 0, 1]], dtype=np.float64)
    objects = [v[0].astype(np.float32) for v in views]
    images = [v[1].astype(np.float32).reshape(-1, 1, 2) for v in views]
    rms, k, dist, _, _ = cv2.calibrateCamera(objects, images, (width, height), k0, np.zeros(5),
                                             flags=flags | cv2.CALIB_USE_INTRINSIC_GUESS)
    return np.asarray(k), np.asarray(dist).reshape(-1)[:5], float(rms)


def board_pose(view: View, k: np.ndarray, dist: np.ndarray) -> Pose:
    """Board pose in the camera's optical frame (target → camera)."""
    ok, rvec, tvec = cv2.solvePnP(view[0], view[1], k, dist, flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok:
        raise CalibrationSolveError("solvePnP: no board pose for a view")
    rotation, _ = cv2.Rodrigues(rvec)
    return np.asarray(rotation), np.asarray(tvec).reshape(3)


def _invert(pose: Pose) -> Pose:
    rotation, translation = pose
    return rotation.T, -rotation.T @ translation


def hand_eye(mode: str, hand_poses: Sequence[Pose], board_poses: Sequence[Pose]) -> Pose:
    """Camera pose: in the base frame (eye-to-hand) or in the hand link (eye-in-hand).

    ``hand_poses`` are the hand link's poses in the base frame (forward kinematics of the recorded
    joints); ``board_poses`` the board in the camera for the same views.
    """
    if mode not in HAND_EYE_MODES:
        raise CalibrationSolveError(f"mode: expected one of {HAND_EYE_MODES}, got {mode!r}")
    if len(hand_poses) != len(board_poses):
        raise CalibrationSolveError(f"views: {len(hand_poses)} hand poses but {len(board_poses)} board poses")
    if len(hand_poses) < 3:
        raise CalibrationSolveError(
            f"views: hand-eye needs at least 3 views with the board found, got {len(hand_poses)}")
    hands = [_invert(p) for p in hand_poses] if mode == "eye-to-hand" else list(hand_poses)
    rotation, translation = cv2.calibrateHandEye(
        [h[0] for h in hands], [h[1] for h in hands], [b[0] for b in board_poses], [b[1] for b in board_poses],
        method=cv2.CALIB_HAND_EYE_PARK)
    return np.asarray(rotation), np.asarray(translation).reshape(3)


def camera_info_dict(camera: str, frame_id: str, image_size: tuple[int, int], k: np.ndarray,
                     dist: np.ndarray) -> dict[str, Any]:
    """ROS ``camera_info`` YAML body (camera_calibration_parsers layout)."""
    p = np.hstack([k, np.zeros((3, 1))])
    return {
        "image_width": int(image_size[0]), "image_height": int(image_size[1]), "camera_name": camera,
        "frame_id": frame_id,
        "camera_matrix": {"rows": 3, "cols": 3, "data": [round(float(v), 5) for v in k.ravel()]},
        "distortion_model": "plumb_bob",
        "distortion_coefficients": {"rows": 1, "cols": 5, "data": [round(float(v), 6) for v in dist.ravel()[:5]]},
        "rectification_matrix": {"rows": 3, "cols": 3, "data": [float(v) for v in np.eye(3).ravel()]},
        "projection_matrix": {"rows": 3, "cols": 4, "data": [round(float(v), 5) for v in p.ravel()]},
    }


def transform_entry(parent: str, child: str, pose: Pose) -> dict[str, Any]:
    """A static transform in the layout of ``calibration/sim/extrinsics.yaml``."""
    rotation, translation = pose
    return {"parent_frame": parent, "child_frame": child,
            "translation": [round(float(v), 6) for v in translation],
            "rotation_xyzw": [round(v, 6) for v in matrix_to_quat_xyzw(rotation)]}


def pose_difference(a: Pose, b: Pose) -> tuple[float, float]:
    """(translation difference in metres, rotation difference in degrees) between two poses."""
    translation = float(np.linalg.norm(a[1] - b[1]))
    cos = (np.trace(a[0].T @ b[0]) - 1.0) / 2.0
    return translation, float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def _compose(a: Pose, b: Pose) -> Pose:
    return a[0] @ b[0], a[0] @ b[1] + a[1]


def _to_params(pose: Pose) -> np.ndarray:
    rvec, _ = cv2.Rodrigues(pose[0])
    return np.concatenate([rvec.reshape(3), pose[1]])


def _from_params(p: np.ndarray) -> Pose:
    rotation, _ = cv2.Rodrigues(p[:3].reshape(3, 1))
    return np.asarray(rotation), p[3:6].copy()


def _mean_pose(poses: Sequence[Pose]) -> Pose:
    u, _, vt = np.linalg.svd(sum(p[0] for p in poses))
    rotation = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
    return rotation, np.mean([p[1] for p in poses], axis=0)


def refine_hand_eye(mode: str, hand_poses: Sequence[Pose], views: Sequence[View], k: np.ndarray,
                    dist: np.ndarray, camera: Pose, iterations: int = 30) -> tuple[Pose, float]:
    """Polish a hand-eye answer by minimising the corners' reprojection error over all views.

    The closed-form solvers work on per-view board poses, whose depth is noisy when the board is
    small in the picture; estimating the camera and the board mount together against the pixels
    themselves removes most of that (Levenberg–Marquardt, numeric Jacobian, 12 unknowns).
    Returns the camera pose and the final RMS reprojection error (pixels).
    """
    hands = [_invert(h) for h in hand_poses] if mode == "eye-in-hand" else list(hand_poses)
    # Chain per view: camera <- base/hand (inv camera) <- hands[i] <- mount <- board.
    boards = [board_pose(v, k, dist) for v in views]
    mount = _mean_pose([_compose(_invert(h), _compose(camera, b)) for h, b in zip(hands, boards, strict=True)])

    def residuals(params: np.ndarray) -> np.ndarray:
        cam, mnt = _from_params(params[:6]), _from_params(params[6:])
        inv_cam = _invert(cam)
        out = []
        for hand, (objects, pixels) in zip(hands, views, strict=True):
            r, t = _compose(inv_cam, _compose(hand, mnt))
            rvec, _ = cv2.Rodrigues(r)
            projected, _ = cv2.projectPoints(objects, rvec, t, k, dist)
            out.append((projected.reshape(-1, 2) - pixels).ravel())
        return np.concatenate(out)

    params = np.concatenate([_to_params(camera), _to_params(mount)])
    current = residuals(params)
    damping = 1e-3
    for _ in range(iterations):
        jac = np.empty((current.size, params.size))
        for j in range(params.size):
            step = np.zeros_like(params)
            step[j] = 1e-6
            jac[:, j] = (residuals(params + step) - current) / 1e-6
        jtj, jtr = jac.T @ jac, jac.T @ current
        improved = False
        for _ in range(10):
            delta = np.linalg.solve(jtj + damping * np.diag(np.diag(jtj) + 1e-12), -jtr)
            trial = residuals(params + delta)
            if trial @ trial < current @ current:
                params, current, damping, improved = params + delta, trial, damping / 3, True
                break
            damping *= 10
        if not improved or np.linalg.norm(delta) < 1e-10:
            break
    rms = float(np.sqrt(np.mean(current.reshape(-1, 2) ** 2) * 2))
    return _from_params(params[:6]), rms
