"""Tracking named objects over frames: smoothing, memory through occlusion, and what is missing.

``Perception.update(rgb, depth, stamp)`` runs detection → grounding → pose and folds the result into
one track per identity. A track not seen this frame keeps its last pose; its ``age_s`` grows and its
confidence halves every ``half_life_s`` (a gripper hiding a block does not make the block vanish).
A seen track is smoothed by an exponential average while it stays put and jumps to the measurement
when it moves more than ``jump_m`` (an object being carried must not lag). Lifted objects need no
special case: their position comes from depth, and continuity keeps their name. A resting object seen
only in part where it was (the gripper in front of or over it: blob much narrower than the object)
counts as seen but keeps its pose: its cut outline would move the estimated centre.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.detector import BlobDetector, Detection
from robofollow_ros.perception.estimate import estimate_position, estimate_yaw, yaw_quat_wxyz
from robofollow_ros.perception.grounding import Grounding, ground, is_partly_hidden
from robofollow_ros.perception.identities import IdentityModel, identity_models

#: A cut blob within this distance (xy) of its track is the same object, still lying where it was.
PARTIAL_NEAR_M = 0.03


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

    @property
    def quat_wxyz(self) -> tuple[float, float, float, float]:
        return yaw_quat_wxyz(self.yaw)


@dataclass
class PerceptionResult:
    """One frame's answer: tracked objects, never-seen identities, and blobs no identity explains."""

    stamp: float
    tracks: dict[str, Track]
    missing: list[str]
    unexplained: list[Detection]
    groundings: list[Grounding] = field(default_factory=list)

    def positions(self) -> dict[str, list[float]]:
        return {name: [float(v) for v in t.position] for name, t in self.tracks.items()}


class Perception:
    """Detector + grounding + tracker for one camera and one layout (``reset`` for the next trial)."""

    def __init__(self, camera: CameraModel, layout: Layout | None = None, smoothing: float = 0.5,
                 jump_m: float = 0.01, half_life_s: float = 2.0, min_pixels: int = 25) -> None:
        if not 0.0 < smoothing <= 1.0:
            raise ValueError(f"smoothing: expected a weight in (0, 1], got {smoothing}")
        if half_life_s <= 0:
            raise ValueError(f"half_life_s: must be positive, got {half_life_s}")
        self.camera = camera
        self.detector = BlobDetector(camera, min_pixels=min_pixels)
        self.smoothing = smoothing
        self.jump_m = jump_m
        self.half_life_s = half_life_s
        self.models: dict[str, IdentityModel] = {}
        self.tracks: dict[str, Track] = {}
        if layout is not None:
            self.reset(layout)

    def reset(self, layout: Layout) -> None:
        """Forget all tracks and expect this layout's identities."""
        self.models = {m.name: m for m in identity_models(layout)}
        self.tracks = {}

    def update(self, rgb: np.ndarray, depth: np.ndarray | None, stamp: float) -> PerceptionResult:
        if not self.models:
            raise RuntimeError("Perception: call reset(layout) before update")
        detections = self.detector.detect(rgb, depth)
        track_xy = {name: t.position[:2] for name, t in self.tracks.items()}
        groundings = ground(detections, list(self.models.values()), track_xy)
        seen = set()
        for g in groundings:
            if g.name is None:
                continue
            model = self.models[g.name]
            yaw = estimate_yaw(g.detection, model)
            position = estimate_position(g.detection, model, self.camera, yaw)
            if position is None:
                continue
            track = self.tracks.get(g.name)
            raw = g.detection.raw_position()
            if (track is not None and raw is not None and is_partly_hidden(g.detection, model)
                    and np.linalg.norm(raw[:2] - track.position[:2]) < PARTIAL_NEAR_M):
                # Seen where it was, but cut (much narrower than it is): the shape-based centre would be off.
                position, yaw = track.position.copy(), track.yaw
            self._observe(g.name, position, yaw, g.confidence, stamp)
            seen.add(g.name)
        for name, track in self.tracks.items():
            if name not in seen:
                track.visible = False
                track.age_s = max(0.0, stamp - track.last_seen)
                track.confidence = track.seen_confidence * 0.5 ** (track.age_s / self.half_life_s)
        missing = [name for name in self.models if name not in self.tracks]
        unexplained = [g.detection for g in groundings if g.name is None]
        return PerceptionResult(stamp, dict(self.tracks), missing, unexplained, groundings)

    def _observe(self, name: str, position: np.ndarray, yaw: float, confidence: float, stamp: float) -> None:
        track = self.tracks.get(name)
        if track is None or np.linalg.norm(position - track.position) > self.jump_m:
            self.tracks[name] = Track(name, position, yaw, confidence, stamp, confidence)
            return
        a = self.smoothing
        track.position = a * position + (1 - a) * track.position
        track.yaw = yaw
        track.confidence = track.seen_confidence = confidence
        track.last_seen, track.age_s, track.visible = stamp, 0.0, True
