"""Learning the colour model (``robofollow calibrate colour``) from a capture of a known layout.

The layout says where every object stands and what colour class it is; the camera model says where
that is in the picture. For each object the pixels around its projected centre are collected (with
depth: only those standing above the table plane; always: only saturated pixels within a loose hue
window of the class, which drops the table, the arms and a jittered neighbour), then:

1. White balance: the gains that make the objects' median colours proportional to their known
   albedos (the registry's colours, linear), one free brightness per object (its shading), solved in
   log space and weighted per channel by how much of it the albedo has (``colour_drift.relative_gains``).
2. Modes: after white balance, each object gives a hue (circular mean), a spread (1.4826 × median
   absolute deviation), the lowest saturation its pixels show (2nd percentile, with a margin) and its
   mean colour; objects of one class within ``MERGE_DEG`` of hue and ``MERGE_SATURATION`` of
   saturation merge into one mode.
3. The table: median colour of pixels on the table plane (with depth) or of the unsaturated pixels
   between the objects (without), after white balance.

``colour_checker.py`` offers the other route: a ColorChecker picture gives the white balance from its
grey patches and predicts every class's mode through a fitted 3×3 colour matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_drift import relative_gains
from robofollow_ros.perception.colour_model import ColourMode, ColourModel, TableColour
from robofollow_ros.perception.colour_names import CANONICAL_HUES
from robofollow_ros.perception.colour_space import (
    circular_mean_deg,
    hue_distance,
    hue_saturation_value,
    linear_of_bytes,
)
from robofollow_ros.perception.identities import IdentityModel, identity_models
from robofollow_ros.perception.plane import Plane, TablePlane

#: Pixel filter before learning: saturated (linear) and within this hue window of the class name.
SAMPLE_SATURATION = 0.3
SAMPLE_HUE_WINDOW = 40.0
#: Extra radius (px) around an object's projected outline: the layout's ±1 cm jitter at 0.8 m.
JITTER_PX = 5
#: Objects of one class merge into one mode when this close in hue and in saturation (a salmon slab
#: and a pure red cube share a hue but not a colour: drift needs each one's own reference).
MERGE_DEG = 6.0
MERGE_SATURATION = 0.08
MIN_OBJECT_PIXELS = 20
FOREGROUND_M = 0.01


class ColourCalibrationError(ValueError):
    """The capture cannot give a colour model (too few object pixels, no plane, mismatched sizes)."""


@dataclass
class ObjectSamples:
    name: str
    colour: str
    albedo: np.ndarray
    linear: np.ndarray  # (N, 3) raw linear pixels, before white balance


def _object_disks(layout_models: Sequence[IdentityModel], camera: CameraModel, plane: Plane | None
                  ) -> dict[str, np.ndarray]:
    """Per identity: flat pixel indices of a disk (flat objects: a square) covering where it should be."""
    from robofollow_ros.contract import TABLE_TOP_Z

    v, u = np.mgrid[0:camera.height, 0:camera.width]
    u, v = u.reshape(-1) + 0.5, v.reshape(-1) + 0.5
    disks = {}
    for m in layout_models:
        x, y = m.nominal_xy
        table = TABLE_TOP_Z if plane is None else plane.height_at_xy(x, y)
        centre = np.array([x, y, table + m.resting_top_height - m.top_offset])
        cu, cv, depth = camera.project(centre[None])[0]
        if depth <= 0:
            continue
        if m.flat:
            half = 0.3 * m.width * camera.k[0, 0] / depth
            inside = (np.abs(u - cu) < half) & (np.abs(v - cv) < half)
        else:
            radius = 0.5 * m.width * camera.k[0, 0] / depth + JITTER_PX
            inside = np.hypot(u - cu, v - cv) < radius
        disks[m.name] = np.nonzero(inside)[0]
    return disks


def collect_samples(frames: Sequence[tuple[np.ndarray, np.ndarray | None]], layout: Layout, camera: CameraModel
                    ) -> tuple[list[ObjectSamples], np.ndarray]:
    """Object pixels (per identity) and table pixels (linear, raw) from frames of the layout as laid out."""
    models = identity_models(layout)
    specs = {o.name: o for o in layout.objects}
    per_object: dict[str, list[np.ndarray]] = {m.name: [] for m in models}
    table: list[np.ndarray] = []
    fitter = TablePlane(camera)
    rays = camera.pixel_rays().reshape(-1, 3)
    origin = np.asarray(camera.world_position)
    for rgb, depth in frames:
        if rgb.shape[:2] != (camera.height, camera.width):
            raise ColourCalibrationError(f"picture size {rgb.shape[1]}x{rgb.shape[0]} does not match the camera "
                                         f"calibration ({camera.width}x{camera.height})")
        flat_rgb = rgb.reshape(-1, 3)
        linear = linear_of_bytes(flat_rgb).astype(np.float64)
        hue, sat, _ = hue_saturation_value(linear)
        plane, height = None, None
        if depth is not None:
            d = np.where(np.isfinite(depth) & (depth > 0), depth, 0.0).reshape(-1).astype(np.float32)
            plane = fitter.fit(d)
            if plane is None:
                raise ColourCalibrationError("depth: no table plane found in a capture frame")
            height = np.where(d > 0, (origin + d[:, None] * rays) @ plane.normal - plane.offset, np.nan)
        disks = _object_disks(models, camera, plane)
        owners = np.zeros(len(flat_rgb), dtype=np.int32)
        for disk in disks.values():
            owners[disk] += 1
        for m in models:
            if m.name not in disks:
                continue
            pixels = disks[m.name]
            keep = (owners[pixels] == 1) & (sat[pixels] >= SAMPLE_SATURATION) & \
                   (hue_distance(hue[pixels], CANONICAL_HUES[m.colour]) <= SAMPLE_HUE_WINDOW)
            if height is not None and not m.flat:
                keep &= height[pixels] > FOREGROUND_M
            per_object[m.name].append(linear[pixels[keep]])
        not_object = owners == 0
        if height is not None:
            on_table = not_object & (np.abs(np.nan_to_num(height, nan=1.0)) < 0.005)
        else:
            on_table = not_object & (sat < SAMPLE_SATURATION + 0.3)
        table.append(linear[on_table])
    samples = []
    for m in models:
        pixels = np.concatenate(per_object[m.name]) if per_object[m.name] else np.zeros((0, 3))
        if len(pixels) >= MIN_OBJECT_PIXELS:
            samples.append(ObjectSamples(m.name, m.colour, np.asarray(specs[m.name].color_rgb, dtype=np.float64),
                                         pixels))
    return samples, np.concatenate(table) if table else np.zeros((0, 3))


def white_balance_from_objects(samples: Sequence[ObjectSamples]) -> tuple[float, float, float]:
    """Gains that turn the observed medians into multiples of the known albedos (G = 1)."""
    solved = relative_gains([np.median(s.linear, axis=0) for s in samples], [s.albedo for s in samples])
    if solved is None:
        return 1.0, 1.0, 1.0
    gains, _ = solved
    correction = 1.0 / gains
    return float(correction[0]), float(correction[1]), float(correction[2])


def modes_from_samples(samples: Sequence[ObjectSamples], white_balance: tuple[float, float, float]
                       ) -> dict[str, tuple[ColourMode, ...]]:
    """One mode per object after white balance; objects of one class within MERGE_DEG merge."""
    wb = np.asarray(white_balance)
    found: dict[str, list[tuple[ColourMode, int]]] = {}
    for s in samples:
        balanced = np.clip(s.linear * wb, 0.0, 1.0)
        hue, sat, val = hue_saturation_value(balanced)
        centre = circular_mean_deg(hue, val)
        spread = 1.4826 * float(np.median(hue_distance(hue, centre)))
        sat_min = max(0.3, 0.75 * float(np.percentile(sat, 2)))
        mean = balanced.mean(axis=0)
        mode = ColourMode(centre, spread, sat_min, (float(mean[0]), float(mean[1]), float(mean[2])))
        found.setdefault(s.colour, []).append((mode, len(balanced)))
    classes: dict[str, tuple[ColourMode, ...]] = {}
    for colour, modes in found.items():
        merged: list[tuple[ColourMode, int]] = []
        for mode, count in sorted(modes, key=lambda mc: mc[0].hue_deg):
            close = next((i for i, (m, _) in enumerate(merged)
                          if float(hue_distance(m.hue_deg, mode.hue_deg)) < MERGE_DEG
                          and abs(_saturation(m) - _saturation(mode)) < MERGE_SATURATION), None)
            if close is None:
                merged.append((mode, count))
                continue
            other, n = merged[close]
            total = n + count
            hue_mid = circular_mean_deg(np.array([other.hue_deg, mode.hue_deg]), np.array([n, count]))
            mean = (np.asarray(other.mean_linear) * n + np.asarray(mode.mean_linear) * count) / total
            merged[close] = (ColourMode(hue_mid, max(other.hue_spread_deg, mode.hue_spread_deg,
                                                     float(hue_distance(other.hue_deg, mode.hue_deg)) / 2),
                                        min(other.saturation_min, mode.saturation_min),
                                        (float(mean[0]), float(mean[1]), float(mean[2]))), total)
        classes[colour] = tuple(m for m, _ in merged)
    return classes


def _saturation(mode: ColourMode) -> float:
    _, sat, _ = hue_saturation_value(np.asarray(mode.mean_linear))
    return float(sat)


def learn_from_layouts(captures: Sequence[tuple[Layout, Sequence[tuple[np.ndarray, np.ndarray | None]]]],
                       camera: CameraModel, source: str) -> tuple[ColourModel, dict[str, int]]:
    """The colour model from captures of one or more known layouts; also the pixel count per object."""
    samples: list[ObjectSamples] = []
    tables = []
    for layout, frames in captures:
        found, table = collect_samples(frames, layout, camera)
        samples += found
        tables.append(table)
    if not samples:
        raise ColourCalibrationError("no object pixels found where the layout puts its objects: check --layout, "
                                     "--calibration and that the capture shows the layout as laid out")
    wb = white_balance_from_objects(samples)
    classes = modes_from_samples(samples, wb)
    table_pixels = np.concatenate(tables)
    table_colour = None
    if len(table_pixels) >= 50:
        median = np.median(table_pixels * np.asarray(wb), axis=0)
        table_colour = TableColour((float(median[0]), float(median[1]), float(median[2])))
    counts = {s.name: len(s.linear) for s in samples}
    return ColourModel(wb, classes, table_colour, source), counts

