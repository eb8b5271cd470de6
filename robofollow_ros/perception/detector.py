"""Detections: what the segmenters hand to grounding, and the RGB-only (table-plane) detector.

With depth, ``segmenter.GeometrySegmenter`` finds objects as what stands above the table plane and
splits them by colour; a detection then carries its 3-D points, the primitive fits grounding makes,
and its colour. Without depth only colour is left: ``ColourBlobDetector`` takes connected blobs of
object colours (the calibrated table colour excluded) and puts each blob's centre on a plane just
above the table (``estimate.py`` refines it with the grounded identity's height). That mode cannot
tell a table of an object's colour from an object; depth can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_model import COLOUR_CLASSES, OTHER, ColourModel
from robofollow_ros.perception.colour_space import hue_saturation_value

#: Blobs smaller than this (pixels) are noise, or an object almost hidden by the gripper.
MIN_PIXELS = 25
#: Without depth, blob centres are first put on this plane above the table (a typical object's middle).
PLANE_GUESS_HEIGHT = 0.02
OTHER_COLOUR = "other"


def colour_name(code: int) -> str:
    return OTHER_COLOUR if code == OTHER else COLOUR_CLASSES[code - 1]


@dataclass
class Detection:
    """One segment. ``kind``: ``solid`` (stands above the table, has points), ``flat`` (a patch in the
    table plane) or ``blob`` (RGB only)."""

    colour: str
    pixel_count: int
    pixels: np.ndarray = field(repr=False)  # flat pixel indices (row * width + col)
    centroid_uv: tuple[float, float]
    kind: str = "blob"
    points: np.ndarray | None = field(default=None, repr=False)  # world points used for fits (N, 3)
    z_top: float | None = None  # robust top height (95th percentile of the points' z)
    top_xy: tuple[float, float] | None = None  # median xy of the points (the segment's rough place)
    plane_xy: tuple[float, float] | None = None  # flat patches and RGB-only blobs: centre on a plane
    flat_yaw: float | None = None  # a flat patch's orientation (rad), from its outline on the plane
    noise_m: float = 0.0  # depth noise (1 σ, m) at the segment's range, from the table plane's spread
    #: Pixels to measure the colour on (the interior): measured only when colour drift is (``measure_colour``).
    colour_pixels: np.ndarray | None = field(default=None, repr=False)
    hue_deg: float | None = None
    linear_colour: np.ndarray | None = field(default=None, repr=False)  # white-balanced median, linear light
    fits: dict[Any, Any] = field(default_factory=dict, repr=False)  # primitive key → primitives.Fit (shape)
    refined: dict[Any, Any] = field(default_factory=dict, repr=False)  # primitive key → the final pose fit
    #: Identity name → why grounding refused to give this segment that name (``doubt.refuses_name``).
    refused: dict[str, str] = field(default_factory=dict, repr=False)
    #: Identity name → why that name, if given, cannot be confirmed (``doubt.unconfirmed_height``).
    doubted: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def has_depth(self) -> bool:
        return self.kind == "solid"

    @property
    def point_count(self) -> int:
        return 0 if self.points is None else len(self.points)

    def raw_position(self) -> np.ndarray | None:
        """Best guess before grounding: the points' median xy at the top height (flat: the patch centre)."""
        if self.top_xy is not None and self.z_top is not None:
            return np.array([self.top_xy[0], self.top_xy[1], self.z_top])
        return None

    def xy(self) -> np.ndarray:
        if self.top_xy is not None:
            return np.asarray(self.top_xy)
        if self.plane_xy is not None:
            return np.asarray(self.plane_xy)
        raise ValueError("detection: has neither points nor a plane position")


def measure_colour(detection: Detection, rgb: np.ndarray, model: ColourModel) -> None:
    """White-balanced median colour of the detection's ``colour_pixels`` and its hue (for drift reporting)."""
    if detection.linear_colour is not None:
        return
    pixels = detection.pixels if detection.colour_pixels is None else detection.colour_pixels
    if len(pixels) == 0:
        return
    colour = model.balanced_median(rgb.reshape(-1, 3)[pixels])
    detection.linear_colour = colour
    hue, _, _ = hue_saturation_value(np.clip(colour, 0.0, 1.0))
    detection.hue_deg = float(hue)


def colour_blobs(classes: np.ndarray, min_pixels: int) -> list[tuple[int, np.ndarray]]:
    """(class code, flat pixel indices) of every single-class connected blob of at least ``min_pixels``.

    One labelling pass over all coloured pixels, then a second pass only inside the few blobs where
    two classes touch (a cylinder standing on a cube): a quarter of the work of labelling each class
    over the whole picture.
    """
    width = classes.shape[1]
    count, labels, stats, _ = cv2.connectedComponentsWithStats((classes > 0).view(np.uint8), connectivity=8)
    out = []
    for label in range(1, count):
        if stats[label, cv2.CC_STAT_AREA] < min_pixels:
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
                if len(rows) >= min_pixels:
                    out.append((int(cls), (rows + y0) * width + (cols + x0)))
    return out


def centroid_uv(pixels: np.ndarray, width: int) -> tuple[float, float]:
    rows, cols = np.divmod(pixels, width)
    return float(cols.mean()) + 0.5, float(rows.mean()) + 0.5


class ColourBlobDetector:
    """RGB only: coloured blobs (calibrated table colour excluded), centres on a plane above the table."""

    def __init__(self, camera: CameraModel, colour: ColourModel, min_pixels: int = MIN_PIXELS) -> None:
        if min_pixels < 1:
            raise ValueError(f"min_pixels: must be >= 1, got {min_pixels}")
        self.camera, self.colour, self.min_pixels = camera, colour, min_pixels

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        classes = self.colour.classify_without_table(rgb)
        detections = []
        for code, pixels in colour_blobs(classes, self.min_pixels):
            detection = Detection(colour_name(code), len(pixels), pixels, centroid_uv(pixels, self.camera.width))
            hit = self.camera.ray_plane(*detection.centroid_uv, TABLE_TOP_Z + PLANE_GUESS_HEIGHT)
            if hit is None:
                continue
            detection.plane_xy = (float(hit[0]), float(hit[1]))
            detections.append(detection)
        return detections
