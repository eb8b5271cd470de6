"""Segment by geometry, name by appearance: objects are what stands above the table plane.

1. The table plane is fitted in depth (``plane.py``); every pixel's height above it is one multiply-add.
2. Heights are smoothed by a normalised 5×5 box (holes ignored) and thresholded at
   max(1 cm, 4 σ of the smoothed noise at that range), and a pixel must itself have depth and be at
   least half that high (the box spreads an object's height onto the table around it, and a hole
   beside a near object shows the table): the table, whatever its colour or texture,
   the bowls' floors and the labels stay below; everything standing up (objects, what sits in bowls or
   on other objects, the arms) is foreground.
3. Foreground pixels get a colour class from the calibrated colour model; a segment is a connected
   run of one class (a green cylinder on a blue cube is two segments; the grey arms are none). A
   saturated colour of no class is its own segment (``other``), reported as unexplained.
4. A segment's 3-D points come only from pixels really above the table (so a colour outline that
   overhangs its depth outline adds no table points) and reach its edges: an object right below the
   camera shows no side face, and only its outline pins it sideways. Its colour is measured on its
   interior (one pixel eroded off every outline, where colour and depth disagree first). A
   one-colour segment whose points leave a vertical gap is two objects (one held above a look-alike).
5. A residual depth/colour misregistration is estimated online from where object colours and the
   depth foreground's outline agree, and depth is moved back (``align.MisregistrationEstimator``).
6. Flat identities (labels) cannot stand out in depth: each is looked for by its colour in the table
   plane around its layout spot and placed by intersecting its pixels' rays with the plane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from robofollow_ros.perception.align import MisregistrationEstimator
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_model import COLOUR_CLASSES, ColourModel
from robofollow_ros.perception.colour_space import fast_median
from robofollow_ros.perception.detector import (
    MIN_PIXELS,
    Detection,
    centroid_uv,
    colour_blobs,
    colour_name,
)
from robofollow_ros.perception.identities import IdentityModel
from robofollow_ros.perception.plane import Plane, TablePlane
from robofollow_ros.perception.silhouette import View

FOREGROUND_MIN_M = 0.010
NOISE_SIGMAS = 4.0
SMOOTH_PX = 5
#: A vertical gap this large inside a one-colour segment separates two objects.
HEIGHT_GAP = 0.02
#: Interior pixels needed to measure a colour; fewer, and the whole segment's pixels are used.
MIN_FIT_POINTS = 12
#: Flat patches: search this far (m) around the layout spot; accept 20 %..250 % of the expected area.
FLAT_SEARCH_M = 0.03
FLAT_AREA = (0.2, 2.5)
#: Flying depth (``GeometrySegmenter._flying``): a pixel on a depth edge whose depth is more than ``FLYING_JUMP_M``
#: from the median of its own colour's neighbours within ``FLYING_PX`` px. Such pixels still belong to their
#: segment but give no points to its fit, unless that would leave fewer than ``FLYING_KEEP_SHARE`` of them.
FLYING_PX = 2
FLYING_JUMP_M = 0.01
FLYING_KEEP_SHARE = 0.5


class GeometrySegmenter:
    """Per-camera state (pixel rays, the plane fitter); ``detect`` runs steps 1–6 on one RGB-D frame."""

    def __init__(self, camera: CameraModel, colour: ColourModel, min_pixels: int = MIN_PIXELS) -> None:
        if min_pixels < 1:
            raise ValueError(f"min_pixels: must be >= 1, got {min_pixels}")
        self.camera, self.colour, self.min_pixels = camera, colour, min_pixels
        self.planes = TablePlane(camera)
        self._rays = camera.pixel_rays().reshape(-1, 3)
        self._rays32 = self._rays.astype(np.float32)
        self._origin = np.asarray(camera.world_position, dtype=np.float64)
        self._table_source: tuple[Plane, np.ndarray] | None = None
        self.misregistration = MisregistrationEstimator()
        #: The last frame's per-pixel facts for silhouette evidence (``silhouette.View``); None without a plane.
        self.view: View | None = None

    def detect(self, rgb: np.ndarray, depth: np.ndarray,
               flat_models: Sequence[IdentityModel] = ()) -> tuple[list[Detection], Plane | None]:
        h, w = self.camera.height, self.camera.width
        flat_depth = np.asarray(self.misregistration.correct(depth), dtype=np.float32).reshape(-1)
        valid = np.isfinite(flat_depth) & (flat_depth > 0)
        clean_depth = np.where(valid, flat_depth, 0.0).astype(np.float32)
        plane = self.planes.fit(clean_depth)
        self.view = None
        if plane is None:
            self._table_source = None
            return [], None
        height = (clean_depth * (self._rays32 @ plane.normal.astype(np.float32))
                  + np.float32(self._origin @ plane.normal - plane.offset))
        height = np.where(valid, height, 0.0).astype(np.float32).reshape(h, w)
        weight = valid.astype(np.float32).reshape(h, w)
        box = (SMOOTH_PX, SMOOTH_PX)
        support = cv2.blur(weight, box)
        smooth = cv2.blur(height, box) / np.maximum(support, 1e-6)
        threshold = np.maximum(FOREGROUND_MIN_M, NOISE_SIGMAS * plane.noise_k / SMOOTH_PX
                               * np.square(clean_depth.reshape(h, w)))
        # A pixel must itself stand up too: the box would spread an object's height onto a ring of table, and
        # a hole (no depth) beside a near object shows the table's colour (a stereo occlusion band).
        foreground = (smooth > threshold) & (support > 0.3) & (height > 0.5 * threshold) & (weight > 0)
        # Colours mixed with the table (motion blur, edges) join the object they touch (``ColourModel.classify``).
        all_classes = self.colour.classify(rgb, grow_within=foreground)
        classes = np.where(foreground, all_classes, 0).astype(np.uint8)
        kernel = np.ones((3, 3), dtype=np.uint8)
        interior = ((cv2.erode(classes, kernel) == cv2.dilate(classes, kernel)) & (classes > 0)).reshape(-1)
        flat_rgb = rgb.reshape(-1, 3)
        flat_height = height.reshape(-1)
        noise_k = plane.noise_k
        detections = []
        blobs = colour_blobs(classes, self.min_pixels)
        self.misregistration.observe(all_classes, foreground,
                                     [(c, px) for c, px in blobs if c <= len(COLOUR_CLASSES)])
        flat_classes = np.asarray(all_classes, dtype=np.uint8).reshape(-1)
        in_blobs = np.concatenate([px for _, px in blobs]) if blobs else np.zeros(0, dtype=np.int64)
        flying = self._flying(clean_depth.reshape(h, w), valid, flat_classes, in_blobs)
        for code, pixels in blobs:
            keep = valid[pixels] & (flat_height[pixels] > 0.5 * FOREGROUND_MIN_M)
            steady = keep & ~flying[pixels]
            if steady.sum() >= max(self.min_pixels, FLYING_KEEP_SHARE * keep.sum()):
                keep = steady
            for part in self._split_by_height(pixels[keep], clean_depth):
                detection = self._solid(code, pixels if len(part) == keep.sum() else part, part, interior,
                                        clean_depth, noise_k)
                if detection is not None:
                    detections.append(detection)
        detections += [d for m in flat_models if (d := self._flat(m, plane, classes, flat_rgb)) is not None]
        self._table_source = (plane, clean_depth)
        self.view = View(w, h, foreground.reshape(-1), valid, np.asarray(all_classes, dtype=np.uint8).reshape(-1))
        return detections, plane

    # -------------------------------------------------------------------------------------- solids
    @staticmethod
    def _flying(depth: np.ndarray, valid: np.ndarray, classes: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Flat mask: which of the ``candidates`` (flat pixel indices) lie on a depth edge (a valid pixel within
        ``FLYING_PX`` more than ``FLYING_JUMP_M`` nearer or farther) at a depth more than ``FLYING_JUMP_M`` from the
        median of their own colour class's valid pixels within ``FLYING_PX``: flying depth, which a stereo window
        or a time-of-flight pixel straddling the edge returns between the two surfaces. An object's own edge, or
        a surface seen beside a nearer one, agrees with its own colour's neighbours."""
        h, w = depth.shape
        out = np.zeros(h * w, dtype=bool)
        if len(candidates) == 0:
            return out
        d = depth.reshape(-1)
        size = 2 * FLYING_PX + 1
        kernel = np.ones((size, size), dtype=np.uint8)
        nearest = cv2.erode(np.where(valid.reshape(h, w), depth, np.float32(1e6)).astype(np.float32), kernel)
        farthest = cv2.dilate(np.where(valid.reshape(h, w), depth, np.float32(0)).astype(np.float32), kernel)
        c = candidates[valid[candidates]]
        rng = np.maximum(d[c] - nearest.reshape(-1)[c], farthest.reshape(-1)[c] - d[c])
        c = c[rng > FLYING_JUMP_M]
        if len(c) == 0:
            return out
        rows, cols = np.divmod(c, w)
        dr, dc = np.mgrid[-FLYING_PX:FLYING_PX + 1, -FLYING_PX:FLYING_PX + 1]
        rr = np.clip(rows[:, None] + dr.reshape(1, -1), 0, h - 1)
        cc = np.clip(cols[:, None] + dc.reshape(1, -1), 0, w - 1)
        idx = rr * w + cc
        same = (classes[idx] == classes[c][:, None]) & valid[idx]  # the pixel itself among them: never empty
        values = np.where(same, d[idx], np.float32(np.inf))
        values.sort(axis=1)  # a sort of 25 per row: numpy's nanmedian (masked arrays) took 5× longer
        k = same.sum(axis=1)
        row = np.arange(len(c))
        median = 0.5 * (values[row, (k - 1) // 2] + values[row, k // 2])
        out[c[np.abs(d[c] - median) > FLYING_JUMP_M]] = True
        return out

    def _points(self, pixels: np.ndarray, depth: np.ndarray) -> np.ndarray:
        return np.asarray(self._origin + depth[pixels, None].astype(np.float64) * self._rays[pixels])

    def _split_by_height(self, pixels: np.ndarray, depth: np.ndarray) -> list[np.ndarray]:
        """Split where the points' heights leave a gap of more than ``HEIGHT_GAP`` with enough on both sides."""
        if len(pixels) < 2 * self.min_pixels:
            return [pixels] if len(pixels) else []
        z = self._origin[2] + depth[pixels] * self._rays[pixels, 2]
        order = np.argsort(z)
        gaps = np.diff(z[order])
        inner = gaps[self.min_pixels - 1:len(gaps) - self.min_pixels + 1]
        if len(inner) == 0 or float(inner.max()) <= HEIGHT_GAP:
            return [pixels]
        cut = int(np.argmax(inner)) + self.min_pixels
        low, high = pixels[order[:cut]], pixels[order[cut:]]
        return [*self._split_by_height(low, depth), *self._split_by_height(high, depth)]

    def _solid(self, code: int, pixels: np.ndarray, with_depth: np.ndarray, interior: np.ndarray,
               depth: np.ndarray, noise_k: float) -> Detection | None:
        if len(with_depth) < max(3, self.min_pixels // 2):
            return None
        used = with_depth
        points = self._points(used, depth)
        detection = Detection(colour_name(code), len(pixels), pixels, centroid_uv(pixels, self.camera.width),
                              kind="solid", points=points)
        z = points[:, 2]
        detection.z_top = float(np.partition(z, int(0.95 * (len(z) - 1)))[int(0.95 * (len(z) - 1))])
        middle = np.asarray(fast_median(points[:, :2], axis=0))
        detection.top_xy = (float(middle[0]), float(middle[1]))
        detection.noise_m = noise_k * float(fast_median(depth[used])) ** 2
        colour_pixels = pixels[interior[pixels]]
        detection.colour_pixels = colour_pixels if len(colour_pixels) >= MIN_FIT_POINTS else pixels
        return detection

    # --------------------------------------------------------------------------------------- flats
    def _flat(self, model: IdentityModel, plane: Plane, classes_fg: np.ndarray, flat_rgb: np.ndarray
              ) -> Detection | None:
        """A label: its colour in the table plane (not foreground) near its layout spot."""
        code = COLOUR_CLASSES.index(model.colour) + 1
        x, y = model.nominal_xy
        half = 0.5 * model.width
        z = plane.height_at_xy(x, y) + 2 * model.top_offset
        corners = np.array([[x + sx * half, y + sy * half, z] for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))])
        uv = self.camera.project(corners)[:, :2]
        expected = abs(cv2.contourArea(uv.astype(np.float32)))
        margin = self.camera.project(np.array([[x, y, z], [x + FLAT_SEARCH_M, y, z]]))[:, 0]
        pad = math.ceil(abs(margin[1] - margin[0]))
        u0, v0 = (np.floor(uv.min(axis=0)).astype(int) - pad).clip(0)
        u1 = min(math.ceil(uv[:, 0].max()) + pad, self.camera.width)
        v1 = min(math.ceil(uv[:, 1].max()) + pad, self.camera.height)
        if u1 <= u0 or v1 <= v0 or expected <= 0:
            return None
        crop_rgb = flat_rgb.reshape(self.camera.height, self.camera.width, 3)[v0:v1, u0:u1]
        mask = ((self.colour.classify(crop_rgb) == code) & (classes_fg[v0:v1, u0:u1] == 0)).astype(np.uint8)
        count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        if count <= 1:
            return None
        best = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
        area = int(stats[best, cv2.CC_STAT_AREA])
        if not FLAT_AREA[0] * expected <= area <= FLAT_AREA[1] * expected:
            return None
        rows, cols = np.nonzero(labels == best)
        pixels = (rows + v0) * self.camera.width + (cols + u0)
        rays = self._rays[pixels]
        lifted_offset = plane.offset + 2 * model.top_offset * plane.normal[2]
        t = (lifted_offset - self._origin @ plane.normal) / (rays @ plane.normal)
        on_plane = self._origin + t[:, None] * rays
        detection = Detection(model.colour, len(pixels), pixels, centroid_uv(pixels, self.camera.width), kind="flat")
        detection.plane_xy = (float(on_plane[:, 0].mean()), float(on_plane[:, 1].mean()))
        (_, _), (_, _), angle = cv2.minAreaRect(on_plane[:, :2].astype(np.float32))
        detection.flat_yaw = math.radians(angle)
        return detection

    # --------------------------------------------------------------------------------------- table
    def table_colour(self, rgb: np.ndarray) -> np.ndarray | None:
        """White-balanced median colour of the last frame's table (sampled plane inliers within 5 mm),
        for drift reporting; computed only when asked."""
        if self._table_source is None:
            return None
        plane, depth = self._table_source
        sample = self.planes.sample
        d = depth[sample]
        ok = d > 0
        heights = self._origin @ plane.normal - plane.offset + d[ok] * (self._rays[sample[ok]] @ plane.normal)
        pixels = sample[ok][np.abs(heights) < 0.005]
        if len(pixels) < 50:
            return None
        return self.colour.balanced_median(rgb.reshape(-1, 3)[pixels])
