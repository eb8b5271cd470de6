"""The table plane, found in depth by RANSAC every frame; heights above it segment the objects.

Whatever the table's colour or texture, its points lie on one plane and the objects' points stand
above it, so geometry, not colour, decides what is an object. The fit uses a fixed random sample of
pixels (enough for millimetre precision, cheap enough for every frame), refits the previous frame's
plane without a vote while it still explains the sample (the head camera does not move), otherwise
votes with it as one of the hypotheses, accepts only planes within
``MAX_TILT_DEG`` of the calibrated world's up (never an arm's flank), and refines the winner by least
squares on its inliers. The spread of the inliers also gives the depth noise, σ(z) ≈ k·z², which
sets how far above the plane a pixel must be to count as an object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robofollow_ros.perception.camera_model import CameraModel

#: Pixels sampled per frame for the fit.
SAMPLE_PIXELS = 1500
RANSAC_ITERATIONS = 40
#: Inlier band of the RANSAC vote (m): wide enough for 2 %-of-range noise at the table's distance.
INLIER_M = 0.012
MAX_TILT_DEG = 25.0
#: A fit must explain at least this share of the sampled valid pixels.
MIN_INLIER_SHARE = 0.25
#: The last plane is kept (refitted, no vote) while it explains this share of its former inlier share.
KEEP_SHARE = 0.9


@dataclass(frozen=True)
class Plane:
    """``normal · p = offset`` for points p on the plane (world frame); the normal points up."""

    normal: np.ndarray
    offset: float
    inlier_share: float
    #: Depth-noise coefficient k of σ_height(z) ≈ k·z² (m⁻¹), from the inliers' spread.
    noise_k: float

    def height(self, points: np.ndarray) -> np.ndarray:
        return np.asarray(np.asarray(points) @ self.normal - self.offset)

    def height_at_xy(self, x: float, y: float) -> float:
        """World z of the plane above (x, y)."""
        n = self.normal
        return float((self.offset - n[0] * x - n[1] * y) / n[2])


class TablePlane:
    """Per-camera RANSAC state: the sampled pixels' rays and the last plane found."""

    def __init__(self, camera: CameraModel, seed: int = 0) -> None:
        self.origin = np.asarray(camera.world_position, dtype=np.float64)
        self.rays = camera.pixel_rays().reshape(-1, 3).astype(np.float32)
        rng = np.random.default_rng(seed)
        self.sample = np.sort(rng.choice(self.rays.shape[0], size=min(SAMPLE_PIXELS, self.rays.shape[0]),
                                         replace=False))
        self._rng = rng
        self.last: Plane | None = None

    def fit(self, flat_depth: np.ndarray) -> Plane | None:
        """The table plane in this frame's depth (None if no acceptable plane is found)."""
        d = flat_depth[self.sample].astype(np.float64)
        valid = np.isfinite(d) & (d > 0)
        if valid.sum() < 30:
            return None
        depth = d[valid]
        points = self.origin + depth[:, None] * self.rays[self.sample[valid]]
        if self.last is not None:
            # The head camera does not move: while the last plane still explains as many points, refit it
            # without a vote (a new vote when an arm or a bump changes what the sample sees).
            near = np.abs(points @ self.last.normal - self.last.offset) < INLIER_M
            if near.mean() >= KEEP_SHARE * self.last.inlier_share:
                plane = self._refine(points[near], depth[near], len(points))
                if plane is not None:
                    self.last = plane
                    return plane
        normals, offsets = self._hypotheses(points)
        if len(normals) == 0:
            return None
        distances = np.abs(points @ normals.T - offsets)  # (N, hypotheses)
        votes = (distances < INLIER_M).sum(axis=0)
        best = int(np.argmax(votes))
        if votes[best] < MIN_INLIER_SHARE * len(points):
            return None
        inliers = distances[:, best] < INLIER_M
        plane = self._refine(points[inliers], depth[inliers], len(points))
        if plane is not None:
            self.last = plane
        return plane

    def _hypotheses(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(points)
        triples = self._rng.integers(0, n, size=(RANSAC_ITERATIONS, 3))
        a, b, c = points[triples[:, 0]], points[triples[:, 1]], points[triples[:, 2]]
        normals = np.cross(b - a, c - a)
        length = np.linalg.norm(normals, axis=1)
        ok = length > 1e-9
        normals = normals[ok] / length[ok, None]
        normals *= np.where(normals[:, 2:3] < 0, -1.0, 1.0)
        offsets = np.einsum("ij,ij->i", normals, a[ok])
        if self.last is not None:
            normals = np.vstack([normals, self.last.normal])
            offsets = np.append(offsets, self.last.offset)
        upright = normals[:, 2] > math.cos(math.radians(MAX_TILT_DEG))
        return normals[upright], offsets[upright]

    def _refine(self, points: np.ndarray, depth: np.ndarray, sampled: int) -> Plane | None:
        """Least-squares plane of the inliers, refitted without the points beyond 3 robust sigmas."""
        normal, offset = _least_squares_plane(points)
        residual = points @ normal - offset
        mad = float(np.median(np.abs(residual))) * 1.4826
        keep = np.abs(residual) < max(3.0 * mad, 0.002)
        if keep.sum() < 10:
            return None
        points, depth = points[keep], depth[keep]
        normal, offset = _least_squares_plane(points)
        if normal[2] < math.cos(math.radians(MAX_TILT_DEG)):
            return None
        residual = points @ normal - offset
        noise_k = float(1.4826 * np.median(np.abs(residual) / np.square(depth)))
        return Plane(normal, offset, len(points) / sampled, noise_k)


def _least_squares_plane(points: np.ndarray) -> tuple[np.ndarray, float]:
    centre = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - centre, full_matrices=False)
    normal = np.asarray(vt[2] if vt[2, 2] > 0 else -vt[2], dtype=np.float64)
    return normal, float(centre @ normal)
