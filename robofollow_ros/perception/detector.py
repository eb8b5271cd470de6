"""Colour blobs in the head camera's RGB, lifted to 3-D points in ``world`` through depth and calibration.

One connected component of one colour class is one detection. With depth, its pixels become world
points and the detection carries the measurements grounding needs (extent, top height, how flat the
top is, yaw of a flat top). Without depth only the pixel outline is kept and the 3-D position comes
later from the table plane and the grounded identity's height (``estimate.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colours import COLOUR_CLASSES, class_image

#: Blobs smaller than this (pixels) are noise, or an object almost hidden by the gripper.
MIN_PIXELS = 25
#: Points this close above the table are table pixels caught at an object's outline.
TABLE_MARGIN = 0.0015
#: Points within this of the highest point form the "top" (a flat top, or a sphere's cap).
TOP_BAND = 0.004
#: A vertical gap this large inside a one-colour blob separates two objects (one held above the other).
HEIGHT_GAP = 0.02
#: Without depth, blob centres are first put on this plane above the table (a typical object's middle).
PLANE_GUESS_HEIGHT = 0.02


@dataclass
class Detection:
    """One colour blob; 3-D fields are None without depth."""

    colour: str
    pixel_count: int
    pixels: np.ndarray = field(repr=False)  # flat pixel indices (row * width + col)
    centroid_uv: tuple[float, float]
    z_top: float | None = None
    x_range: tuple[float, float] | None = None  # robust min / max of x over the blob's points
    y_front: float | None = None  # robust minimum y (the side facing the robot and the head camera)
    top_xy: tuple[float, float] | None = None  # centroid of the top band
    flat_fraction: float | None = None  # share of points in the top band: high for flat tops
    top_yaw: float | None = None  # direction of the top band's long side (rad, world z), if elongated
    point_count: int = 0
    plane_xy: tuple[float, float] | None = None  # without depth: blob centre's ray on a plane just above the table

    @property
    def has_depth(self) -> bool:
        return self.z_top is not None

    @property
    def width(self) -> float | None:
        return None if self.x_range is None else self.x_range[1] - self.x_range[0]

    def raw_position(self) -> np.ndarray | None:
        """Best guess before grounding: top-band centroid at the top height."""
        if self.top_xy is None or self.z_top is None:
            return None
        return np.array([self.top_xy[0], self.top_xy[1], self.z_top])


class BlobDetector:
    """Finds coloured blobs in one calibrated camera; precomputes the camera's pixel rays once."""

    def __init__(self, camera: CameraModel, min_pixels: int = MIN_PIXELS) -> None:
        if min_pixels < 1:
            raise ValueError(f"min_pixels: must be >= 1, got {min_pixels}")
        self.camera = camera
        self.min_pixels = min_pixels
        self._rays = camera.pixel_rays().reshape(-1, 3)

    def detect(self, rgb: np.ndarray, depth: np.ndarray | None = None) -> list[Detection]:
        expected = (self.camera.height, self.camera.width)
        if rgb.shape[:2] != expected:
            raise ValueError(f"rgb: expected {expected[1]}x{expected[0]} to match the calibration, "
                             f"got {rgb.shape[1]}x{rgb.shape[0]}")
        if depth is not None and depth.shape[:2] != expected:
            raise ValueError(f"depth: expected shape {expected}, got {depth.shape}")
        classes = class_image(rgb)
        flat_depth = None if depth is None else np.asarray(depth, dtype=np.float64).reshape(-1)
        detections = []
        blobs = self._blobs(classes)
        if flat_depth is not None:
            blobs = [(colour, part) for colour, pixels in blobs for part in self._split_by_height(pixels, flat_depth)]
        for colour, pixels in blobs:
            rows, cols = np.divmod(pixels, self.camera.width)
            detection = Detection(colour, len(pixels), pixels, (float(cols.mean()) + 0.5, float(rows.mean()) + 0.5))
            if flat_depth is not None:
                self._measure(detection, flat_depth)
                if detection.point_count < self.min_pixels // 2:
                    continue
            else:
                hit = self.camera.ray_plane(*detection.centroid_uv, TABLE_TOP_Z + PLANE_GUESS_HEIGHT)
                if hit is None:
                    continue
                detection.plane_xy = (float(hit[0]), float(hit[1]))
            detections.append(detection)
        return detections

    def _blobs(self, classes: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """(colour, flat pixel indices) of every single-colour connected blob of at least ``min_pixels``.

        One labelling pass over all coloured pixels, then a second pass only inside the few blobs
        where two colours touch (a cylinder standing on a cube): a quarter of the work of labelling
        each colour over the whole picture.
        """
        width = self.camera.width
        count, labels, stats, _ = cv2.connectedComponentsWithStats((classes > 0).view(np.uint8), connectivity=8)
        out = []
        for label in range(1, count):
            if stats[label, cv2.CC_STAT_AREA] < self.min_pixels:
                continue
            x0, y0 = int(stats[label, cv2.CC_STAT_LEFT]), int(stats[label, cv2.CC_STAT_TOP])
            w, h = int(stats[label, cv2.CC_STAT_WIDTH]), int(stats[label, cv2.CC_STAT_HEIGHT])
            inside = labels[y0:y0 + h, x0:x0 + w] == label
            crop_classes = np.where(inside, classes[y0:y0 + h, x0:x0 + w], 0)
            present = np.unique(crop_classes[inside])
            for cls in present:
                mask = (crop_classes == cls).view(np.uint8)
                if len(present) == 1:
                    parts, part_labels = 2, mask.astype(np.int32)
                else:
                    parts, part_labels = cv2.connectedComponents(mask, connectivity=8)
                for part in range(1, parts):
                    rows, cols = np.nonzero(part_labels == part)
                    if len(rows) >= self.min_pixels:
                        out.append((COLOUR_CLASSES[int(cls) - 1], (rows + y0) * width + (cols + x0)))
        return out

    def _split_by_height(self, pixels: np.ndarray, flat_depth: np.ndarray) -> list[np.ndarray]:
        """Split a one-colour blob where its points leave a vertical gap: an object held above a look-alike.

        Two red things overlapping in the picture form one blob; in depth they are apart. Every object
        shows a continuous run of heights from its top down to what it stands on, so a gap of more
        than ``HEIGHT_GAP`` with enough points on both sides separates two objects.
        """
        z = self.camera.world_position[2] + flat_depth[pixels] * self._rays[pixels, 2]
        order = np.argsort(z)
        z_sorted = z[order]
        if len(z_sorted) < 2 * self.min_pixels:
            return [pixels]
        gaps = np.diff(z_sorted)
        inner = gaps[self.min_pixels - 1:len(gaps) - self.min_pixels + 1]
        if len(inner) == 0 or not np.isfinite(inner).any() or np.nanmax(inner) <= HEIGHT_GAP:
            return [pixels]
        cut = int(np.nanargmax(inner)) + self.min_pixels
        low, high = pixels[order[:cut]], pixels[order[cut:]]
        return [*self._split_by_height(low, flat_depth), *self._split_by_height(high, flat_depth)]

    def _measure(self, detection: Detection, flat_depth: np.ndarray) -> None:
        depth = flat_depth[detection.pixels]
        valid = np.isfinite(depth) & (depth > 0)
        points = self.camera.world_position + depth[valid, None] * self._rays[detection.pixels[valid]]
        points = points[points[:, 2] > TABLE_TOP_Z + TABLE_MARGIN]
        detection.point_count = len(points)
        if len(points) == 0:
            return
        z = points[:, 2]
        (z_top,) = _order_statistics(z, (0.98,))
        top = points[z > z_top - TOP_BAND]
        detection.z_top = z_top
        x_lo, x_hi = _order_statistics(points[:, 0], (0.01, 0.99))
        detection.x_range = (x_lo, x_hi)
        (detection.y_front,) = _order_statistics(points[:, 1], (0.01,))
        detection.top_xy = (float(top[:, 0].mean()), float(top[:, 1].mean()))
        detection.flat_fraction = len(top) / len(points)
        detection.top_yaw = _elongation_yaw(top[:, :2])


def _order_statistics(values: np.ndarray, fractions: tuple[float, ...]) -> list[float]:
    """Robust extremes by partial sort (nearest rank); ``np.percentile`` costs ten times more per call."""
    n = len(values)
    ranks = [min(n - 1, max(0, round(f * (n - 1)))) for f in fractions]
    part = np.partition(values, ranks)
    return [float(part[r]) for r in ranks]


def _elongation_yaw(xy: np.ndarray) -> float | None:
    """Angle of the long side of a rectangle-like point set, from its minimum-area rectangle (rad)."""
    if len(xy) < 8:
        return None
    (_, _), (w, h), angle = cv2.minAreaRect(xy.astype(np.float32))
    theta = math.radians(angle)
    # cv2 reports the angle of the side of length w; turn it into the angle of the longer side.
    return theta if w >= h else theta + math.pi / 2
