"""What the camera should see of an identity at a pose, against what it does see: occlusion-aware evidence.

A pose is a claim about pixels: the identity's primitive placed there projects onto a silhouette in
the head camera (the convex hull of its projected outline points; upright primitives are convex; a bowl's floor lies
below the foreground threshold, so for a bowl only the silhouette's size means something). Each pixel
of that silhouette (one pixel eroded off: outlines are where depth and colour disagree) is then

- **seen**: a pixel of the segment the pose was fitted to;
- **occluded**: something else stands there (foreground that is not this segment) or depth has no
  value there: the object may be behind it, nothing is known;
- **contradicted**: the table is seen there (valid depth, below the foreground threshold): the
  object cannot be there, because it would hide that table.

And the segment's own pixels outside the (slightly dilated) silhouette are **excess**: the segment
is bigger than the identity in that direction. A 4 cm cube named as a 3.6 × 5.6 × 2.6 cm bar leaves
excess (it stands taller) and contradiction (the bar's length shows table); a pose dragged sideways by
flying depth pixels shows table where it claims the object; a half-hidden label's visible share is
what is left of its silhouette. Flat identities (labels) lie in the table plane: their silhouette
pixels are seen when they show the label's colour class, occluded when foreground covers them, and
contradicted otherwise (a pixel of another colour where the label should be).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.shapes import Primitive

#: Outline points per circle of a round primitive.
CIRCLE_POINTS = 16
#: Pixels eroded off the silhouette before counting (outlines are uncertain), and dilated for excess.
CORE_ERODE_PX = 1
EXCESS_DILATE_PX = 2


@dataclass(frozen=True)
class View:
    """One frame's per-pixel facts the evidence needs (flat arrays of H·W)."""

    width: int
    height: int
    foreground: np.ndarray  # bool: stands above the table
    valid: np.ndarray  # bool: has depth
    classes: np.ndarray  # uint8: colour class code of every pixel (foreground or not)


@dataclass(frozen=True)
class Evidence:
    """Counts of the silhouette's core pixels by what the camera sees there, and the segment's excess."""

    expected: int
    seen: int
    occluded: int
    contradicted: int
    excess: int
    segment: int

    @property
    def visible_share(self) -> float:
        """Share of the expected silhouette the segment covers (1: fully seen)."""
        return self.seen / self.expected if self.expected else 0.0

    @property
    def contradicted_share(self) -> float:
        """Share of the expected silhouette where the table (or another colour, for a label) is seen."""
        return self.contradicted / self.expected if self.expected else 0.0

    @property
    def excess_share(self) -> float:
        """Share of the segment's pixels outside the identity's silhouette."""
        return self.excess / self.segment if self.segment else 0.0


def outline_points(prim: Primitive, position: np.ndarray, yaw: float) -> np.ndarray | None:
    """World points whose projections' convex hull is the primitive's silhouette (None: no outline known)."""
    p = np.asarray(position, dtype=np.float64)
    angles = np.linspace(0.0, 2 * math.pi, CIRCLE_POINTS, endpoint=False)
    ring = np.column_stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)])
    if prim.shape == "box":
        hx, hy, hz = prim.dims
        c, s = math.cos(yaw), math.sin(yaw)
        local = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return np.asarray(p + local @ rot.T)
    if prim.shape == "cylinder":
        r, h = prim.dims
        up = np.array([0.0, 0.0, h])
        return np.vstack([p + r * ring + up, p + r * ring - up])
    if prim.shape == "sphere":
        r = prim.dims[0]
        tilt = [p + r * np.column_stack([np.cos(angles) * math.cos(e), np.sin(angles) * math.cos(e),
                                         np.full_like(angles, math.sin(e))])
                for e in (-math.pi / 3, -math.pi / 6, 0.0, math.pi / 6, math.pi / 3)]
        up = np.array([0.0, 0.0, r])
        return np.vstack([*tilt, p + up, p - up])
    if prim.shape == "bowl":  # its floor lies below the foreground threshold: only its size is meaningful
        r_out, _, z_bottom, z_rim = prim.dims
        return np.vstack([p + r_out * ring + np.array([0.0, 0.0, z_rim]),
                          p + 0.6 * r_out * ring + np.array([0.0, 0.0, z_bottom])])
    return None


def silhouette(camera: CameraModel, points: np.ndarray) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """(u0, v0, u1, v1) and the filled hull mask of the points' projection, clipped to the picture."""
    uvz = camera.project(points)
    if np.any(uvz[:, 2] <= 0):
        return None
    uv = uvz[:, :2] - 0.5  # pixel centres at +0.5 → integer pixel coordinates
    u0, v0 = np.floor(uv.min(axis=0)).astype(int) - 1
    u1, v1 = np.ceil(uv.max(axis=0)).astype(int) + 2
    u0, v0 = max(int(u0), 0), max(int(v0), 0)
    u1, v1 = min(int(u1), camera.width), min(int(v1), camera.height)
    if u1 <= u0 or v1 <= v0:
        return None
    hull = cv2.convexHull(np.round((uv - [u0, v0]) * 4).astype(np.int32))
    mask = np.zeros((v1 - v0, u1 - u0), dtype=np.uint8)
    cv2.fillConvexPoly(mask, hull, (1,), lineType=cv2.LINE_8, shift=2)
    return (u0, v0, u1, v1), mask


def evidence(camera: CameraModel, view: View, prim: Primitive, position: np.ndarray, yaw: float,
             segment_pixels: np.ndarray | None, flat_code: int = 0) -> Evidence | None:
    """The silhouette evidence for ``prim`` at (``position``, ``yaw``); ``segment_pixels``: flat indices of
    the segment the pose came from (None: a kept pose, nothing of it is claimed seen). ``flat_code``: a
    label's colour class code (its seen pixels are those of its colour in the table plane)."""
    outline = outline_points(prim, position, yaw)
    if outline is None:
        return None
    found = silhouette(camera, outline)
    if found is None:
        return None
    (u0, v0, u1, v1), mask = found
    kernel = np.ones((2 * CORE_ERODE_PX + 1,) * 2, dtype=np.uint8)
    core = cv2.erode(mask, kernel).astype(bool) if min(mask.shape) > 2 * CORE_ERODE_PX + 2 else mask.astype(bool)
    w = view.width
    region = (slice(v0, v1), slice(u0, u1))
    fg = view.foreground.reshape(view.height, w)[region]
    valid = view.valid.reshape(view.height, w)[region]
    own = np.zeros(mask.shape, dtype=bool)
    excess = 0
    count = 0
    if segment_pixels is not None and len(segment_pixels):
        rows, cols = np.divmod(np.asarray(segment_pixels), w)
        inside = (rows >= v0) & (rows < v1) & (cols >= u0) & (cols < u1)
        own[rows[inside] - v0, cols[inside] - u0] = True
        grown = cv2.dilate(mask, np.ones((2 * EXCESS_DILATE_PX + 1,) * 2, dtype=np.uint8)).astype(bool)
        excess = int((~inside).sum() + (own & ~grown).sum())
        count = len(segment_pixels)
    if flat_code:
        own |= (view.classes.reshape(view.height, w)[region] == flat_code) & ~fg
        contradicted = core & ~own & ~fg
    else:
        contradicted = core & ~own & ~fg & valid
    seen = core & own
    occluded = core & ~own & ~contradicted
    return Evidence(int(core.sum()), int(seen.sum()), int(occluded.sum()), int(contradicted.sum()), excess, count)


def blob_iou(found: tuple[tuple[int, int, int, int], np.ndarray], pixels: np.ndarray, width: int) -> float:
    """Intersection over union of a silhouette (``silhouette``'s answer) and a segment's flat pixel indices."""
    (u0, v0, u1, v1), mask = found
    rows, cols = np.divmod(np.asarray(pixels), width)
    inside = (rows >= v0) & (rows < v1) & (cols >= u0) & (cols < u1)
    hits = int(mask[rows[inside] - v0, cols[inside] - u0].sum())
    union = int(mask.sum()) + len(pixels) - hits
    return hits / union if union else 0.0
