"""A bowl from primitive convex pieces, standing in for RoboTwin's ``002_bowl`` mesh (not available).

Dimensions scale with the layout's bowl ``scale`` (0.6 / 0.7 / 0.8 in the spec). The outer radius
0.06 × scale keeps Scene 2's two bowls (0.09 m apart, scales 0.6 and 0.8) 6 mm apart, and the
height 0.05 × scale leaves ≥ 12 mm of Scene 4's in-bowl cube above the rim, as the spec requires.
The bowl's pose origin sits 0.02 m above its bottom, so a bowl resting on the table is at
z = 0.76, the spec's spawn height.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Figures of a scale-1 bowl (metres); every one scales linearly except the wall count.
OUTER_RADIUS = 0.06
HEIGHT = 0.05
WALL_THICKNESS = 0.005
BASE_THICKNESS = 0.004
WALL_PIECES = 16
#: Height of the pose origin above the bowl's bottom (unscaled: keeps the spec's z = 0.76).
ORIGIN_ABOVE_BOTTOM = 0.02
#: The "in bowl" test of the scorer (spec section d): XY ≤ 0.04 and z ≤ bowl z + 0.06.
IN_BOWL_XY = 0.04
IN_BOWL_DZ = 0.06


@dataclass(frozen=True)
class BowlPiece:
    half_size: tuple[float, float, float]
    position: tuple[float, float, float]  # in the bowl frame (origin ORIGIN_ABOVE_BOTTOM above the bottom)
    yaw: float


@dataclass(frozen=True)
class BowlGeometry:
    scale: float

    @property
    def outer_radius(self) -> float:
        return OUTER_RADIUS * self.scale

    @property
    def inner_radius(self) -> float:
        return self.outer_radius - WALL_THICKNESS

    @property
    def height(self) -> float:
        return HEIGHT * self.scale

    @property
    def floor_z(self) -> float:
        """Top of the base disc, relative to the pose origin."""
        return BASE_THICKNESS - ORIGIN_ABOVE_BOTTOM

    @property
    def rim_z(self) -> float:
        """Top of the wall, relative to the pose origin."""
        return self.height - ORIGIN_ABOVE_BOTTOM

    def base_piece(self) -> tuple[float, float, float]:
        """(radius, half thickness, centre z) of the base disc, a cylinder standing along z."""
        return self.inner_radius + WALL_THICKNESS / 2, BASE_THICKNESS / 2, BASE_THICKNESS / 2 - ORIGIN_ABOVE_BOTTOM

    def wall_pieces(self) -> list[BowlPiece]:
        """Boxes around the rim, each tangent to the circle, overlapping their neighbours slightly."""
        radius = self.outer_radius - WALL_THICKNESS / 2
        half_length = radius * math.tan(math.pi / WALL_PIECES) + WALL_THICKNESS / 2
        half_height = (self.height - BASE_THICKNESS) / 2
        centre_z = BASE_THICKNESS + half_height - ORIGIN_ABOVE_BOTTOM
        out = []
        for i in range(WALL_PIECES):
            angle = 2 * math.pi * i / WALL_PIECES
            out.append(BowlPiece((WALL_THICKNESS / 2, half_length, half_height),
                                 (radius * math.cos(angle), radius * math.sin(angle), centre_z), angle))
        return out

    def volume(self) -> float:
        base_r, base_half, _ = self.base_piece()
        walls = sum(8 * p.half_size[0] * p.half_size[1] * p.half_size[2] for p in self.wall_pieces())
        return math.pi * base_r**2 * 2 * base_half + walls


def is_in_bowl(object_xyz: np.ndarray | list[float], bowl_xyz: np.ndarray | list[float]) -> bool:
    """The scorer's "in bowl" test: horizontal distance ≤ 0.04 and z ≤ bowl z + 0.06."""
    obj = np.asarray(object_xyz, dtype=np.float64)
    bowl = np.asarray(bowl_xyz, dtype=np.float64)
    return bool(np.hypot(*(obj[:2] - bowl[:2])) <= IN_BOWL_XY and obj[2] <= bowl[2] + IN_BOWL_DZ)
