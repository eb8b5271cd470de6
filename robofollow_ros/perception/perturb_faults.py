"""Faults of a real RGB-D bench that need more than one picture: depth stalls, half-hidden objects, fragments.

``perturb.py`` changes one frame by a definition of the camera; these use the frame's place in the
trial or which pixels belong to which object (the simulator's segmentation: only to *build* the
input, perception never sees it):

- ``stalled``: depth frames stop arriving for a while (RealSense at 5 → 3.4 fps, a D435i unable to hold
  30 fps): on a stalled frame perception gets colour only (``perception_node`` drops depth older than
  1 s). Frames ``index % period`` ≥ ``period − length`` are stalled; the first (settled layout) never is.
- ``half_hidden``: a grey occluder (an arm) standing ``OCCLUDER_ABOVE_M`` nearer than the surface in
  front of it covers ``share`` of one visible object's pixels (its right part, plus a margin), a flat
  label first when the layout has one (Scene 3's place targets).
- ``fragments``: a few small patches (``FRAGMENT_PX``² px) of a layout object's colour standing
  ``FRAGMENT_RISE_M`` above the table at random table pixels (a colour fringe, a sticker, a reflection).
- look-alike substitution is scene-side (``perturb_eval``): one layout object is taken off the table
  and a 4 cm cube of its colour stands where it was.
"""

from __future__ import annotations

from collections.abc import Mapping

import cv2
import numpy as np

#: The arm's grey, as in the regression tests.
OCCLUDER_RGB = (110, 110, 110)
OCCLUDER_ABOVE_M = 0.08
OCCLUDER_MARGIN_PX = 2
FRAGMENT_PX = 6
FRAGMENT_RISE_M = 0.02
#: Fewer pixels than this in the segmentation: not worth hiding.
MIN_TARGET_PX = 60


def stalled(index: int, period: int, length: int) -> bool:
    """Whether frame ``index`` has no fresh depth."""
    if period < 1 or not 0 <= length < period:
        raise ValueError(f"depth stall: need period ≥ 1 and 0 ≤ length < period, got {period}, {length}")
    return index > 0 and index % period >= period - length


def half_hidden(rgb: np.ndarray, depth: np.ndarray, segmentation: np.ndarray, ids: Mapping[str, int],
                flat: frozenset[str], rng: np.random.Generator, share: float = 0.5
                ) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Hide ``share`` of one object's pixels (a flat one first, else a random visible one); returns the
    pictures and the name hidden (None: no object large enough)."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"share: expected a fraction in (0, 1), got {share}")
    counts = {name: int((segmentation == seg).sum()) for name, seg in ids.items()}
    visible = sorted(n for n, c in counts.items() if c >= MIN_TARGET_PX)
    if not visible:
        return rgb, depth, None
    labels = [n for n in visible if n in flat]
    name = str(rng.choice(labels or visible))
    rows, cols = np.nonzero(segmentation == ids[name])
    cut = np.percentile(cols, 100 * (1.0 - share))
    hide = cols >= cut
    r0, r1 = rows[hide].min() - OCCLUDER_MARGIN_PX, rows[hide].max() + OCCLUDER_MARGIN_PX + 1
    c0, c1 = int(np.ceil(cut)), cols.max() + OCCLUDER_MARGIN_PX + 1
    h, w = depth.shape
    r0, c0, r1, c1 = max(int(r0), 0), max(c0, 0), min(int(r1), h), min(int(c1), w)
    out_rgb, out_depth = rgb.copy(), np.asarray(depth, dtype=np.float32).copy()
    region = out_depth[r0:r1, c0:c1]
    near = float(region[region > 0].min()) if (region > 0).any() else float(np.median(depth[depth > 0]))
    out_rgb[r0:r1, c0:c1] = OCCLUDER_RGB
    out_depth[r0:r1, c0:c1] = max(near - OCCLUDER_ABOVE_M, 0.05)
    return out_rgb, out_depth, name


def fragments(rgb: np.ndarray, depth: np.ndarray, segmentation: np.ndarray, ids: Mapping[str, int],
              rng: np.random.Generator, count: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``count`` patches of a layout object's median colour standing on table pixels (no object within 8 px)."""
    objects = [seg for seg in ids.values() if (segmentation == seg).sum() >= MIN_TARGET_PX]
    if not objects:
        return rgb, depth
    out_rgb, out_depth = rgb.copy(), np.asarray(depth, dtype=np.float32).copy()
    taken = np.isin(segmentation, list(ids.values())).astype(np.uint8)
    free = (cv2.dilate(taken, np.ones((17, 17), np.uint8)) == 0) & (out_depth > 0)
    h, w = depth.shape
    free[: h // 3] = False  # the table's near two thirds (the far part is mostly background)
    rows, cols = np.nonzero(free[: h - FRAGMENT_PX, : w - FRAGMENT_PX])
    if len(rows) == 0:
        return rgb, depth
    for _ in range(count):
        seg = int(rng.choice(objects))
        colour = np.median(rgb[segmentation == seg], axis=0).astype(np.uint8)
        k = int(rng.integers(len(rows)))
        r, c = rows[k], cols[k]
        out_rgb[r:r + FRAGMENT_PX, c:c + FRAGMENT_PX] = colour
        patch = out_depth[r:r + FRAGMENT_PX, c:c + FRAGMENT_PX]
        out_depth[r:r + FRAGMENT_PX, c:c + FRAGMENT_PX] = np.where(patch > 0, patch - FRAGMENT_RISE_M, 0.0)
    return out_rgb, out_depth
