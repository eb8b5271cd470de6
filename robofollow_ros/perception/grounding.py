"""Grounding: which detection is which of the layout's named objects, with a confidence.

Each (detection, identity) pair gets a cost from how far the measurements are from the identity's
model (width, top height, flat vs round top) plus where it is: near the identity's track if it has
one (continuity), else near its nominal layout spot (the only thing that tells ``yellow_block_1..3``
apart at the start). Colours never mix. Within a colour the cheapest one-to-one assignment wins,
with an explicit "unexplained" option per detection, so a stray blob is reported instead of being
forced onto a name. Confidence is the softmax of the costs over the detection's options.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.identities import IdentityModel

#: Cost of calling a detection unexplained; a match costlier than this is not believed.
UNEXPLAINED_COST = 20.0
#: Robust percentiles shave about this much off a blob's measured width (m).
WIDTH_BIAS = 0.003
WIDTH_SCALE = 0.006
HEIGHT_SCALE = 0.006
HEIGHT_CAP = 9.0
#: A top this far above the identity's resting top means "lifted" (in the hand, or stacked on something).
LIFT_MARGIN = 0.03
LIFTED_COST = 1.0
LIFTED_SHAPE_CAP = 3.0
NARROW_CAP = 6.0
#: A resting blob narrower than this share of its identity's width is partly hidden (its extent is not the object's).
PARTIAL_WIDTH = 0.75
TRACK_SCALE = 0.03
TRACK_CAP = 9.0
NOMINAL_SCALE = 0.06
NOMINAL_CAP = 4.0  # a prior only: it breaks ties between look-alikes, shape outweighs it
#: Share of a blob's points in the top band: spheres show about 0.3, uncovered flat tops 0.6 and more.
FLAT_SPLIT = 0.5
FLAT_SCALE = 0.15
FLAT_CAP = 4.0


@dataclass(frozen=True)
class Grounding:
    """One detection given a name (or ``None``: unexplained) and the probability of that choice."""

    detection: Detection
    name: str | None
    confidence: float
    cost: float


def match_cost(detection: Detection, model: IdentityModel, track_xy: np.ndarray | None) -> float:
    """Cost of calling ``detection`` ``model.name``; ``inf`` across colours."""
    if detection.colour != model.colour:
        return math.inf
    cost = 0.0
    position = _xy(detection)
    if detection.has_depth:
        assert detection.width is not None and detection.z_top is not None and detection.flat_fraction is not None
        lift = detection.z_top - TABLE_TOP_Z - model.resting_top_height
        # In the hand, fingers hide part of the object and it may be seen from the side: shape evidence is weak.
        lifted = is_lifted(detection, model)
        width_term = ((detection.width + WIDTH_BIAS - model.width) / WIDTH_SCALE) ** 2
        if lifted:
            width_term = min(width_term, LIFTED_SHAPE_CAP)
        elif detection.width + WIDTH_BIAS < model.width:
            # Occlusion (the gripper above it) only ever narrows a blob: too narrow is weaker evidence than too wide.
            width_term = min(width_term, NARROW_CAP)
        cost += width_term
        cost += LIFTED_COST if lifted else min((lift / HEIGHT_SCALE) ** 2, HEIGHT_CAP)
        if model.shape != "bowl":
            ff = detection.flat_fraction
            miss = max(0.0, ff - FLAT_SPLIT) if model.round_top else max(0.0, FLAT_SPLIT - ff)
            cost += min((miss / FLAT_SCALE) ** 2, 1.0 if lifted else FLAT_CAP)
    if track_xy is not None:
        d = float(np.linalg.norm(position - track_xy))
        cost += min((d / TRACK_SCALE) ** 2, TRACK_CAP)
    else:
        d = float(np.linalg.norm(position - np.asarray(model.nominal_xy)))
        cost += min((d / NOMINAL_SCALE) ** 2, NOMINAL_CAP)
    return cost


def is_lifted(detection: Detection, model: IdentityModel) -> bool:
    """Top well above where the identity rests: in the hand (or stacked where the layout did not put it)."""
    if detection.z_top is None:
        return False
    return detection.z_top - TABLE_TOP_Z - model.resting_top_height > LIFT_MARGIN


def is_partly_hidden(detection: Detection, model: IdentityModel) -> bool:
    """A resting object seen cut: its blob much narrower than the object (a gripper in front of or over it).

    A low top alone is not taken as a sign: an unstacked block placed on the table is lower than its
    layout puts it, and must then move down, not stay where it was.
    """
    width = detection.width
    return width is not None and not is_lifted(detection, model) and width + WIDTH_BIAS < PARTIAL_WIDTH * model.width


def _xy(detection: Detection) -> np.ndarray:
    if detection.top_xy is not None:
        return np.asarray(detection.top_xy)
    if detection.plane_xy is not None:
        return np.asarray(detection.plane_xy)
    raise ValueError("detection: has neither depth nor a table-plane position")


def ground(detections: Sequence[Detection], models: Sequence[IdentityModel],
           track_xy: Mapping[str, np.ndarray]) -> list[Grounding]:
    """Assign names to detections (one-to-one, per colour); unexplained ones get ``name=None``."""
    costs = np.array([[match_cost(d, m, track_xy.get(m.name)) for m in models] for d in detections]).reshape(
        len(detections), len(models))
    names: list[str | None] = [None] * len(detections)
    colours = {d.colour for d in detections}
    for colour in colours:
        det_idx = [i for i, d in enumerate(detections) if d.colour == colour]
        mod_idx = [j for j, m in enumerate(models) if m.colour == colour]
        choice = _best_assignment(costs[np.ix_(det_idx, mod_idx)]) if mod_idx else [None] * len(det_idx)
        for i, pick in zip(det_idx, choice, strict=True):
            names[i] = None if pick is None else models[mod_idx[pick]].name
    out = []
    for i, detection in enumerate(detections):
        options = np.append(costs[i], UNEXPLAINED_COST)
        finite = np.isfinite(options)
        weights = np.zeros_like(options)
        weights[finite] = np.exp(-(options[finite] - options[finite].min()) / 2.0)
        weights /= weights.sum()
        name = names[i]
        j = len(models) if name is None else next(k for k, m in enumerate(models) if m.name == name)
        out.append(Grounding(detection, name, float(weights[j]), float(options[j])))
    return out


def _best_assignment(costs: np.ndarray) -> list[int | None]:
    """Cheapest one-to-one choice of a model column (or None = unexplained) for every row.

    Exhaustive search: a colour group holds at most a handful of blobs and identities.
    """
    rows, cols = costs.shape
    best: tuple[float, list[int | None]] = (math.inf, [None] * rows)

    def search(row: int, used: frozenset[int], total: float, picks: list[int | None]) -> None:
        nonlocal best
        if total >= best[0]:
            return
        if row == rows:
            best = (total, list(picks))
            return
        for col in range(cols):
            if col not in used and costs[row, col] < UNEXPLAINED_COST:
                search(row + 1, used | {col}, total + float(costs[row, col]), [*picks, col])
        search(row + 1, used, total + UNEXPLAINED_COST, [*picks, None])

    search(0, frozenset(), 0.0, [])
    return best[1]
