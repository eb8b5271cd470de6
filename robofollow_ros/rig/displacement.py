"""One object left off its place on purpose: the ``displace_object`` drill of the mock and the sim.

The reset check (``rig.reset_check``) exists for a person who leaves an object 4 cm from where the layout
puts it; to dry-run the operator's loop (and to test it) without a person, ``mock_hardware_node`` and
``sim_node`` take the same parameter, settable while they run:
``{"object": NAME, "dx": M, "dy": M, "dyaw_deg": DEG}`` (world frame: ``+x`` the robot's right, ``+y``
away from the robot; the turn counter-clockwise seen from above), empty for every object in place. The
mock reports the object moved; the sim moves the body itself. ROS-free, so both nodes share one reading.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The parameter's shape, as its refusals quote it.
SHAPE = '{"object": NAME, "dx": M, "dy": M, "dyaw_deg": DEG}'


@dataclass(frozen=True)
class Displacement:
    object: str
    dx: float = 0.0
    dy: float = 0.0
    dyaw_deg: float = 0.0

    def apply(self, position: Any, quat_wxyz: Any) -> tuple[np.ndarray, np.ndarray]:
        """``position``/``quat_wxyz`` moved by (dx, dy) and turned by dyaw_deg about the world's z."""
        shifted = np.asarray(position, dtype=float) + np.array([self.dx, self.dy, 0.0])
        half = math.radians(self.dyaw_deg) / 2
        w1, z1 = math.cos(half), math.sin(half)  # a turn about z: (w1, 0, 0, z1)
        w2, x2, y2, z2 = (float(v) for v in quat_wxyz)
        turned = np.array([w1 * w2 - z1 * z2, w1 * x2 - z1 * y2, w1 * y2 + z1 * x2, w1 * z2 + z1 * w2])
        return shifted, turned


def displacement_error(value: Any) -> str | None:
    """Why ``value`` is not a ``displace_object`` value (None: it is one; empty is)."""
    if value == "":
        return None
    try:
        move = json.loads(value)
    except (TypeError, json.JSONDecodeError) as exc:
        return f"must be a JSON object or empty ({exc})"
    if not isinstance(move, dict) or not isinstance(move.get("object"), str):
        return f"must be {SHAPE}"
    unknown = sorted(set(move) - {"object", "dx", "dy", "dyaw_deg"})
    if unknown:
        return f"unknown field {unknown[0]!r} (expected {SHAPE})"
    if not all(isinstance(move.get(k, 0.0), int | float) and not isinstance(move.get(k, 0.0), bool)
               for k in ("dx", "dy", "dyaw_deg")):
        return "dx, dy and dyaw_deg must be numbers"
    return None


def parse_displacement(value: str) -> Displacement | None:
    """A checked ``displace_object`` value (``displacement_error`` is None) as a Displacement; empty: None."""
    if not value:
        return None
    move = json.loads(value)
    return Displacement(str(move["object"]), float(move.get("dx", 0.0)), float(move.get("dy", 0.0)),
                        float(move.get("dyaw_deg", 0.0)))
