"""The rig's colour model: white balance and what each colour class looks like to this camera.

Written by ``robofollow calibrate colour`` (``calibration/<rig>/colour.yaml``) and read by perception
instead of fixed HSV thresholds. Each class (red, yellow, green, blue) is a set of *modes*, one per
shade the calibration saw (Scene 1's pure yellow and Scene 2's golden yellow are two modes of
"yellow"), each a hue (degrees, linear light after white balance), a hue spread, and the lowest
saturation and value its pixels showed. A pixel belongs to the nearest mode within its hue
tolerance; a saturated pixel near no mode is ``OTHER`` (an unknown colour: a distractor), the rest
is neutral (grey arms, dark shadow, table seen at an object's outline).

Decisions are by hue in linear light because white balance and exposure barely move the hue of the
benchmark's strongly saturated objects, while they move RGB and HSV-saturation thresholds a lot.
The table is recorded too: in table-plane mode (no depth) its colour is excluded explicitly, and its
colour at run time tells perception when the scene has drifted from the calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import cv2
import numpy as np

from robofollow_ros.perception.camera_model import CalibrationError
from robofollow_ros.perception.colour_space import (
    SRGB_TO_LINEAR,
    fast_median,
    hue_distance,
    hue_saturation_value,
    linear_of_bytes,
)
from robofollow_ros.yamlio import read_yaml_mapping

COLOUR_CLASSES: Final = ("red", "yellow", "green", "blue")
#: Pixel class codes: 0 neutral, 1..4 the classes, OTHER a saturated colour of no class.
OTHER: Final = len(COLOUR_CLASSES) + 1
FORMAT: Final = "robofollow-colour-model/1"
#: Hue tolerance of a mode: the largest of HUE_MARGIN_DEG, HUE_SPREADS × its spread and half the way to
#: the nearest mode of another class, at most HUE_MAX_DEG (beyond it a saturated colour is OTHER).
HUE_MARGIN_DEG: Final = 20.0
HUE_SPREADS: Final = 4.0
HUE_MAX_DEG: Final = 30.0
#: Saturated enough (linear) to be a colour at all; darker than MIN_VALUE (linear) is too dark to tell.
OTHER_SATURATION: Final = 0.45
MIN_VALUE: Final = 0.006
#: Hysteresis: a pixel of a class's hue whose saturation reaches only this share of the mode's floor (a colour
#: mixed with the table by motion blur, or at an edge) is a weak member: it joins the class where it touches a
#: region of the class's strict pixels (``classify`` with ``grow``), as edges do in Canny's detector.
WEAK_SATURATION: Final = 0.6
#: ... and only within this many pixels (8-connected steps through weak members) of the strict ones: a blurred or
#: compressed edge is a few pixels wide, while a grey surface a colour cast pushes over the weak floor (the
#: gripper under a cool white balance: saturation 0.42 against blue's weak floor 0.40) is a region of its own,
#: which unlimited growth merged into the blue object it holds (10 false detections in ``wb cool``).
GROW_BAND_PX: Final = 4
#: Bits per channel of the pixel lookup table (64³ entries).
LUT_BITS: Final = 6


@dataclass(frozen=True)
class ColourMode:
    """One shade of a class as the calibrated camera sees it."""

    hue_deg: float
    hue_spread_deg: float
    saturation_min: float
    mean_linear: tuple[float, float, float]



@dataclass(frozen=True)
class TableColour:
    """Mean linear colour of the bare table, and its hue and saturation."""

    mean_linear: tuple[float, float, float]

    @property
    def hue_saturation(self) -> tuple[float, float]:
        h, s, _ = hue_saturation_value(np.asarray(self.mean_linear))
        return float(h), float(s)


@dataclass(frozen=True)
class DriftLimits:
    """When the scene counts as drifted from the calibration (see ``colour_drift.py``)."""

    hue_deg: float = 8.0
    gain: float = 0.08
    exposure: float = 0.4
    table_chroma: float = 0.06


@dataclass(frozen=True)
class ColourModel:
    """White balance (linear gains) + per-class modes + the table's colour; see the module docstring."""

    white_balance: tuple[float, float, float]
    classes: dict[str, tuple[ColourMode, ...]]
    table: TableColour | None = None
    source: str = ""
    drift: DriftLimits = field(default_factory=DriftLimits)

    def __post_init__(self) -> None:
        for name in self.classes:
            if name not in COLOUR_CLASSES:
                raise CalibrationError(f"classes: unknown class {name!r}; expected some of {COLOUR_CLASSES}")

    # ------------------------------------------------------------------------------------ pixels
    def tolerance_deg(self, colour: str, mode: ColourMode) -> float:
        """How far from ``mode``'s hue a pixel may be and still belong to it (see HUE_MARGIN_DEG)."""
        others = [m.hue_deg for name, modes in self.classes.items() if name != colour for m in modes]
        gap = min((float(hue_distance(mode.hue_deg, h)) for h in others), default=2 * HUE_MAX_DEG)
        return float(min(HUE_MAX_DEG, max(HUE_MARGIN_DEG, HUE_SPREADS * mode.hue_spread_deg, 0.5 * gap)))

    def classify_linear(self, linear: np.ndarray, saturation_scale: float = 1.0) -> np.ndarray:
        """Class code (0, 1..4, OTHER) of linear colours (…, 3) before white balance; ``saturation_scale`` lowers
        every mode's saturation floor (``WEAK_SATURATION``)."""
        balanced = np.asarray(linear, dtype=np.float64) * np.asarray(self.white_balance)
        hue, sat, val = hue_saturation_value(np.clip(balanced, 0.0, 1.0))
        best = np.full(hue.shape, np.inf)
        code = np.zeros(hue.shape, dtype=np.uint8)
        for index, name in enumerate(COLOUR_CLASSES, start=1):
            for mode in self.classes.get(name, ()):
                d = hue_distance(hue, mode.hue_deg) / self.tolerance_deg(name, mode)
                ok = (d <= 1.0) & (sat >= saturation_scale * mode.saturation_min) & (val >= MIN_VALUE) & (d < best)
                best = np.where(ok, d, best)
                code = np.where(ok, index, code)
        other = (code == 0) & (sat >= OTHER_SATURATION) & (val >= 4 * MIN_VALUE)
        return np.where(other, OTHER, code).astype(np.uint8)

    @cached_property
    def lut(self) -> np.ndarray:
        """Class code of every 6-bit-per-channel sRGB colour (bin centres): one lookup per pixel."""
        return self._lut(1.0)

    @cached_property
    def lut_weak(self) -> np.ndarray:
        """As ``lut`` with every saturation floor lowered to ``WEAK_SATURATION`` of it."""
        return self._lut(WEAK_SATURATION)

    def _lut(self, saturation_scale: float) -> np.ndarray:
        levels = np.arange(1 << LUT_BITS)
        centre_codes = np.clip(levels * (1 << (8 - LUT_BITS)) + (1 << (7 - LUT_BITS)), 0, 255)
        channel = SRGB_TO_LINEAR[centre_codes].astype(np.float64)
        r, g, b = np.meshgrid(channel, channel, channel, indexing="ij")
        return self.classify_linear(np.stack([r, g, b], axis=-1), saturation_scale).reshape(-1)

    def classify(self, rgb: np.ndarray, grow_within: np.ndarray | None = None) -> np.ndarray:
        """uint8 sRGB (H, W, 3) or (…, 3) → class codes, through the lookup table. ``grow_within`` (a boolean
        (H, W) mask, e.g. the foreground): there, weak members of a class (its hue, a saturation down to
        ``WEAK_SATURATION`` of its floor; neutral or OTHER by the strict table) join it where they connect to its
        strict pixels (8-connected), at most ``GROW_BAND_PX`` pixels from them."""
        index = _lut_index(rgb)
        strict = np.asarray(self.lut[index])
        if grow_within is None:
            return strict
        weak = np.asarray(self.lut_weak[index])
        candidates = ((strict == 0) | (strict == OTHER)) & (weak > 0) & (weak != OTHER) & grow_within
        if not candidates.any():
            return strict
        out = strict.copy()
        kernel = np.ones((3, 3), dtype=np.uint8)
        for code in np.unique(weak[candidates]):
            member = strict == code
            if not member.any():
                continue
            allowed = (member | (candidates & (weak == code))).astype(np.uint8)
            reached = member.astype(np.uint8)
            for _ in range(GROW_BAND_PX):  # geodesic dilation: a band along the strict pixels, through weak ones
                reached = cv2.dilate(reached, kernel) & allowed
            out = np.where(candidates & (weak == code) & reached.astype(bool), code, out).astype(np.uint8)
        return out

    @cached_property
    def lut_without_table(self) -> np.ndarray:
        """As ``lut``, but colours near the calibrated table's are neutral (table-plane mode has no geometry)."""
        lut = self.lut.copy()
        if self.table is None:
            return lut
        levels = np.arange(1 << LUT_BITS)
        centre_codes = np.clip(levels * (1 << (8 - LUT_BITS)) + (1 << (7 - LUT_BITS)), 0, 255)
        channel = SRGB_TO_LINEAR[centre_codes].astype(np.float64)
        r, g, b = np.meshgrid(channel, channel, channel, indexing="ij")
        colours = np.stack([r, g, b], axis=-1).reshape(-1, 3) * np.asarray(self.white_balance)
        hue, sat, _ = hue_saturation_value(np.clip(colours, 0.0, 1.0))
        table_hue, table_sat = self.table.hue_saturation
        near = (hue_distance(hue, table_hue) < 15.0) & (np.abs(sat - table_sat) < 0.2)
        lut[near] = 0
        return lut

    def classify_without_table(self, rgb: np.ndarray) -> np.ndarray:
        return np.asarray(self.lut_without_table[_lut_index(rgb)])

    # ---------------------------------------------------------------------------------- segments
    def balanced_median(self, rgb_pixels: np.ndarray) -> np.ndarray:
        """White-balanced linear median colour of a set of uint8 pixels (N, 3)."""
        linear = linear_of_bytes(np.asarray(rgb_pixels, dtype=np.uint8).reshape(-1, 3))
        return np.asarray(fast_median(linear, axis=0) * np.asarray(self.white_balance))

    def nearest_mode(self, colour: str, linear: np.ndarray) -> ColourMode | None:
        """The class's mode closest in chromaticity (pure red and a salmon slab share a hue, not a colour)."""
        modes = self.classes.get(colour, ())
        if not modes:
            return None
        return min(modes, key=lambda m: float(np.linalg.norm(_chroma(np.asarray(m.mean_linear)) - _chroma(linear))))

    # --------------------------------------------------------------------------------- file I/O
    def as_dict(self) -> dict[str, Any]:
        def r(v: float) -> float:
            return round(float(v), 5) + 0.0

        return {
            "format": FORMAT,
            "source": self.source,
            "white_balance": [r(v) for v in self.white_balance],
            "classes": {name: [{"hue_deg": r(m.hue_deg), "hue_spread_deg": r(m.hue_spread_deg),
                                "saturation_min": r(m.saturation_min),
                                "mean_linear": [r(v) for v in m.mean_linear]} for m in modes]
                        for name, modes in self.classes.items()},
            "table": None if self.table is None else {"mean_linear": [r(v) for v in self.table.mean_linear]},
            "drift": {"hue_deg": self.drift.hue_deg, "gain": self.drift.gain, "exposure": self.drift.exposure,
                      "table_chroma": self.drift.table_chroma},
        }

    def write(self, path: Path) -> None:
        import yaml

        path.parent.mkdir(parents=True, exist_ok=True)
        header = ("# Written by `robofollow calibrate colour`: white balance (linear gains) and the colour classes\n"
                  "# as this camera sees them (hues in degrees, linear light after white balance).\n")
        path.write_text(header + yaml.safe_dump(self.as_dict(), sort_keys=False, default_flow_style=None),
                        encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "colour model") -> ColourModel:
        if data.get("format") != FORMAT:
            raise CalibrationError(f"{where}: format: expected {FORMAT!r}, got {data.get('format')!r}")
        wb = _triple(data.get("white_balance"), f"{where}: white_balance", positive=True)
        raw_classes = data.get("classes")
        if not isinstance(raw_classes, dict) or not raw_classes:
            raise CalibrationError(f"{where}: classes: expected a mapping of class → modes, got {raw_classes!r}")
        classes: dict[str, tuple[ColourMode, ...]] = {}
        for name, modes in raw_classes.items():
            if not isinstance(modes, list) or not modes:
                raise CalibrationError(f"{where}: classes.{name}: expected a non-empty list of modes")
            classes[str(name)] = tuple(_mode(m, f"{where}: classes.{name}[{i}]") for i, m in enumerate(modes))
        table_raw = data.get("table")
        table = None
        if table_raw is not None:
            if not isinstance(table_raw, dict):
                raise CalibrationError(f"{where}: table: expected a mapping, got {table_raw!r}")
            table = TableColour(_triple(table_raw.get("mean_linear"), f"{where}: table.mean_linear"))
        drift_raw = data.get("drift") or {}
        if not isinstance(drift_raw, dict):
            raise CalibrationError(f"{where}: drift: expected a mapping, got {drift_raw!r}")
        try:
            drift = DriftLimits(**{k: float(v) for k, v in drift_raw.items()})
        except (TypeError, ValueError) as exc:
            raise CalibrationError(f"{where}: drift: {exc}") from None
        return cls(wb, classes, table, str(data.get("source", "")), drift)

    @classmethod
    def load(cls, path: Path) -> ColourModel:
        return cls.from_dict(read_yaml_mapping(path, "colour model", CalibrationError), str(path))


def _lut_index(rgb: np.ndarray) -> np.ndarray:
    """Index of each uint8 sRGB pixel's bin in the 6-bit-per-channel lookup tables."""
    shift = 8 - LUT_BITS
    rgb = np.asarray(rgb, dtype=np.uint8)
    return np.asarray(((rgb[..., 0] >> shift).astype(np.int32) << (2 * LUT_BITS))
                      | ((rgb[..., 1] >> shift).astype(np.int32) << LUT_BITS) | (rgb[..., 2] >> shift).astype(np.int32))


def _chroma(linear: np.ndarray) -> np.ndarray:
    total = float(np.sum(linear))
    return np.asarray(linear, dtype=np.float64) / total if total > 1e-9 else np.zeros(3)


def _triple(value: Any, field_name: str, positive: bool = False) -> tuple[float, float, float]:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise CalibrationError(f"{field_name}: expected three numbers, got {value!r}") from None
    if len(out) != 3 or not all(np.isfinite(out)) or (positive and min(out) <= 0):
        raise CalibrationError(f"{field_name}: expected three {'positive ' if positive else ''}numbers, got {value!r}")
    return out[0], out[1], out[2]


def _mode(raw: Any, where: str) -> ColourMode:
    if not isinstance(raw, dict):
        raise CalibrationError(f"{where}: expected a mapping, got {raw!r}")
    try:
        mode = ColourMode(float(raw["hue_deg"]) % 360.0, float(raw["hue_spread_deg"]), float(raw["saturation_min"]),
                          _triple(raw["mean_linear"], f"{where}.mean_linear"))
    except KeyError as exc:
        raise CalibrationError(f"{where}: missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: {exc}") from None
    if not 0.0 <= mode.saturation_min <= 1.0 or mode.hue_spread_deg < 0:
        raise CalibrationError(f"{where}: saturation_min must be in [0, 1] and hue_spread_deg >= 0")
    return mode
