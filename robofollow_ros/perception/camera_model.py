"""A calibrated pinhole camera in the ``world`` frame: what perception needs to turn pixels into metres.

Built from the ROS ``camera_info`` YAML and a static transform (``calibration/<rig>/``), so the rig and
the simulator go through the same code: on the rig the files come from ``robofollow calibrate``, in
simulation from ``robofollow sim calibration``. Optical convention: +z forward, +x right, +y down.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, WORLD_FRAME
from robofollow_ros.yamlio import read_yaml_mapping


class CalibrationError(ValueError):
    """A calibration file is missing, malformed or does not describe the camera asked for."""


def quat_xyzw_to_matrix(q: Any) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    n = np.sqrt(x * x + y * y + z * z + w * w)
    if n == 0:
        raise CalibrationError("rotation_xyzw: zero quaternion")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat_xyzw(r: np.ndarray) -> tuple[float, float, float, float]:
    """Rotation matrix to a unit quaternion (x, y, z, w), w >= 0 (ROS order)."""
    m = np.asarray(r, dtype=np.float64)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        w, x, y, z = 0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        w, x, y, z = (m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        w, x, y, z = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        w, x, y, z = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s
    q = np.array([x, y, z, w])
    q /= np.linalg.norm(q)
    if q[3] < 0:
        q = -q
    return float(q[0]), float(q[1]), float(q[2]), float(q[3])


def _matrix(block: Any, field: str, rows: int, cols: int) -> np.ndarray:
    try:
        data = np.asarray(block["data"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{field}: expected a mapping with numeric 'data', got {block!r}") from exc
    if data.size != rows * cols:
        raise CalibrationError(f"{field}: expected {rows * cols} values, got {data.size}")
    return data.reshape(rows, cols)


@dataclass(frozen=True)
class CameraModel:
    """Intrinsics ``k`` (3×3, distortion-free after rectification) and the optical frame's pose in world."""

    name: str
    width: int
    height: int
    k: np.ndarray
    world_rotation: np.ndarray  # optical axes expressed in world (columns)
    world_position: np.ndarray

    @classmethod
    def from_files(cls, camera_info: Path, extrinsics: Path, camera: str,
                   parent_pose: tuple[np.ndarray, np.ndarray] | None = None) -> CameraModel:
        """Read ``<camera>.yaml`` and the camera's entry of ``extrinsics.yaml``.

        A camera mounted on a link (wrist cameras) needs ``parent_pose`` = (rotation, position) of
        that link in world; the head camera's extrinsic is already in ``world``.
        """
        info = _load_yaml(camera_info)
        entries = _load_yaml(extrinsics)
        if camera not in entries:
            raise CalibrationError(f"camera: {camera!r} not in {extrinsics} (has {sorted(entries)})")
        entry = entries[camera]
        try:
            width, height = int(info["image_width"]), int(info["image_height"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"image_width/image_height: missing or not integers in {camera_info}") from exc
        k = _matrix(info.get("camera_matrix"), "camera_matrix", 3, 3)
        try:
            translation = np.asarray(entry["translation"], dtype=np.float64).reshape(3)
            rotation = quat_xyzw_to_matrix(entry["rotation_xyzw"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"{camera}: extrinsic needs translation [3] and rotation_xyzw [4]") from exc
        parent = entry.get("parent_frame", WORLD_FRAME)
        if parent != WORLD_FRAME:
            if parent_pose is None:
                raise CalibrationError(f"{camera}: mounted on {parent!r}; pass that link's world pose")
            parent_rotation, parent_position = parent_pose
            rotation = parent_rotation @ rotation
            translation = parent_rotation @ translation + parent_position
        return cls(camera, width, height, k, rotation, translation)

    @classmethod
    def from_calibration_dir(cls, directory: Path, camera: str = "head",
                             parent_pose: tuple[np.ndarray, np.ndarray] | None = None) -> CameraModel:
        if camera not in CAMERA_NAMES:
            raise CalibrationError(f"camera: unknown camera {camera!r}; expected one of {CAMERA_NAMES}")
        return cls.from_files(directory / f"{camera}.yaml", directory / "extrinsics.yaml", camera, parent_pose)

    @cached_property
    def k_inverse(self) -> np.ndarray:
        """Computed once: a LAPACK call per pixel lookup would cost more than the whole detection."""
        return np.asarray(np.linalg.inv(self.k))

    def pixel_rays(self) -> np.ndarray:
        """(H, W, 3) world direction of each pixel centre's ray, scaled so that optical z = 1 (depth units)."""
        return self._pixel_rays.copy()

    @cached_property
    def _pixel_rays(self) -> np.ndarray:
        """Computed once per camera: every perception (one per trial, per perturbation) needs them."""
        u, v = np.meshgrid(np.arange(self.width) + 0.5, np.arange(self.height) + 0.5)
        kinv = self.k_inverse
        pix = np.stack([u, v, np.ones_like(u)], axis=-1)
        return np.asarray((pix @ kinv.T) @ self.world_rotation.T)

    def project(self, points_world: np.ndarray) -> np.ndarray:
        """(N, 3) world points to (N, 3) rows of (u, v, depth); pixel coordinates with centres at +0.5."""
        local = (np.atleast_2d(points_world) - self.world_position) @ self.world_rotation
        uvw = local @ self.k.T
        return np.column_stack([uvw[:, 0] / uvw[:, 2], uvw[:, 1] / uvw[:, 2], local[:, 2]])

    def ray_plane(self, u: float, v: float, plane_z: float) -> np.ndarray | None:
        """World point where the ray through pixel (u, v) meets the plane z = ``plane_z`` (None if parallel/behind)."""
        direction = self.world_rotation @ (self.k_inverse @ np.array([u, v, 1.0]))
        if abs(direction[2]) < 1e-9:
            return None
        t = (plane_z - self.world_position[2]) / direction[2]
        if t <= 0:
            return None
        return np.asarray(self.world_position + t * direction)


def _load_yaml(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, "calibration file", CalibrationError)
