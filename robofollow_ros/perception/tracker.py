"""Tracking named objects over frames: smoothing, memory through occlusion, and what is missing.

``Perception.update(rgb, depth, stamp)`` runs segmentation → grounding → pose and folds the result
into one track per identity. A track not seen this frame keeps its last pose; its ``age_s`` grows and
its confidence halves every ``half_life_s`` while it rests (a gripper hiding a block does not make the
block vanish), every ``confidence.LIFTED_HALF_LIFE_S`` when it is lifted (a carried object hidden in the
hand, or put down out of sight, is not where it was last seen). A seen track is smoothed by an
exponential average while it stays put and jumps to the measurement when it moves more than ``jump_m``
(an object being carried must not lag); its confidence is the evidence's (``confidence.py``).

Doubt is explicit. A resting object seen only in part (fewer than ``PARTIAL_SHARE`` of the pixels it
showed when last fully seen: a finger in front of or over it) keeps its pose only if that pose is a
resting one (``RESTING_TOLERANCE_M``) and the cut segment's fit lies near it (``PARTIAL_NEAR_M``): its
cut outline would move the estimated centre. A just-placed object whose track is still its in-hand pose
takes the measurement instead, at the confidence a partial view earns. A resting track whose
measurement says "lifted" from fewer than ``LIFT_MIN_SHARE`` of its pixels (flying depth pixels at a
finger's edge) is not lifted: the frame counts as not seeing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception import doubt
from robofollow_ros.perception.align import DepthToColour, load_depth_alignment
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_drift import ColourDrift, DriftMonitor
from robofollow_ros.perception.colour_model import COLOUR_CLASSES, ColourModel
from robofollow_ros.perception.colour_names import default_model
from robofollow_ros.perception.confidence import LIFTED_HALF_LIFE_S, decayed, fit_quality, support
from robofollow_ros.perception.detector import MIN_PIXELS, ColourBlobDetector, Detection, measure_colour
from robofollow_ros.perception.estimate import estimate_pose, yaw_quat_wxyz
from robofollow_ros.perception.grounding import Grounding, ground, is_lifted, resting_centre_z, tau
from robofollow_ros.perception.identities import IdentityModel, identity_models
from robofollow_ros.perception.others import OtherObjects
from robofollow_ros.perception.plane import Plane
from robofollow_ros.perception.segmenter import GeometrySegmenter
from robofollow_ros.perception.silhouette import blob_iou, evidence, outline_points, silhouette

#: A cut segment within this distance of its track is the same object, still lying where it was.
PARTIAL_NEAR_M = 0.03
PARTIAL_SHARE = 0.6
#: A resting track meets a lifted measurement: below this share of its pixels it is doubt, not a lift.
LIFT_MIN_SHARE = 0.25
#: A track first seen farther than this (m) from its layout spot has an unconfirmed name (objects start on it).
FIRST_SEEN_M = 0.06
FOUND_FAR = "first seen away from its layout spot"
FOUND_LIFTED = "first seen lifted, not resting"
JUMPED = "lifted far from where it rested"
#: A resting track meets a lifted measurement this far (m, in the table plane) from it: the name is unconfirmed.
LIFT_JUMP_M = 0.06
#: A track within this height (m) of where the layout rests it, or of standing on the table, is resting.
RESTING_TOLERANCE_M = 0.015
#: The reference pixel count of a track forgets slowly (an object moved further away shows fewer).
REFERENCE_DECAY = 0.98
COLOUR_MODEL_FILE = "colour.yaml"
#: A refused segment this close (m) to where an identity is expected makes that identity doubted.
DOUBT_NEAR_M = 0.06
#: A segment within this many pixels (centroid) and this share of its pixel count of last frame's is the same.
REUSE_PX = 0.5
REUSE_SHARE = 0.03
#: Colour drift is measured on every frame at first, then every DRIFT_EVERY frames (it moves slowly).
DRIFT_EVERY_FRAME_UNTIL = 10
DRIFT_EVERY = 3


def builtin_colour_model() -> ColourModel:
    """The uncalibrated fallback, from every spec colour of the benchmark."""
    from robofollow_ros.benchmark import default_registry

    registry = default_registry()
    colours = [o.color_rgb for scene in registry.layouts.values() for layout in scene.values() for o in layout.objects]
    return default_model(colours)


def load_colour_model(calibration_dir: Path) -> tuple[ColourModel, bool]:
    """``<dir>/colour.yaml`` if there is one (True), else the built-in fallback (False)."""
    path = Path(calibration_dir) / COLOUR_MODEL_FILE
    if path.is_file():
        return ColourModel.load(path), True
    return builtin_colour_model(), False


def perception_from_calibration(calibration_dir: Path, colour_model: Path | None = None,
                                **kwargs: float) -> tuple[Perception, bool]:
    """Perception for the head camera of a calibration directory: camera, colour model (``colour_model``,
    else ``colour.yaml`` there, else built-in) and, when calibrated, the depth camera's alignment.
    Returns it with whether the colour model is a calibrated one."""
    camera = CameraModel.from_calibration_dir(Path(calibration_dir), "head")
    if colour_model is not None:
        colour, calibrated = ColourModel.load(Path(colour_model)), True
    else:
        colour, calibrated = load_colour_model(Path(calibration_dir))
    alignment = load_depth_alignment(Path(calibration_dir), camera.k, (camera.width, camera.height))
    perception = Perception(camera, colour=colour, depth_alignment=alignment, **kwargs)  # type: ignore[arg-type]
    return perception, calibrated


@dataclass
class Track:
    """What is believed about one named object."""

    name: str
    position: np.ndarray
    yaw: float
    confidence: float
    last_seen: float
    seen_confidence: float
    age_s: float = 0.0
    visible: bool = True
    reference_pixels: float = 0.0
    #: Why its name is not confirmed (None: it is): ``FOUND_FAR`` (first seen away from its layout spot, not seen
    #: there since) or ``JUMPED`` (resting, then lifted far from there; until seen standing again).
    unconfirmed: str | None = None
    #: Whether depth located this pose (False: a blob's pose from colour only, on the resting plane of the identity,
    #: during a depth stall). Only a depth-located pose is kept for a cut segment on the next depth frame: a stall's
    #: colour-only pose of an object being picked or nudged is where a cut blob's centre fell, not where it rests.
    depth_located: bool = True

    @property
    def quat_wxyz(self) -> tuple[float, float, float, float]:
        return yaw_quat_wxyz(self.yaw)


@dataclass
class PerceptionResult:
    """One frame's answer: tracked objects, never-seen identities, and segments no identity explains."""

    stamp: float
    tracks: dict[str, Track]
    missing: list[str]
    unexplained: list[Detection]
    groundings: list[Grounding] = field(default_factory=list)
    colour_drift: ColourDrift | None = None
    plane: Plane | None = None
    #: Identities not named this frame, with why grounding refused their name to a segment (a look-alike).
    doubts: dict[str, str] = field(default_factory=dict)

    def positions(self) -> dict[str, list[float]]:
        return {name: [float(v) for v in t.position] for name, t in self.tracks.items()}


class Perception:
    """Segmenter + grounding + tracker for one camera and one layout (``reset`` for the next trial)."""

    def __init__(self, camera: CameraModel, layout: Layout | None = None, smoothing: float = 0.5,
                 jump_m: float = 0.01, half_life_s: float = 2.0, min_pixels: int = MIN_PIXELS,
                 colour: ColourModel | None = None, depth_alignment: DepthToColour | None = None) -> None:
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing: expected a weight in (0, 1], got {smoothing}")
        if half_life_s <= 0:
            raise ValueError(f"half_life_s: must be positive, got {half_life_s}")
        self.camera = camera
        #: A separate depth camera's calibration: depth is aligned to colour pixels first (None: already aligned).
        self.depth_alignment = depth_alignment
        self.colour = colour if colour is not None else builtin_colour_model()
        self.segmenter = GeometrySegmenter(camera, self.colour, min_pixels=min_pixels)
        self.blobs = ColourBlobDetector(camera, self.colour, min_pixels=min_pixels)
        self.drift = DriftMonitor(self.colour)
        self.smoothing = smoothing
        self.jump_m = jump_m
        self.half_life_s = half_life_s
        self.models: dict[str, IdentityModel] = {}
        self.tracks: dict[str, Track] = {}
        self._previous: list[Detection] = []
        #: Segments seen beside an identity, which that identity's name may not jump onto (``others.py``).
        self.others = OtherObjects()
        self._frames = 0
        if layout is not None:
            self.reset(layout)

    def reset(self, layout: Layout) -> None:
        """Forget all tracks and expect this layout's identities."""
        self.models = {m.name: m for m in identity_models(layout)}
        self.tracks = {}
        self._previous = []
        self.others.reset()

    def detect(self, rgb: np.ndarray, depth: np.ndarray | None) -> tuple[list[Detection], Plane | None]:
        expected = (self.camera.height, self.camera.width)
        if rgb.shape[:2] != expected:
            raise ValueError(f"rgb: expected {expected[1]}x{expected[0]} to match the calibration, "
                             f"got {rgb.shape[1]}x{rgb.shape[0]}")
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"rgb: expected uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")
        if depth is not None and self.depth_alignment is not None:
            depth = self.depth_alignment.align(depth)
        if depth is not None and depth.shape[:2] != expected:
            raise ValueError(f"depth: expected shape {expected}, got {depth.shape}")
        if depth is None:
            return self.blobs.detect(rgb), None
        flats = [m for m in self.models.values() if m.flat]
        return self.segmenter.detect(rgb, depth, flats)

    def update(self, rgb: np.ndarray, depth: np.ndarray | None, stamp: float) -> PerceptionResult:
        if not self.models:
            raise RuntimeError("Perception: call reset(layout) before update")
        detections, plane = self.detect(rgb, depth)
        self._reuse_shape_fits(detections)
        track_xy = {name: t.position[:2] for name, t in self.tracks.items()}
        view = self.segmenter.view if depth is not None else None
        groundings = ground(detections, list(self.models.values()), track_xy, plane,
                            np.asarray(self.camera.world_position), self.camera, view, self.others)
        seen = set()
        #: Names grounding gave that the tracks did not take this frame, and why (their kept poses are not located).
        dropped: dict[str, str] = {}
        for g in groundings:
            if g.name is None:
                continue
            model = self.models[g.name]
            position, yaw = estimate_pose(g.detection, model, self.camera, plane)
            if position is None:
                dropped[g.name] = "named, but its segment gave no pose"
                continue
            track = self.tracks.get(g.name)
            if view is None:
                position, yaw, confidence, kept = self._colour_only(g, model, track, position, yaw)
                self._observe(g.name, position, yaw, confidence, stamp, depth_located=kept)
                seen.add(g.name)
                continue
            confidence = self._measured_confidence(g, track)
            lifted = is_lifted(g.detection, model, plane)
            jumped = False
            if g.detection.kind == "solid" and track is not None:
                shown = g.detection.pixel_count / max(track.reference_pixels, 1.0) if track.reference_pixels else 1.0
                at_rest = self._resting(track.position, model, plane)
                near = bool(np.linalg.norm(position - track.position) < PARTIAL_NEAR_M)
                if lifted and at_rest and shown < LIFT_MIN_SHARE:
                    # A handful of points (flying depth at a finger's edge) cannot lift a resting object:
                    # doubted evidence, the track is treated as not seen this frame.
                    dropped[g.name] = (f"a lifted sliver ({shown:.0%} of its pixels) where it rested: not believed, "
                                       f"its resting pose kept")
                    continue
                # Resting there, lifted far from there: a pick starts above the object; another object of its
                # colour in the hand is as likely. The name is not confirmed until it is seen standing again.
                jumped = lifted and at_rest and float(np.linalg.norm(position[:2] - track.position[:2])) > LIFT_JUMP_M
                if not lifted and at_rest and near and shown < PARTIAL_SHARE and track.depth_located:
                    # Seen where it rests but cut (far fewer pixels than before), or only a sliver: the fit
                    # of a cut outline could drift, the resting pose it agrees with is the better answer. Only a
                    # pose depth located: a depth stall's colour-only pose is a blob's centre put on the resting
                    # plane, which a cut segment agrees with as easily (20–24 mm off, kept at 1.00).
                    position, yaw, confidence = track.position.copy(), track.yaw, g.confidence
            ev = evidence(self.camera, view, model.primitive, position, yaw if model.has_yaw else 0.0,
                          g.detection.pixels, self._colour_code(model))
            confidence *= doubt.bowl_factor(ev) if model.shape == "bowl" else doubt.silhouette_factor(ev, model.flat)
            if g.name in g.detection.doubted:
                confidence = min(confidence, doubt.UNCONFIRMED_CAP)
            self._observe(g.name, position, yaw, confidence, stamp, standing=not lifted, jumped=jumped,
                          lifted=lifted)
            if not lifted:
                current = self.tracks[g.name]
                current.reference_pixels = max(REFERENCE_DECAY * current.reference_pixels, g.detection.pixel_count)
            seen.add(g.name)
        for name, track in self.tracks.items():
            if name not in seen:
                track.visible = False
                track.age_s = max(0.0, stamp - track.last_seen)
                half_life = (self.half_life_s if self._resting(track.position, self.models[name], plane)
                             else min(self.half_life_s, LIFTED_HALF_LIFE_S))
                track.confidence = decayed(track.seen_confidence, track.age_s, half_life)
                if view is None:  # colour only: nothing tells a hidden object from one taken away
                    track.confidence = min(track.confidence, doubt.COLOUR_ONLY_CAP)
                if view is not None and self._negative_evidence_applies(name) and doubt.absent(evidence(
                        self.camera, view, self.models[name].primitive, track.position,
                        track.yaw if self.models[name].has_yaw else 0.0, None)):
                    # Nobody saw it, and the table shows where it is said to be: it is not there.
                    track.seen_confidence = min(track.seen_confidence, doubt.ABSENT_CONFIDENCE)
                    track.confidence = min(track.confidence, doubt.ABSENT_CONFIDENCE)
        missing = [name for name in self.models if name not in self.tracks]
        unexplained = [g.detection for g in groundings if g.name is None]
        if view is not None:
            in_hand = {g.name for g in groundings
                       if g.name is not None and is_lifted(g.detection, self.models[g.name], plane)}
            self.others.update(groundings, in_hand, stamp, self.models)
        self._previous = [d for d in detections if d.kind == "solid"]
        self._frames += 1
        if self._frames <= DRIFT_EVERY_FRAME_UNTIL or self._frames % DRIFT_EVERY == 0:
            table = self.segmenter.table_colour(rgb) if depth is not None else None
            named = [g.detection for g in groundings if g.name is not None]
            for detection in named:
                measure_colour(detection, rgb, self.colour)
            self.drift.update(named, table)
        drift = self.drift.report()
        named_now = {g.name for g in groundings if g.name is not None}
        doubts = {name: why for g in groundings for name, why in g.detection.refused.items()
                  if name not in named_now and self._near_spot(name, g.detection)}
        doubts.update(dropped)
        doubts.update({name: f"unconfirmed: {t.unconfirmed}" for name, t in self.tracks.items() if t.unconfirmed})
        doubts.update({g.name: f"unconfirmed: {g.detection.doubted[g.name]}" for g in groundings
                       if g.name is not None and g.name in g.detection.doubted})
        return PerceptionResult(stamp, dict(self.tracks), missing, unexplained, groundings, drift, plane, doubts)

    def _near_spot(self, name: str, detection: Detection) -> bool:
        """The segment stands where the identity is expected (its track, else its layout spot)."""
        track = self.tracks.get(name)
        spot = track.position[:2] if track is not None else np.asarray(self.models[name].nominal_xy)
        return bool(np.linalg.norm(detection.xy() - spot) < DOUBT_NEAR_M)

    def _negative_evidence_applies(self, name: str) -> bool:
        """Labels lie under things and a bowl's floor is below the table threshold: no table-means-absent."""
        model = self.models[name]
        return not model.flat and model.shape != "bowl"

    @staticmethod
    def _colour_code(model: IdentityModel) -> int:
        """A label's or a bowl's colour class code: their pixels in the table plane (a label; a bowl's floor,
        below the foreground threshold) count as seen by colour (``silhouette.evidence``'s ``flat_code``)."""
        return COLOUR_CLASSES.index(model.colour) + 1 if model.flat or model.shape == "bowl" else 0

    def _colour_only(self, g: Grounding, model: IdentityModel, track: Track | None, position: np.ndarray,
                     yaw: float) -> tuple[np.ndarray, float, float, bool]:
        """Without depth no height is seen: the resting pose depth last confirmed is kept (at its confidence) while
        the blob covers its silhouette; anything else (a lifted pose, the blob on the resting plane) is published
        at ``COLOUR_ONLY_CAP``. The last value: whether the pose returned is one depth located (the kept one)."""
        if (track is not None and track.depth_located and track.seen_confidence > doubt.COLOUR_ONLY_CAP
                and self._resting(track.position, model, None)):
            outline = outline_points(model.primitive, track.position, track.yaw if model.has_yaw else 0.0)
            found = None if outline is None else silhouette(self.camera, outline)
            if (found is not None and blob_iou(found, g.detection.pixels, self.camera.width) >= doubt.COLOUR_ONLY_IOU
                    and self._blob_shift_m(found, g.detection.pixels, track.position) <= doubt.COLOUR_ONLY_SHIFT_M):
                return track.position.copy(), track.yaw, min(g.confidence, track.seen_confidence,
                                                             doubt.COLOUR_ONLY_KEPT_CAP), True
        return position, yaw, min(g.confidence, doubt.COLOUR_ONLY_CAP), False

    def _blob_shift_m(self, expected: tuple[tuple[int, int, int, int], np.ndarray], pixels: np.ndarray,
                      at: np.ndarray) -> float:
        """How far (m, at the pose's depth) the blob's centre lies from the centre of the silhouette expected at
        ``at`` (``silhouette``'s box and mask): an overlap ratio hides a 2 cm shift of a large object (a bowl),
        a centre does not."""
        (u0, v0, _, _), mask = expected
        rows, cols = np.nonzero(mask)
        if rows.size == 0 or len(pixels) == 0:
            return float("inf")
        blob_rows, blob_cols = np.divmod(np.asarray(pixels), self.camera.width)
        du = float(np.mean(blob_cols)) - (float(np.mean(cols)) + u0)
        dv = float(np.mean(blob_rows)) - (float(np.mean(rows)) + v0)
        depth = float(self.camera.project(np.asarray(at, dtype=float).reshape(1, 3))[0, 2])
        return float(np.hypot(du, dv)) * depth / float(self.camera.k[0, 0])

    def _measured_confidence(self, g: Grounding, track: Track | None) -> float:
        """p_identity · q_fit · s_support (``confidence.py``); flat patches and RGB-only blobs: p_identity."""
        detection = g.detection
        if detection.kind != "solid":
            return g.confidence
        fit = detection.refined.get(self.models[g.name or ""].primitive.key)
        quality = 1.0 if fit is None else fit_quality(fit.robust_loss(tau(detection)))
        shown = 1.0
        if track is not None and track.reference_pixels > 0:
            shown = detection.pixel_count / track.reference_pixels
        return g.confidence * quality * support(shown)

    @staticmethod
    def _resting(position: np.ndarray, model: IdentityModel, plane: Plane | None) -> bool:
        """Where the layout rests the identity, or standing on the table (within ``RESTING_TOLERANCE_M``)."""
        z = float(position[2])
        if abs(z - resting_centre_z(model, plane, position)) < RESTING_TOLERANCE_M:
            return True
        table = TABLE_TOP_Z if plane is None else plane.height_at_xy(float(position[0]), float(position[1]))
        return z - (table + model.table_centre_height) < RESTING_TOLERANCE_M

    def _reuse_shape_fits(self, detections: list[Detection]) -> None:
        """A segment unchanged since the last frame (same colour, same place, same size) keeps its shape fits.

        Which shape a still segment is does not change from frame to frame; its pose is still refined
        on this frame's points (``estimate_pose``). Saves most of the fitting while the arm moves elsewhere.
        """
        for detection in detections:
            if detection.kind != "solid":
                continue
            for old in self._previous:
                if (old.colour == detection.colour
                        and abs(old.centroid_uv[0] - detection.centroid_uv[0]) < REUSE_PX
                        and abs(old.centroid_uv[1] - detection.centroid_uv[1]) < REUSE_PX
                        and abs(old.pixel_count - detection.pixel_count) <= REUSE_SHARE * old.pixel_count):
                    detection.fits = dict(old.fits)
                    detection.refined = dict(old.refined)
                    break

    def _observe(self, name: str, position: np.ndarray, yaw: float, confidence: float, stamp: float,
                 standing: bool = False, jumped: bool = False, depth_located: bool = True,
                 lifted: bool = False) -> None:
        track = self.tracks.get(name)
        far = float(np.linalg.norm(position[:2] - np.asarray(self.models[name].nominal_xy))) > FIRST_SEEN_M
        before = None if track is None else track.unconfirmed
        # First seen away from its layout spot (every object starts on it): unconfirmed until seen on its spot,
        # another object of its colour is as likely.
        unconfirmed = None
        if far and (track is None or before == FOUND_FAR):
            unconfirmed = FOUND_FAR
        elif (track is None and lifted) or (before == FOUND_LIFTED and not standing):
            # Every object starts resting: a first sighting in the air (a fragment of flying depth and a colour
            # fringe at an arm's edge, 12 cm up, named a bowl) is unconfirmed until it is seen standing.
            unconfirmed = FOUND_LIFTED
        elif jumped or (before == JUMPED and not standing):
            unconfirmed = JUMPED
        if unconfirmed is not None:
            confidence = min(confidence, doubt.UNCONFIRMED_CAP)
        # A depth measurement never averages with a pose colour alone placed (it jumps, as a move does).
        if (track is None or np.linalg.norm(position - track.position) > self.jump_m
                or track.depth_located != depth_located):
            reference = 0.0 if track is None else track.reference_pixels
            self.tracks[name] = Track(name, position, yaw, confidence, stamp, confidence, reference_pixels=reference,
                                      unconfirmed=unconfirmed, depth_located=depth_located)
            return
        track.unconfirmed = unconfirmed
        a = self.smoothing
        track.position = a * position + (1 - a) * track.position
        track.yaw = yaw
        track.confidence = track.seen_confidence = confidence
        track.last_seen, track.age_s, track.visible = stamp, 0.0, True
