"""Colour drift: how far the scene's colours have moved from the calibration, and whether that matters.

Perception keeps working through moderate white-balance and exposure changes (it decides by hue),
but a camera whose auto white balance wandered, a changed lamp or a different table should be
noticed before it fails. Every frame the named segments' white-balanced median colours are compared
with the calibrated mode they belong to:

- per class, the hue shift (degrees);
- the relative white-balance gains (G = 1): per channel, the log ratio of observed to calibrated
  colour, with one free brightness per segment (its shading), solved by alternating least squares
  weighted by how much of that channel the class has (a red object says nothing about blue);
- the exposure: the segments' mean brightness ratio;
- the table: the distance of its chromaticity (r, g of r + g + b = 1) from the calibrated table's.

Values are smoothed over frames (exponential, weight ``SMOOTHING``). ``drifted`` is set when a hue
shift, a gain, the exposure or the table distance passes the model's ``DriftLimits``; ``reasons``
say which. Perception keeps working through all of these at the suite's levels; drift is a
warning that the calibration no longer describes the scene.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.perception.colour_model import ColourModel
from robofollow_ros.perception.detector import Detection

SMOOTHING = 0.2
#: A channel carries information about white balance when the class has at least this much of it (linear).
CHANNEL_MIN = 0.04
CLIPPED = 0.98


@dataclass
class ColourDrift:
    """Drift of this frame (smoothed); ``None`` fields were not measurable yet."""

    hue_shift_deg: dict[str, float] = field(default_factory=dict)
    gains: tuple[float, float, float] | None = None
    exposure: float | None = None
    table_shift: float | None = None
    drifted: bool = False
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "drifted": self.drifted,
            "reasons": list(self.reasons),
            "hue_shift_deg": {k: round(v, 2) for k, v in self.hue_shift_deg.items()},
            "gains": None if self.gains is None else [round(g, 3) for g in self.gains],
            "exposure": None if self.exposure is None else round(self.exposure, 3),
            "table_shift": None if self.table_shift is None else round(self.table_shift, 4),
        }


def _chromaticity(linear: np.ndarray) -> np.ndarray:
    total = float(np.sum(linear))
    return np.asarray(linear[:2] / total) if total > 1e-6 else np.zeros(2)


def relative_gains(observed: list[np.ndarray], reference: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(gains with G = 1, per-segment brightness) explaining observed ≈ brightness · gains · reference."""
    if not observed:
        return None
    obs, ref = np.asarray(observed), np.asarray(reference)
    weight = np.where((ref > CHANNEL_MIN) & (obs > 1e-4) & (obs < CLIPPED), ref, 0.0)
    if weight.sum() == 0:
        return None
    log_ratio = np.log(np.maximum(obs, 1e-6)) - np.log(np.maximum(ref, 1e-6))
    log_gain = np.zeros(3)
    log_scale = np.zeros(len(obs))
    for _ in range(8):
        w_rows = weight.sum(axis=1)
        log_scale = np.where(w_rows > 0, (weight * (log_ratio - log_gain)).sum(axis=1) / np.maximum(w_rows, 1e-12), 0)
        w_cols = weight.sum(axis=0)
        log_gain = np.where(w_cols > 0, (weight * (log_ratio - log_scale[:, None])).sum(axis=0)
                            / np.maximum(w_cols, 1e-12), 0.0)
        log_gain -= log_gain[1] if w_cols[1] > 0 else 0.0
    return np.exp(log_gain), np.exp(log_scale)


class DriftMonitor:
    """Smoothed colour drift against one colour model."""

    def __init__(self, model: ColourModel) -> None:
        self.model = model
        self.state = ColourDrift()

    def reset(self) -> None:
        self.state = ColourDrift()

    def update(self, named: list[Detection], table_linear: np.ndarray | None) -> ColourDrift:
        observed, reference = [], []
        shifts: dict[str, list[float]] = {}
        for detection in named:
            if detection.hue_deg is None or detection.linear_colour is None:
                continue
            mode = self.model.nearest_mode(detection.colour, detection.linear_colour)
            if mode is None:
                continue
            shift = (detection.hue_deg - mode.hue_deg + 180.0) % 360.0 - 180.0
            shifts.setdefault(detection.colour, []).append(shift)
            observed.append(np.asarray(detection.linear_colour))
            reference.append(np.asarray(mode.mean_linear))
        s = self.state
        for colour, values in shifts.items():
            s.hue_shift_deg[colour] = _blend(s.hue_shift_deg.get(colour), float(np.median(values)))
        solved = relative_gains(observed, reference)
        if solved is not None:
            gains, scales = solved
            previous = np.asarray(s.gains) if s.gains is not None else None
            blended = gains if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * gains
            s.gains = (float(blended[0]), float(blended[1]), float(blended[2]))
            s.exposure = _blend(s.exposure, float(np.exp(np.mean(np.log(scales)))))
        if table_linear is not None and self.model.table is not None:
            distance = float(np.linalg.norm(_chromaticity(np.asarray(table_linear))
                                            - _chromaticity(np.asarray(self.model.table.mean_linear))))
            s.table_shift = _blend(s.table_shift, distance)
        self._judge()
        return self.report()

    def report(self) -> ColourDrift:
        """The current (smoothed) drift, as a copy."""
        s = self.state
        return ColourDrift(dict(s.hue_shift_deg), s.gains, s.exposure, s.table_shift, s.drifted, list(s.reasons))

    def _judge(self) -> None:
        s, limits = self.state, self.model.drift
        reasons = [f"{colour} hue moved {shift:+.1f} deg" for colour, shift in sorted(s.hue_shift_deg.items())
                   if abs(shift) > limits.hue_deg]
        if s.gains is not None:
            reasons += [f"white balance {channel} x{g:.2f}" for channel, g in zip("RGB", s.gains, strict=True)
                        if abs(math.log(g)) > math.log(1.0 + limits.gain)]
        if s.exposure is not None and abs(math.log(s.exposure)) > math.log(1.0 + limits.exposure):
            reasons.append(f"exposure x{s.exposure:.2f}")
        if s.table_shift is not None and s.table_shift > limits.table_chroma:
            reasons.append(f"table colour moved {s.table_shift:.3f} (chromaticity)")
        s.reasons, s.drifted = reasons, bool(reasons)


def _blend(previous: float | None, value: float) -> float:
    return value if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * value

