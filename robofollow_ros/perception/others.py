"""Objects that are not the layout's: a segment seen beside an identity is another object, whatever it looks like.

A look-alike identical to a layout object (a 4 cm red cube standing where a removed cylinder was, in a
layout whose ``small_red_cube`` is a 4 cm red cube too) passes every size and shape check; appearance
cannot tell them apart. Time can: while the real ``small_red_cube`` was seen (named, with depth) somewhere
else, this segment stood here, so it is *another* object: two segments seen at once are two objects.
``OtherObjects`` remembers every standing segment (colour, place, and the same-colour identities seen
elsewhere at the same time) for ``MEMORY_S`` after it was last seen; grounding then refuses those names to
a segment standing there (``OtherObjects.veto``), so when the real one disappears in the hand its name
does not jump onto the look-alike: the identity is not seen, and its kept pose loses confidence as any
hidden one does.

Only a concurrent sighting counts: an identity never seen elsewhere at the same time as the segment is
not barred (the segment may be that identity, refused for another reason on one frame).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.identities import IdentityModel


class Named(Protocol):
    """A segment and the name grounding gave it (``grounding.Grounding``; a protocol here, since grounding
    imports this module)."""

    @property
    def detection(self) -> Detection: ...

    @property
    def name(self) -> str | None: ...

#: A segment within this distance (m) of a remembered other object is that object.
NEAR_M = 0.03
#: A remembered other object is forgotten this long (s) after it was last seen.
MEMORY_S = 3.0


@dataclass
class Other:
    """One object of no layout name: its colour class, where it stands, when it was last seen, and the
    identities of its colour that were seen elsewhere while it was."""

    colour: str
    xy: np.ndarray
    last_seen: float
    not_names: set[str] = field(default_factory=set)


def _size(model: IdentityModel) -> float:
    """The identity's largest extent in the table plane (m)."""
    return max(model.width, 2 * model.half_depth)


class OtherObjects:
    """The memory of standing solid segments, and the naming veto it implies."""

    def __init__(self) -> None:
        self.others: list[Other] = []

    def reset(self) -> None:
        self.others = []

    def _at(self, colour: str, xy: np.ndarray) -> Other | None:
        near = [o for o in self.others if o.colour == colour and float(np.linalg.norm(o.xy - xy)) < NEAR_M]
        return min(near, key=lambda o: float(np.linalg.norm(o.xy - xy))) if near else None

    def veto(self, costs: np.ndarray, detections: Sequence[Detection], models: Sequence[IdentityModel]) -> None:
        """Make every (segment, identity) pair barred by a concurrent sighting impossible (cost ∞)."""
        for i, detection in enumerate(detections):
            if detection.kind != "solid" or not detection.has_depth:
                continue
            other = self._at(detection.colour, detection.xy())
            if other is None:
                continue
            for j, model in enumerate(models):
                if model.name in other.not_names and math.isfinite(costs[i, j]):
                    costs[i, j] = math.inf
                    detection.refused[model.name] = (f"another {detection.colour} object stands here "
                                                     f"(seen while {model.name} was elsewhere)")

    def update(self, groundings: Sequence[Named], lifted: Set[str], stamp: float,
               models: Mapping[str, IdentityModel]) -> None:
        """Fold one frame with depth in: every standing solid segment (unexplained, or named and not
        ``lifted``) is remembered with the same-colour identities named standing elsewhere in the frame (a
        lifted segment's name rests on weak shape evidence). Elsewhere
        means beyond the identity's own size (a bowl cut in two by an arm is one object, not two)."""
        named = [(g.name, g.detection) for g in groundings if g.name is not None and g.name not in lifted]
        for g in groundings:
            detection = g.detection
            if detection.kind != "solid" or not detection.has_depth or g.name in lifted:
                continue
            xy = detection.xy()
            other = self._at(detection.colour, xy)
            if other is None:
                other = Other(detection.colour, xy, stamp)
                self.others.append(other)
            other.xy, other.last_seen = xy, stamp
            other.not_names |= {name for name, seg in named if seg is not detection and seg.colour == detection.colour
                                and float(np.linalg.norm(seg.xy() - xy)) >= NEAR_M + _size(models[name])}
        self.others = [o for o in self.others if stamp - o.last_seen <= MEMORY_S]
