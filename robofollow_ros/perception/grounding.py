"""Grounding: which segment is which of the layout's named objects, with a confidence.

Each (segment, identity) pair gets a cost from how well the identity's known primitive explains the
segment's points (``primitives.py``: a sphere's cap does not fit a cube, a 4 cm cube does not fit a
6 cm one), how far the fitted centre is from where the identity rests (height above the fitted table
plane; "lifted" when ≥ 3 cm above, where shape evidence is weak: fingers hide the object and it may be
tilted), and where it is: near the identity's track if it has one (continuity), else near its
nominal layout spot (the only thing that tells ``yellow_block_1..3`` apart at the start). Colours
never mix, and flat patches (labels) only ever match flat identities. Within a colour the cheapest
one-to-one assignment wins, with an explicit "unexplained" option per segment, so a stray segment is
reported instead of being forced onto a name. Confidence is the softmax of the costs over the
segment's options.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from robofollow_ros.perception import doubt
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_space import fast_median
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.identities import IdentityModel
from robofollow_ros.perception.others import OtherObjects
from robofollow_ros.perception.plane import Plane
from robofollow_ros.perception.primitives import Fit, Primitive, fit_shape
from robofollow_ros.perception.silhouette import View, evidence

#: Cost of calling a detection unexplained; a match costlier than this is not believed.
UNEXPLAINED_COST = 20.0
#: Residuals are truncated at τ = max(TAU_FLOOR, TAU_SIGMAS × depth noise) when shapes are compared.
TAU_FLOOR = 0.003
TAU_SIGMAS = 3.0
#: Shape cost: ((loss − best loss among the colour's shapes) / SHAPE_SCALE)², capped; plus a cost for a
#: shape that explains the points badly in absolute terms (loss above LOSS_OK).
SHAPE_SCALE = 0.06
SHAPE_CAP = 9.0
LOSS_OK = 0.3
ABSOLUTE_SCALE = 0.15
ABSOLUTE_CAP = 6.0
HEIGHT_SCALE = 0.006
HEIGHT_CAP = 9.0
#: A centre this far above the identity's resting centre means "lifted" (in the hand, or stacked).
LIFT_MARGIN = 0.03
LIFTED_COST = 1.0
LIFTED_SHAPE_CAP = 3.0
TRACK_SCALE = 0.03
TRACK_CAP = 9.0
NOMINAL_SCALE = 0.06
NOMINAL_CAP = 4.0  # a prior only: it breaks ties between look-alikes, shape outweighs it


@dataclass(frozen=True)
class Grounding:
    """One detection given a name (or ``None``: unexplained) and the probability of that choice."""

    detection: Detection
    name: str | None
    confidence: float
    cost: float


def resting_centre_z(model: IdentityModel, plane: Plane | None, xy: np.ndarray) -> float:
    """World z of the identity's pose origin when it rests as laid out, on the fitted table plane."""
    from robofollow_ros.contract import TABLE_TOP_Z

    table = TABLE_TOP_Z if plane is None else plane.height_at_xy(float(xy[0]), float(xy[1]))
    return table + model.resting_top_height - model.top_offset


def _initial_guess(detection: Detection, prim: Primitive, camera_origin: np.ndarray) -> tuple[np.ndarray, float]:
    """Start of the fit: the points' median pushed one half-size along the view ray; yaw of the footprint."""
    assert detection.points is not None
    centre = np.asarray(fast_median(detection.points, axis=0), dtype=np.float64)
    if prim.shape == "bowl":
        # The walls seen from above and in front are an arc: its circle's centre, the rim at the top.
        x, y = detection.points[:, 0], detection.points[:, 1]
        design = np.column_stack([x, y, np.ones_like(x)])
        (a, b, _), *_ = np.linalg.lstsq(design, -(x * x + y * y), rcond=None)
        top = detection.z_top if detection.z_top is not None else float(centre[2])
        start = np.array([-a / 2, -b / 2, top - prim.dims[3]])
        if not np.all(np.isfinite(start)) or np.hypot(*(start[:2] - centre[:2])) > 2 * prim.dims[0]:
            start = np.array([centre[0], centre[1], top - prim.dims[3]])
    else:
        ray = centre - camera_origin
        ray /= max(float(np.linalg.norm(ray)), 1e-9)
        reach = prim.dims[0] if prim.shape != "box" else min(prim.dims[0], prim.dims[1])
        start = centre + reach * ray
    yaw = 0.0
    if prim.has_yaw and len(detection.points) >= 8:
        (_, _), (w, h), angle = cv2.minAreaRect(detection.points[:, :2].astype(np.float32))
        long_side = math.radians(angle) if w >= h else math.radians(angle) + math.pi / 2
        # A box's local y is its long side (Scene 3's slabs lie along y at yaw 0); cubes are symmetric.
        yaw = long_side - math.pi / 2 if prim.dims[1] > prim.dims[0] else long_side
    return start, yaw


def fit_for(detection: Detection, prim: Primitive, camera_origin: np.ndarray) -> Fit:
    """The detection's signed-distance fit of ``prim`` (``fit_shape``), computed once and cached on it."""
    fit = detection.fits.get(prim.key)
    if fit is None:
        start, yaw = _initial_guess(detection, prim, camera_origin)
        assert detection.points is not None
        fit = fit_shape(detection.points, prim, start, yaw, noise=detection.noise_m)
        detection.fits[prim.key] = fit
    return fit


def tau(detection: Detection) -> float:
    """The truncation of residuals when shapes are scored: max(TAU_FLOOR, TAU_SIGMAS × depth noise)."""
    return max(TAU_FLOOR, TAU_SIGMAS * detection.noise_m)


def is_lifted(detection: Detection, model: IdentityModel, plane: Plane | None) -> bool:
    """Centre well above where the identity rests: in the hand (or stacked where the layout did not put it)."""
    fit = detection.fits.get(model.primitive.key)
    if fit is None or detection.kind != "solid":
        return False
    return bool(fit.position[2] - resting_centre_z(model, plane, fit.position) > LIFT_MARGIN)


def _shape_cost(detection: Detection, model: IdentityModel, best_loss: float, lifted: bool) -> float:
    fit = detection.fits[model.primitive.key]
    loss = fit.robust_loss(tau(detection))
    cost = min(((loss - best_loss) / SHAPE_SCALE) ** 2, SHAPE_CAP)
    cost += min((max(0.0, loss - LOSS_OK) / ABSOLUTE_SCALE) ** 2, ABSOLUTE_CAP)
    return min(cost, LIFTED_SHAPE_CAP) if lifted else cost


def match_cost(detection: Detection, model: IdentityModel, track_xy: np.ndarray | None, plane: Plane | None,
               best_loss: float = 0.0) -> float:
    """Cost of calling ``detection`` ``model.name``; ``inf`` across colours and across flat/solid."""
    if detection.colour != model.colour:
        return math.inf
    if (detection.kind == "solid" and model.flat) or (detection.kind == "flat" and not model.flat):
        return math.inf
    cost = 0.0
    position = detection.xy()
    if detection.kind == "solid":
        fit = detection.fits[model.primitive.key]
        position = fit.position[:2]
        lift = float(fit.position[2] - resting_centre_z(model, plane, fit.position))
        lifted = lift > LIFT_MARGIN
        cost += _shape_cost(detection, model, best_loss, lifted)
        cost += LIFTED_COST if lifted else min((lift / HEIGHT_SCALE) ** 2, HEIGHT_CAP)
    if track_xy is not None:
        d = float(np.linalg.norm(position - track_xy))
        cost += min((d / TRACK_SCALE) ** 2, TRACK_CAP)
    else:
        d = float(np.linalg.norm(position - np.asarray(model.nominal_xy)))
        cost += min((d / NOMINAL_SCALE) ** 2, NOMINAL_CAP)
    return cost


def _veto(costs: np.ndarray, detections: Sequence[Detection], models: Sequence[IdentityModel],
          track_xy: Mapping[str, np.ndarray], plane: Plane | None, camera: CameraModel, view: View) -> None:
    """Check every still possible (segment, identity) pair's silhouette: a look-alike of another size or
    shape, or a fragment, cannot take the name (its cost becomes ∞; the reason is kept on the segment)."""
    for i, detection in enumerate(detections):
        if detection.kind != "solid":
            continue
        for j, model in enumerate(models):
            if not math.isfinite(costs[i, j]):
                continue
            fit = detection.fits[model.primitive.key]
            ev = evidence(camera, view, model.primitive, fit.position, fit.yaw if model.has_yaw else 0.0,
                          detection.pixels)
            if ev is None:
                continue
            track = track_xy.get(model.name)
            near = track is not None and float(np.linalg.norm(fit.position[:2] - track)) < TRACK_SCALE
            # The fitted top above the table (robust to flying pixels, unlike the points' highest percentile).
            table = resting_centre_z(model, plane, fit.position) - model.resting_top_height + model.top_offset
            top = float(fit.position[2]) + model.top_offset - table
            tops = (model.resting_top_height,) if model.shape == "bowl" else (
                model.resting_top_height, model.table_centre_height + model.top_offset)
            heights = None if detection.points is None else detection.points[:, 2] - table
            reason = doubt.refuses_name(ev, is_lifted(detection, model, plane), near, top, tops, detection.noise_m,
                                        model.shape == "bowl", heights)
            if reason is not None:
                detection.refused[model.name] = reason
                costs[i, j] = math.inf
                continue
            unsure = doubt.unconfirmed_height(ev, is_lifted(detection, model, plane), top, tops, detection.noise_m)
            if unsure is not None:
                detection.doubted[model.name] = unsure


def ground(detections: Sequence[Detection], models: Sequence[IdentityModel], track_xy: Mapping[str, np.ndarray],
           plane: Plane | None = None, camera_origin: np.ndarray | None = None, camera: CameraModel | None = None,
           view: View | None = None, others: OtherObjects | None = None) -> list[Grounding]:
    """Assign names to detections (one-to-one, per colour); unexplained ones get ``name=None``. With the
    camera and the frame's ``view``, silhouettes veto look-alikes and fragments (``doubt.refuses_name``);
    ``others`` vetoes names seen elsewhere while a segment standing here was not them (``others.py``)."""
    origin = np.zeros(3) if camera_origin is None else np.asarray(camera_origin, dtype=np.float64)
    best_loss = np.zeros(len(detections))
    for i, detection in enumerate(detections):
        if detection.kind != "solid":
            continue
        prims = {m.primitive.key: m.primitive for m in models if m.colour == detection.colour and not m.flat}
        losses = [fit_for(detection, p, origin).robust_loss(tau(detection)) for p in prims.values()]
        best_loss[i] = min(losses) if losses else 0.0
    costs = np.array([[match_cost(d, m, track_xy.get(m.name), plane, float(best_loss[i])) for m in models]
                      for i, d in enumerate(detections)]).reshape(len(detections), len(models))
    if camera is not None and view is not None:
        _veto(costs, detections, models, track_xy, plane, camera, view)
    if others is not None:
        others.veto(costs, detections, models)
    names: list[str | None] = [None] * len(detections)
    for colour in {d.colour for d in detections}:
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

    Exhaustive search: a colour group holds at most a handful of segments and identities.
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
