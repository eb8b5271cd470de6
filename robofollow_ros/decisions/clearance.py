"""Room for the gripper: which objects the fingers or the palm would land on, grasping, releasing or pushing.

Geometry in the table frame, heights above the table top. An object is a ``Body``: its footprint (a disc
for spheres, cylinders and bowls; a box along the table axes for cubes, bars and labels, or the disc
around it once a push may have turned it) and the height of its top. The gripper parts are the rig's
(``gripper.Gripper``, from the rig YAML's ``gripper_geometry``); a top-down grasp or release has the fingers
opening along the table's x axis (every anchor object stands at yaw 0, and the oracle turns the fingers to the
object's yaw), the fingers open to the oracle's pre-grasp width and the TCP at the oracle's grasp height.
While the hand comes straight down to that pose every part sweeps the column above it, so a part is blocked
by every object whose footprint overlaps the part's and whose top is above the part's lowest point (the
palm's is ``palm_above_tcp`` above the TCP: 0 on the built-in rig, 3.7 cm on the ALOHA, whose fingers hang
below a bar 15 cm wide).

A push (the oracle's): the closed fingers start behind the object on the line to the target, come down to
``PUSH_TCP_M`` and slide along that line for the stroke; the swept fingers and palm must clear everything
but the pushed object.

Used by the world model (``world``) as preconditions; a catalog whose orders would put the gripper on an
object is never built, so an executed decision never asks SAPIEN (or the rig) to grasp through a neighbour.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from robofollow_ros.decisions.gripper import Gripper, grasp_tcp_height

#: the oracle's push: TCP height above the table while sliding, and the start behind the object's back face
PUSH_TCP_M = 0.052
PUSH_BEHIND_M = 0.022


@dataclass(frozen=True)
class Body:
    name: str
    xy: tuple[float, float]
    half: tuple[float, float]  # footprint half sizes along x and y (a disc: its radius twice)
    round: bool
    top: float

    def as_disc(self) -> Body:
        """The disc around the footprint: where a push may have turned a box, that is all one can say."""
        if self.round:
            return self
        r = math.hypot(*self.half)
        return Body(self.name, self.xy, (r, r), True, self.top)


@dataclass(frozen=True)
class Part:
    """One gripper part's footprint: a rectangle centred at ``xy``, ``half`` along (u, v), u at angle ``yaw``."""

    what: str
    xy: tuple[float, float]
    half: tuple[float, float]
    yaw: float
    bottom: float


def _gap(part: Part, body: Body) -> float:
    """Distance between the part's rectangle and the body's footprint (<= 0: they overlap)."""
    c, s = math.cos(part.yaw), math.sin(part.yaw)
    dx, dy = body.xy[0] - part.xy[0], body.xy[1] - part.xy[1]
    u, v = c * dx + s * dy, -s * dx + c * dy
    if body.round or abs(s) > 1e-9:  # a box turned against the part counts as the disc around it
        r = body.half[0] if body.round else math.hypot(*body.half)
        return math.hypot(max(abs(u) - part.half[0], 0.0), max(abs(v) - part.half[1], 0.0)) - r
    gu = abs(u) - part.half[0] - body.half[0]
    gv = abs(v) - part.half[1] - body.half[1]
    return math.hypot(max(gu, 0.0), max(gv, 0.0)) if max(gu, gv) > 0 else max(gu, gv)


def blockers(parts: Iterable[Part], others: Iterable[Body]) -> list[str]:
    """'<object> (under the <part>)' for every object a part would land on or sweep into."""
    out = []
    reach = [(p, math.hypot(*p.half)) for p in parts]
    for body in others:
        # Shapes whose circumscribed circles are apart cannot overlap: only the others need the exact gap (the
        # OWDA generator asks millions of times a suite). The 1e-6 m margin keeps every rounding case exact.
        far = (body.half[0] if body.round else math.hypot(*body.half)) + 1e-6
        hit = next((p.what for p, r in reach if body.top > p.bottom
                    and math.hypot(body.xy[0] - p.xy[0], body.xy[1] - p.xy[1]) < r + far and _gap(p, body) < 0.0),
                   None)
        if hit is not None:
            out.append(f"{body.name!r} (under the {hit})")
    return out


def hand_at(gripper: Gripper, xy: tuple[float, float], half_width: float, top: float) -> list[Part]:
    """The open fingers and the palm of a top-down grasp (or release) of an object whose top is ``top`` at ``xy``."""
    g = gripper.geometry
    tcp = grasp_tcp_height(top)
    centre = gripper.inner_face(gripper.grasp_opening(half_width)) + g.finger_thickness / 2
    finger = gripper.finger_half
    return [Part("left finger", (xy[0] - centre, xy[1]), finger, 0.0, tcp - g.finger_below_tcp),
            Part("right finger", (xy[0] + centre, xy[1]), finger, 0.0, tcp - g.finger_below_tcp),
            Part("palm", xy, gripper.palm_half, 0.0, tcp + g.palm_above_tcp)]


def push_sweep(gripper: Gripper, start: tuple[float, float], direction: tuple[float, float],
               stroke: float) -> list[Part]:
    """The closed fingers and the palm, swept from the push's start along ``direction`` for ``stroke`` metres."""
    g = gripper.geometry
    yaw = math.atan2(direction[1], direction[0])
    mid = (start[0] + direction[0] * stroke / 2, start[1] + direction[1] * stroke / 2)
    return [Part("closed fingers", mid, (stroke / 2 + gripper.closed_fingers_half, g.finger_half_across), yaw,
                 PUSH_TCP_M - g.finger_below_tcp),
            Part("palm", mid, (stroke / 2 + g.palm_half_along, g.palm_half_across), yaw, PUSH_TCP_M + g.palm_above_tcp)]
