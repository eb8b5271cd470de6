"""sRGB ↔ linear light, hue and saturation: the colour arithmetic perception and the perturbations share.

Cameras apply white-balance gains and exposure to linear sensor values before the sRGB transfer
curve, so both the perturbations that imitate them and the colour model that must survive them work
in linear light (IEC 61966-2-1 sRGB curve). Hue is the usual hexcone hue of the linear values, in
degrees: a white-balance gain moves it only a little for the benchmark's strongly saturated objects,
and exposure does not move it at all.
"""

from __future__ import annotations

from typing import Final

import numpy as np


def srgb_to_linear_float(values: np.ndarray) -> np.ndarray:
    """sRGB-encoded values in [0, 1] → linear light in [0, 1] (IEC 61966-2-1)."""
    v = np.asarray(values, dtype=np.float64)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def linear_to_srgb_float(values: np.ndarray) -> np.ndarray:
    """Linear light in [0, 1] → sRGB-encoded values in [0, 1]."""
    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055)


#: Linear value of every 8-bit sRGB code: one table lookup instead of a power per pixel.
SRGB_TO_LINEAR: Final = srgb_to_linear_float(np.arange(256) / 255.0).astype(np.float32)


def linear_of_bytes(rgb: np.ndarray) -> np.ndarray:
    """uint8 sRGB (…, 3) → float32 linear (…, 3)."""
    return np.asarray(SRGB_TO_LINEAR[np.asarray(rgb, dtype=np.uint8)])


def bytes_of_linear(linear: np.ndarray) -> np.ndarray:
    """float linear (…, 3), clipped to [0, 1] → uint8 sRGB (…, 3), rounded to nearest."""
    return np.clip(np.round(linear_to_srgb_float(linear) * 255.0), 0, 255).astype(np.uint8)


def hue_saturation_value(linear: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hexcone hue (degrees, [0, 360)), saturation (1 − min/max) and value (max) of linear RGB (…, 3)."""
    rgb = np.asarray(linear, dtype=np.float64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    high = rgb.max(axis=-1)
    low = rgb.min(axis=-1)
    span = high - low
    safe = np.where(span > 0, span, 1.0)
    hue = np.where(high == r, ((g - b) / safe) % 6.0, np.where(high == g, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    hue = np.where(span > 0, hue * 60.0, 0.0) % 360.0
    saturation = np.where(high > 0, span / np.where(high > 0, high, 1.0), 0.0)
    return hue, saturation, high


def hue_distance(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """Unsigned angular distance between hues in degrees, in [0, 180]."""
    d = np.abs((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) % 360.0)
    return np.minimum(d, 360.0 - d)


def circular_mean_deg(hues: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean direction of hues (degrees), e.g. red pixels on both sides of 0°."""
    angles = np.radians(np.asarray(hues, dtype=np.float64))
    w = np.ones_like(angles) if weights is None else np.asarray(weights, dtype=np.float64)
    return float(np.degrees(np.arctan2((w * np.sin(angles)).sum(), (w * np.cos(angles)).sum())) % 360.0)


def fast_median(values: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Median by partial sort (upper median for even counts): ``np.median`` costs several times more on
    the small arrays perception takes one of per segment and per frame."""
    a = np.asarray(values)
    if axis is None:
        a = a.reshape(-1)
        k = len(a) // 2
        return float(np.partition(a, k)[k])
    k = a.shape[axis] // 2
    return np.asarray(np.take(np.partition(a, k, axis=axis), k, axis=axis))
