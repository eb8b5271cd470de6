"""The simulated cameras' calibration, computed from the rig URDF and YAML (no scene stepped).

Head camera extrinsics are given in ``world``; wrist cameras in their parent link (``<arm>_link6``),
since they move with the arm. ``calibration/sim/`` holds the output for the default rig; a test
checks it is current.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, WORLD_FRAME
from robofollow_ros.paths import share_path
from robofollow_ros.robot.cameras import write_calibration
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.rig_config import RigConfig
from robofollow_ros.robot.transforms import matrix_to_quat, quat_to_matrix

DEFAULT_CALIBRATION_DIR = share_path("calibration", "sim")


def camera_mounts(kinematics: RigKinematics) -> dict[str, tuple[str, tuple[np.ndarray, np.ndarray]]]:
    """Per camera: (parent frame, pose of the camera body frame in that parent)."""
    vector = kinematics.home_vector()
    mounts: dict[str, tuple[str, tuple[np.ndarray, np.ndarray]]] = {}
    for camera in CAMERA_NAMES:
        link = kinematics.rig.camera_links[camera]
        body = kinematics.link_pose(vector, link)
        parent = kinematics.parent_link(link)
        if parent is None or parent == WORLD_FRAME:
            mounts[camera] = (WORLD_FRAME, (body.position, body.quat_wxyz))
            continue
        base = kinematics.link_pose(vector, parent)
        rotation = base.rotation.T @ body.rotation
        position = base.rotation.T @ (body.position - base.position)
        mounts[camera] = (parent, (position, matrix_to_quat(rotation)))
    return mounts


def write_rig_calibration(out_dir: Path, rig: RigConfig, width: int = 320, height: int = 240) -> list[Path]:
    kinematics = RigKinematics(rig)
    return write_calibration(out_dir, width, height, rig.camera_fovy, camera_mounts(kinematics))


__all__ = ["DEFAULT_CALIBRATION_DIR", "camera_mounts", "quat_to_matrix", "write_rig_calibration"]
