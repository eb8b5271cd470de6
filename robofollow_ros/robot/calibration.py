"""The simulated cameras' calibration, computed from the rig URDF and YAML (no scene stepped).

Head camera extrinsics are given in ``world``; wrist cameras in the nearest link a joint moves (``<arm>_link6``),
since they move with the arm. ``calibration/sim/`` holds the output for the default rig; a test
checks it is current.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, WORLD_FRAME
from robofollow_ros.paths import share_path
from robofollow_ros.robot.cameras import write_calibration
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.rig_config import RigConfig
from robofollow_ros.robot.transforms import matrix_to_quat, quat_to_matrix

DEFAULT_CALIBRATION_DIR = share_path("calibration", "sim")
DEFAULT_RIG_CONFIG_FILE = share_path("config", "robot", "rig.yaml")


def _moving_ancestor(kinematics: RigKinematics, link: str) -> str | None:
    """The nearest link above ``link`` that a joint moves (None: a chain of fixed joints up to the root), so a
    camera on a fixed frame of a fixed frame (the ALOHA's ``head_camera`` on the MJCF's ``top``) is given in
    ``world``, as the calibration a lab measures would be."""
    parent = kinematics.parent_link(link)
    while parent is not None:
        joint = kinematics.model.parent_joint(parent)
        if joint is None or joint.moving:
            return parent if joint is not None else None
        parent = joint.parent
    return None


def camera_mounts(kinematics: RigKinematics) -> dict[str, tuple[str, tuple[np.ndarray, np.ndarray]]]:
    """Per camera: (parent frame, pose of the camera body frame in that parent)."""
    vector = kinematics.home_vector()
    mounts: dict[str, tuple[str, tuple[np.ndarray, np.ndarray]]] = {}
    for camera in CAMERA_NAMES:
        link = kinematics.rig.camera_links[camera]
        body = kinematics.link_pose(vector, link)
        parent = _moving_ancestor(kinematics, link)
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


def rig_calibration_dir(rig: RigConfig | None = None) -> Path:
    """The simulated cameras' calibration of ``rig`` (default: the active rig): ``calibration/sim`` for the
    built-in rig; for any other, written under the user's cache folder, keyed by the rig's URDF and cameras (with
    the built-in colour model, which describes the scenes' colours, not the rig)."""
    from robofollow_ros.robot.rig_config import load_rig_config

    rig = rig or load_rig_config()
    if rig.source == DEFAULT_RIG_CONFIG_FILE:
        return DEFAULT_CALIBRATION_DIR
    from robofollow_ros.robot.rig_compose import cache_dir

    key = hashlib.sha256(repr((rig.urdf_path.read_text(encoding="utf-8"), sorted(rig.camera_links.items()),
                               sorted(rig.camera_fovy.items()))).encode("utf-8")).hexdigest()[:16]
    out = cache_dir() / f"{rig.name}-{key}-calibration"
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        written = write_rig_calibration(staging, rig)
        shutil.copyfile(DEFAULT_CALIBRATION_DIR / "colour.yaml", staging / "colour.yaml")
        out.mkdir(exist_ok=True)
        for path in [*written, staging / "colour.yaml"]:  # file by file: a concurrent writer writes the same
            target = out / path.name
            if not target.is_file() or target.read_bytes() != path.read_bytes():
                os.replace(path, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


__all__ = ["DEFAULT_CALIBRATION_DIR", "camera_mounts", "quat_to_matrix", "rig_calibration_dir", "write_rig_calibration"]
