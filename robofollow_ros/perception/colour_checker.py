"""Colour model from a picture of a ColorChecker Classic (24 patches, 4 rows × 6 columns).

The chart's patches have published colours, so they give what the layout capture gives only
indirectly: the white balance from the six grey patches (19–24), and a 3×3 colour matrix from all of
them that predicts how this camera renders any reflectance, hence each class mode of the benchmark's
objects from their spec colours. The chart's four outer patch corners are given in pixels (clicked
or detected elsewhere), patch 1 (dark skin) top-left, in the order top-left, top-right, bottom-right,
bottom-left; a homography places every patch centre.

Reference values: the chart's sRGB (D65) patch colours as published by X-Rite/BabelColor (the
values in Wikipedia's "ColorChecker" article), converted to linear light.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from robofollow_ros.perception.colour_model import ColourMode, ColourModel
from robofollow_ros.perception.colour_names import canonical_class
from robofollow_ros.perception.colour_space import (
    hue_distance,
    hue_saturation_value,
    linear_of_bytes,
    srgb_to_linear_float,
)

CHECKER_SRGB: tuple[tuple[int, int, int], ...] = (
    (115, 82, 68), (194, 150, 130), (98, 122, 157), (87, 108, 67), (133, 128, 177), (103, 189, 170),
    (214, 126, 44), (80, 91, 166), (193, 90, 99), (94, 60, 108), (157, 188, 64), (224, 163, 46),
    (56, 61, 150), (70, 148, 73), (175, 54, 60), (231, 199, 31), (187, 86, 149), (8, 133, 161),
    (243, 243, 242), (200, 200, 200), (160, 160, 160), (122, 122, 121), (85, 85, 85), (52, 52, 52),
)
COLUMNS, ROWS = 6, 4
NEUTRAL = tuple(range(18, 24))
#: Share of a patch's side sampled around its centre.
SAMPLE_SHARE = 0.4
PREDICTED_SPREAD_DEG = 4.0


def checker_picture(pixels_per_patch: int = 60, gap: int = 8) -> np.ndarray:
    """uint8 sRGB picture of the chart (black surround, ``gap`` px between patches), for simulation."""
    side = pixels_per_patch + gap
    picture = np.zeros((ROWS * side + gap, COLUMNS * side + gap, 3), dtype=np.uint8)
    picture[:] = (20, 20, 20)
    for index, colour in enumerate(CHECKER_SRGB):
        r, c = divmod(index, COLUMNS)
        top, left = gap + r * side, gap + c * side
        picture[top:top + pixels_per_patch, left:left + pixels_per_patch] = colour
    return picture


def reference_linear() -> np.ndarray:
    return np.asarray(srgb_to_linear_float(np.asarray(CHECKER_SRGB, dtype=np.float64) / 255.0))


def patch_colours(rgb: np.ndarray, corners_uv: Sequence[Sequence[float]]) -> np.ndarray:
    """(24, 3) median linear colour of each patch's central area."""
    corners = np.asarray(corners_uv, dtype=np.float64).reshape(4, 2)
    chart = np.array([[0, 0], [COLUMNS, 0], [COLUMNS, ROWS], [0, ROWS]], dtype=np.float64)
    homography, _ = cv2.findHomography(chart, corners)
    if homography is None:
        raise ValueError(f"checker corners: no homography from {corners.tolist()}")
    offsets = np.linspace(-SAMPLE_SHARE / 2, SAMPLE_SHARE / 2, 7)
    du, dv = np.meshgrid(offsets, offsets)
    out = np.zeros((len(CHECKER_SRGB), 3))
    h, w = rgb.shape[:2]
    for index in range(len(CHECKER_SRGB)):
        r, c = divmod(index, COLUMNS)
        grid = np.column_stack([c + 0.5 + du.ravel(), r + 0.5 + dv.ravel()])
        uv = cv2.perspectiveTransform(grid[None].astype(np.float64), homography)[0]
        cols = np.clip(np.floor(uv[:, 0]).astype(int), 0, w - 1)
        rows = np.clip(np.floor(uv[:, 1]).astype(int), 0, h - 1)
        out[index] = np.median(linear_of_bytes(rgb[rows, cols]), axis=0)
    return out


def checker_white_balance(observed: np.ndarray) -> tuple[float, float, float]:
    """Gains (G = 1) that make the grey patches grey: per channel, median of reference / observed."""
    ref = reference_linear()[list(NEUTRAL)]
    obs = observed[list(NEUTRAL)]
    usable = np.all((obs > 0.01) & (obs < 0.97), axis=1)
    if usable.sum() < 2:
        raise ValueError("checker: fewer than two grey patches are neither black nor clipped; fix the exposure")
    ratio = np.median(ref[usable] / obs[usable], axis=0)
    ratio /= ratio[1]
    return float(ratio[0]), float(ratio[1]), float(ratio[2])


def colour_matrix(balanced: np.ndarray) -> np.ndarray:
    """3×3 A with balanced ≈ A · reference (least squares over the unclipped patches)."""
    ref = reference_linear()
    usable = np.all((balanced > 0.002) & (balanced < 0.97), axis=1)
    solution, *_ = np.linalg.lstsq(ref[usable], balanced[usable], rcond=None)
    return np.asarray(solution.T)


def model_from_checker(rgb: np.ndarray, corners_uv: Sequence[Sequence[float]],
                       spec_colours: Sequence[tuple[float, float, float]], source: str) -> ColourModel:
    """White balance from the greys; one predicted mode per distinct spec colour (A · albedo)."""
    observed = patch_colours(rgb, corners_uv)
    wb = checker_white_balance(observed)
    matrix = colour_matrix(observed * np.asarray(wb))
    classes: dict[str, list[ColourMode]] = {}
    for albedo in spec_colours:
        predicted = np.clip(matrix @ np.asarray(albedo, dtype=np.float64), 1e-4, 1.0)
        hue, sat, _ = hue_saturation_value(predicted)
        name = canonical_class(albedo)
        if any(float(hue_distance(m.hue_deg, float(hue))) < 3.0 for m in classes.get(name, [])):
            continue
        classes.setdefault(name, []).append(ColourMode(float(hue), PREDICTED_SPREAD_DEG, max(0.3, 0.6 * float(sat)),
                                                       (float(predicted[0]), float(predicted[1]), float(predicted[2]))))
    return ColourModel(wb, {k: tuple(v) for k, v in classes.items()}, None, source)
