"""Depth from a separate depth camera, aligned to the colour camera's pixels with calibrated extrinsics.

A RealSense's depth comes from its stereo pair, whose origin is not the colour camera's (about 15 mm
apart on a D435): taken pixel for pixel, depth and colour disagree by several pixels at the table's
range. Like the driver's ``aligned_depth_to_color``, every colour pixel looks up the depth camera
where its own 3-D point projects. The point depends on the depth being looked up, so the lookup
iterates from a flat guess (three rounds converge to a pixel for the benchmark's ranges); pixels the
depth camera cannot see (holes, disocclusion) stay invalid (0).

Files: ``<calibration>/head_depth.yaml`` (camera_info of the depth stream) and an ``extrinsics.yaml``
entry ``head_depth`` whose ``parent_frame`` is the colour optical frame: p_colour = R · p_depth + t.
Without them the depth is taken as already aligned (the driver's aligned topic, or the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import cv2
import numpy as np

from robofollow_ros.contract import CAMERA_FRAMES
from robofollow_ros.perception.camera_model import CalibrationError, _load_yaml, _matrix, quat_xyzw_to_matrix

DEPTH_ENTRY = "head_depth"
ITERATIONS = 3


@dataclass(frozen=True)
class DepthToColour:
    """Intrinsics of both cameras and the depth camera's pose in the colour optical frame."""

    colour_k: np.ndarray
    colour_size: tuple[int, int]  # (width, height)
    depth_k: np.ndarray
    depth_size: tuple[int, int]
    rotation: np.ndarray  # colour_from_depth
    translation: np.ndarray  # depth origin in the colour frame (m)

    @cached_property
    def _colour_rays(self) -> np.ndarray:
        w, h = self.colour_size
        u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
        return np.asarray(np.stack([u, v, np.ones_like(u)], axis=-1) @ np.linalg.inv(self.colour_k).T, dtype=np.float32)

    def align(self, depth: np.ndarray) -> np.ndarray:
        """Depth image of the depth camera → depth (colour optical z, m) on the colour camera's pixels."""
        dw, dh = self.depth_size
        if depth.shape[:2] != (dh, dw):
            raise ValueError(f"depth: expected {dw}x{dh} (the depth camera's calibration), got "
                             f"{depth.shape[1]}x{depth.shape[0]}")
        d = np.where(np.isfinite(depth) & (depth > 0), depth, 0.0).astype(np.float32)
        valid = d[d > 0]
        if len(valid) == 0:
            return np.zeros((self.colour_size[1], self.colour_size[0]), dtype=np.float32)
        rays = self._colour_rays
        z = np.full(rays.shape[:2], float(np.median(valid)), dtype=np.float32)
        r_t = self.rotation.T.astype(np.float32)
        t = self.translation.astype(np.float32)
        k, kinv = self.depth_k.astype(np.float32), np.linalg.inv(self.depth_k).astype(np.float32)
        rot, result = self.rotation.astype(np.float32), np.zeros_like(z)
        for _ in range(ITERATIONS):
            in_depth = (z[..., None] * rays - t) @ r_t.T
            zd = np.where(in_depth[..., 2] > 1e-6, in_depth[..., 2], 1e-6)
            u = k[0, 0] * in_depth[..., 0] / zd + k[0, 2]
            v = k[1, 1] * in_depth[..., 1] / zd + k[1, 2]
            looked_up = cv2.remap(d, (u - 0.5).astype(np.float32), (v - 0.5).astype(np.float32), cv2.INTER_NEAREST,
                                  borderMode=cv2.BORDER_CONSTANT, borderValue=(0.0,))
            hit = looked_up > 0
            measured = looked_up[..., None] * (np.stack([u, v, np.ones_like(u)], axis=-1) @ kinv.T)
            z_colour = (measured @ rot.T + t)[..., 2]
            result = np.where(hit, z_colour, 0.0).astype(np.float32)
            z = np.where(hit, z_colour, z).astype(np.float32)
        return result

    @classmethod
    def identity_offset(cls, k: np.ndarray, size: tuple[int, int], offset_m: tuple[float, float, float]
                        ) -> DepthToColour:
        """A depth camera with the colour camera's intrinsics, displaced by ``offset_m`` (colour optical frame)."""
        return cls(k, size, k, size, np.eye(3), np.asarray(offset_m, dtype=np.float64))


def load_depth_alignment(calibration_dir: Path, colour_k: np.ndarray, colour_size: tuple[int, int]
                         ) -> DepthToColour | None:
    """The alignment if ``head_depth.yaml`` and an ``extrinsics.yaml`` entry ``head_depth`` exist, else None."""
    info_path = Path(calibration_dir) / f"{DEPTH_ENTRY}.yaml"
    if not info_path.is_file():
        return None
    info = _load_yaml(info_path)
    entries = _load_yaml(Path(calibration_dir) / "extrinsics.yaml")
    if DEPTH_ENTRY not in entries:
        raise CalibrationError(f"{info_path} exists but extrinsics.yaml has no {DEPTH_ENTRY!r} entry")
    entry = entries[DEPTH_ENTRY]
    parent = f"{CAMERA_FRAMES['head']}_optical"
    if entry.get("parent_frame") != parent:
        raise CalibrationError(f"{DEPTH_ENTRY}: parent_frame must be {parent!r}, got {entry.get('parent_frame')!r}")
    try:
        size = (int(info["image_width"]), int(info["image_height"]))
        translation = np.asarray(entry["translation"], dtype=np.float64).reshape(3)
        rotation = quat_xyzw_to_matrix(entry["rotation_xyzw"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{DEPTH_ENTRY}: needs image size, translation [3] and rotation_xyzw [4]") from exc
    return DepthToColour(colour_k, colour_size, _matrix(info.get("camera_matrix"), "camera_matrix", 3, 3), size,
                         rotation, translation)
