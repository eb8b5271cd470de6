"""Where to put an object so a Scene 1 spatial relation holds, with room around it.

The scorer accepts source − target within 0.12 m and inside a 45° cone around the relation's
direction (spec section d). The expert aims well inside (≈ 0.07 m, ≤ 30°) and, among such spots,
takes the one farthest from the other objects, so releasing does not knock a neighbour.
"""

from __future__ import annotations

import math

import numpy as np

from robofollow_ros.policy.expert.skills import SkillContext, half_width

RELATION_DIRECTION = {"place_left_of": (-1.0, 0.0), "place_beside": (1.0, 0.0),
                      "place_behind": (0.0, 1.0), "place_in_front": (0.0, -1.0)}
#: The reach checked by the simulator's tests; spots beyond are not offered.
REACH_X = (-0.25, 0.20)
REACH_Y = (-0.26, 0.03)
#: Enough clearance beyond both bodies for the open fingers.
WANTED_CLEARANCE = 0.03


def relation_spot(ctx: SkillContext, arm: str, source: str, target: str, action: str) -> tuple[float, float]:
    if action not in RELATION_DIRECTION:
        raise ValueError(f"action: {action!r} is not a Scene 1 relation ({', '.join(RELATION_DIRECTION)})")
    d = np.array(RELATION_DIRECTION[action])
    t = ctx.poses.position(target)[:2]
    src_r = half_width(ctx.spec(source))
    others = [(ctx.poses.position(o.name)[:2], half_width(o)) for o in ctx.layout.objects
              if o.role == "object" and o.name not in (source, target)]
    best: tuple[float, tuple[float, float]] | None = None
    for radius in (0.07, 0.065, 0.075, 0.08, 0.06, 0.085):
        for degrees in (0, 8, -8, 16, -16, 24, -24, 30, -30):
            a = math.radians(degrees)
            rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
            spot = t + radius * (rot @ d)
            if not (REACH_X[0] <= spot[0] <= REACH_X[1] and REACH_Y[0] <= spot[1] <= REACH_Y[1]):
                continue
            clearance = min((float(np.linalg.norm(spot - p)) - r - src_r for p, r in others), default=1.0)
            score = min(clearance, WANTED_CLEARANCE) - 0.0005 * abs(degrees) - 0.05 * abs(radius - 0.07)
            if best is None or score > best[0]:
                best = (score, (float(spot[0]), float(spot[1])))
    if best is None:
        raise ValueError(f"placement: no reachable spot {action} {target} at {t.tolist()}")
    return best[1]
