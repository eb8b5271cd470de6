"""The rig's three cameras: mounting on URDF links, intrinsics, projection and ROS calibration files.

Camera links in the URDF use SAPIEN's camera convention (+x forward, +y left, +z up). ROS
``camera_info`` and the optical frames (``*_optical``: +z forward, +x right, +y down) are derived
here, so the calibration files under ``calibration/sim/`` always match what SAPIEN renders.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robofollow_ros.contract import CAMERA_FRAMES, CAMERA_NAMES, CAMERA_OPTICAL_FRAMES
from robofollow_ros.robot.transforms import matrix_to_quat, quat_to_matrix

#: Rotation from a camera body frame (SAPIEN: x fwd, y left, z up) to its ROS optical frame.
BODY_FROM_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
def intrinsic_matrix(width: int, height: int, fovy: float) -> np.ndarray:
    """Pinhole K of a SAPIEN camera with vertical field of view ``fovy`` and square pixels."""
    fy = (height / 2.0) / math.tan(fovy / 2.0)
    return np.array([[fy, 0.0, width / 2.0], [0.0, fy, height / 2.0], [0.0, 0.0, 1.0]])


def project(point_world: np.ndarray, camera_position: np.ndarray, camera_quat_wxyz: np.ndarray,
            k: np.ndarray) -> tuple[float, float, float]:
    """Pixel (u, v) and depth of a world point for a camera whose body pose is given (SAPIEN convention)."""
    body = quat_to_matrix(camera_quat_wxyz)
    optical = body @ BODY_FROM_OPTICAL
    local = optical.T @ (np.asarray(point_world, dtype=np.float64) - np.asarray(camera_position, dtype=np.float64))
    u = k[0, 0] * local[0] / local[2] + k[0, 2]
    v = k[1, 1] * local[1] / local[2] + k[1, 2]
    return float(u), float(v), float(local[2])


def optical_mounts(camera_links: dict[str, str]
                   ) -> list[tuple[str, str, tuple[float, float, float], tuple[float, float, float, float]]]:
    """Static frames (parent, child, xyz, quat wxyz) that hang each camera's optical frame on the rig.

    ``<link> → <camera>_camera`` (identity) when the rig mounts the camera on a link of another name,
    then ``<camera>_camera → <camera>_camera_optical`` (REP 103). One list for the ROS graph
    (robot_state_node) and the headless recordings (``monitoring.robot``): the images' frame ids name
    the same frames, placed the same way, however they were recorded.
    """
    w, x, y, z = (float(v) for v in matrix_to_quat(BODY_FROM_OPTICAL))
    out: list[tuple[str, str, tuple[float, float, float], tuple[float, float, float, float]]] = []
    for camera in CAMERA_NAMES:
        body = camera_links[camera]
        if body != CAMERA_FRAMES[camera]:
            out.append((body, CAMERA_FRAMES[camera], (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)))
        out.append((CAMERA_FRAMES[camera], CAMERA_OPTICAL_FRAMES[camera], (0.0, 0.0, 0.0), (w, x, y, z)))
    return out


def camera_info_dict(camera: str, width: int, height: int, fovy: float) -> dict[str, Any]:
    """A ROS ``camera_info`` YAML body (camera_calibration_parsers layout) for a distortion-free camera."""
    k = intrinsic_matrix(width, height, fovy)
    p = np.hstack([k, np.zeros((3, 1))])
    return {
        "image_width": width,
        "image_height": height,
        "camera_name": camera,
        "frame_id": f"{CAMERA_FRAMES[camera]}_optical",
        "camera_matrix": {"rows": 3, "cols": 3, "data": [round(float(v), 5) + 0.0 for v in k.ravel()]},
        "distortion_model": "plumb_bob",
        "distortion_coefficients": {"rows": 1, "cols": 5, "data": [0.0] * 5},
        "rectification_matrix": {"rows": 3, "cols": 3, "data": [float(v) for v in np.eye(3).ravel()]},
        "projection_matrix": {"rows": 3, "cols": 4, "data": [round(float(v), 5) + 0.0 for v in p.ravel()]},
        "fovy_rad": fovy,
    }


def optical_extrinsic(parent_from_body: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """Translation and rotation (x, y, z, w as in ROS) of the optical frame in the parent frame."""
    position, quat_wxyz = parent_from_body
    rotation = quat_to_matrix(quat_wxyz) @ BODY_FROM_OPTICAL
    w, x, y, z = matrix_to_quat(rotation)
    # Rounded to 5 decimals (+ 0.0 turns -0.0 into 0.0) so the committed files are stable across machines.
    return {"translation": [round(float(v), 5) + 0.0 for v in position],
            "rotation_xyzw": [round(float(v), 5) + 0.0 for v in (x, y, z, w)]}


def write_calibration(out_dir: Path, width: int, height: int, fovy: dict[str, float],
                      mounts: dict[str, tuple[str, tuple[np.ndarray, np.ndarray]]]) -> list[Path]:
    """Write ``<camera>.yaml`` camera_info files and ``extrinsics.yaml`` (mount of each optical frame)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for camera in CAMERA_NAMES:
        path = out_dir / f"{camera}.yaml"
        info = camera_info_dict(camera, width, height, fovy[camera])
        path.write_text(yaml.safe_dump(info, sort_keys=False, default_flow_style=None), encoding="utf-8")
        written.append(path)
    extrinsics = {
        camera: {"parent_frame": parent, "child_frame": f"{CAMERA_FRAMES[camera]}_optical",
                 **optical_extrinsic(pose)}
        for camera, (parent, pose) in mounts.items()
    }
    path = out_dir / "extrinsics.yaml"
    header = "# Generated by `robofollow sim calibration`; optical frames: +z forward, +x right, +y down.\n"
    path.write_text(header + yaml.safe_dump(extrinsics, sort_keys=False, default_flow_style=None), encoding="utf-8")
    written.append(path)
    return written
