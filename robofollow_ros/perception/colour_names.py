"""Class names of the registry's spec colours, and the uncalibrated fallback colour model.

A layout names its objects' colours as floats (SAPIEN base colours, linear light); perception needs
the class each belongs to (red, yellow, green, blue) to compare segments with identities. That is a
fact about the spec, not about any camera, so fixed canonical hues decide it here; pixels are only
ever classified by a calibrated (or this module's fallback) ``ColourModel``.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from robofollow_ros.perception.colour_model import ColourMode, ColourModel
from robofollow_ros.perception.colour_space import hue_distance, hue_saturation_value

#: Canonical hues of the class names (linear light), used only to name a spec colour, never for pixels.
CANONICAL_HUES: Final = {"red": 0.0, "yellow": 52.0, "green": 122.0, "blue": 232.0}


def canonical_class(rgb: tuple[float, float, float]) -> str:
    """Class name of a spec colour (linear albedo floats, e.g. ``(0.95, 0.25, 0.25)`` → red)."""
    hue, sat, val = hue_saturation_value(np.asarray(rgb, dtype=np.float64))
    if float(sat) < 0.5 or float(val) <= 0.05:
        raise ValueError(f"color_rgb: {rgb} is not a saturated red/yellow/green/blue")
    name = min(CANONICAL_HUES, key=lambda n: float(hue_distance(float(hue), CANONICAL_HUES[n])))
    if float(hue_distance(float(hue), CANONICAL_HUES[name])) > 35.0:
        raise ValueError(f"color_rgb: {rgb} is not a saturated red/yellow/green/blue")
    return name


def default_model(spec_colours: list[tuple[float, float, float]]) -> ColourModel:
    """The uncalibrated fallback: one mode per spec colour, seen as its albedo under white light."""
    classes: dict[str, list[ColourMode]] = {}
    for rgb in spec_colours:
        name = canonical_class(rgb)
        hue, sat, _ = hue_saturation_value(np.asarray(rgb, dtype=np.float64))
        if any(float(hue_distance(m.hue_deg, float(hue))) < 3.0 for m in classes.get(name, [])):
            continue
        classes.setdefault(name, []).append(ColourMode(float(hue), 4.0, max(0.35, 0.6 * float(sat)),
                                                       (float(rgb[0]), float(rgb[1]), float(rgb[2]))))
    return ColourModel((1.0, 1.0, 1.0), {k: tuple(v) for k, v in classes.items()}, None, "built-in (uncalibrated)")
