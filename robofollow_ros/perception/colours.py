"""Colour classes of the benchmark's objects, decided by hue.

Every RoboFollow object is one of four saturated colours (red, yellow, green, blue) on a grey table
with grey arms, so a hue lookup on saturated pixels separates them; shades within a class (Scene 3's
salmon ``red_bar_2`` vs Scene 1's pure red) are left to the shape and size features of grounding.
"""

from __future__ import annotations

from typing import Final

import cv2
import numpy as np

COLOUR_CLASSES: Final = ("red", "yellow", "green", "blue")
#: OpenCV hue (0..179) ranges of each class, inclusive lower, exclusive upper; red wraps around 0.
_HUE_RANGES: Final = {"red": ((0, 10), (165, 180)), "yellow": ((15, 40),), "green": ((42, 90),),
                      "blue": ((95, 135),)}
#: Pixels below these (0..255) are grey table, grey robot, shadow or background.
MIN_SATURATION: Final = 80
MIN_VALUE: Final = 50


def _hue_lookup() -> np.ndarray:
    lut = np.zeros(256, dtype=np.uint8)
    for index, name in enumerate(COLOUR_CLASSES, start=1):
        for lo, hi in _HUE_RANGES[name]:
            lut[lo:hi] = index
    return lut


HUE_LOOKUP: Final = _hue_lookup()
_HSV_LOW: Final = np.array([0, MIN_SATURATION, MIN_VALUE], dtype=np.uint8)
_HSV_HIGH: Final = np.array([255, 255, 255], dtype=np.uint8)


def class_image(rgb: np.ndarray) -> np.ndarray:
    """(H, W) uint8: 0 for unsaturated pixels, else 1 + index into ``COLOUR_CLASSES``."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb: expected uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")
    hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    classes = cv2.LUT(hsv[..., 0], HUE_LOOKUP)
    saturated = cv2.inRange(hsv, _HSV_LOW, _HSV_HIGH)
    return np.asarray(cv2.bitwise_and(classes, classes, mask=saturated))


def colour_of_rgb(rgb: tuple[float, float, float]) -> str:
    """Colour class of a spec colour given as floats in [0, 1] (e.g. ``(0.95, 0.25, 0.25)`` → red)."""
    pixel = np.clip(np.round(np.asarray(rgb, dtype=np.float64) * 255), 0, 255).astype(np.uint8).reshape(1, 1, 3)
    cls = int(class_image(pixel)[0, 0])
    if cls == 0:
        raise ValueError(f"color_rgb: {rgb} is not a saturated red/yellow/green/blue")
    return COLOUR_CLASSES[cls - 1]
