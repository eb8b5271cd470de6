"""The arithmetic of the rules, done the way the official evaluator does it, bit for bit.

RoboFollow's evaluator measures distances with ``np.linalg.norm`` and projections with ``np.dot``,
which go through BLAS. On common x86 builds that is ``fma(a1, b1, a0 * b0)``, not
``a0 * b0 + a1 * b1``: the two differ in the last bit for about one pair in four, and a trajectory
that lands exactly on a threshold then gets a different verdict. So the rules here never
recompute those quantities in plain Python; :class:`Arith` hands the same numbers to the same
NumPy routine (``ndarray.dot`` on float64 vectors, which is what ``np.linalg.norm`` uses). Plain
subtractions, comparisons and ``abs`` are IEEE operations and match in Python.

Each rule set owns one :class:`Arith` (its small scratch vectors are not shared between threads).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from robofollow_ros.scoring.frame import Quat, Vec3
from robofollow_ros.scoring.thresholds import (
    OPERATION_AREA_X,
    OPERATION_AREA_Y,
    OPERATION_AREA_Z,
    SUPPORT_MIN_DZ,
    SUPPORT_XY,
)


class Arith:
    """``np.linalg.norm`` / ``np.dot`` of 2- and 3-vectors without allocating an array per call."""

    __slots__ = ("_a", "_a3", "_b")

    def __init__(self) -> None:
        self._a = np.empty(2)
        self._b = np.empty(2)
        self._a3 = np.empty(3)

    def dot2(self, ax: float, ay: float, bx: float, by: float) -> float:
        a, b = self._a, self._b
        a[0], a[1], b[0], b[1] = ax, ay, bx, by
        return float(a.dot(b))

    def norm2(self, x: float, y: float) -> float:
        """``np.linalg.norm([x, y])``."""
        a = self._a
        a[0], a[1] = x, y
        return math.sqrt(a.dot(a))

    def norm3(self, x: float, y: float, z: float) -> float:
        """``np.linalg.norm([x, y, z])``."""
        a = self._a3
        a[0], a[1], a[2] = x, y, z
        return math.sqrt(a.dot(a))

    def xy_dist(self, a: Vec3, b: Vec3) -> float:
        """The evaluator's ``_dist_xy``: ``norm(a[:2] - b[:2])``."""
        return self.norm2(a[0] - b[0], a[1] - b[1])

    def dist3(self, a: Vec3, b: Vec3) -> float:
        return self.norm3(a[0] - b[0], a[1] - b[1], a[2] - b[2])

    def cos_sim(self, vx: float, vy: float, wx: float, wy: float) -> float:
        """The evaluator's ``_cos_similarity_2d``: 0 when either vector is shorter than 1e-8."""
        n1 = self.norm2(vx, vy)
        n2 = self.norm2(wx, wy)
        if n1 < 1e-8 or n2 < 1e-8:
            return 0.0
        return self.dot2(vx, vy, wx, wy) / (n1 * n2)

    def nearest(self, point: Vec3, objects: Mapping[str, Vec3], candidates: Iterable[str],
                exclude: str | None = None) -> tuple[str | None, float | None]:
        """The candidate nearest to ``point`` in XY and its distance; the first listed wins a tie."""
        best: str | None = None
        best_d: float | None = None
        for name in candidates:
            if name == exclude:
                continue
            d = self.xy_dist(point, objects[name])
            if best_d is None or d < best_d:
                best, best_d = name, d
        return best, best_d

    def support_under(self, source: str, objects: Mapping[str, Vec3], candidates: Iterable[str]) -> str | None:
        """Scene 4: the candidate under ``source`` (XY <= 0.02, source >= 0.005 higher), smallest gap."""
        src = objects[source]
        best: str | None = None
        best_gap = math.inf
        for name in candidates:
            if name == source:
                continue
            p = objects[name]
            gap = src[2] - p[2]
            if self.xy_dist(src, p) <= SUPPORT_XY and gap >= SUPPORT_MIN_DZ and gap < best_gap:
                best, best_gap = name, gap
        return best


def in_operation_area(p: Vec3) -> bool:
    """Whether a point lies in the finish check's operation box (bounds inclusive)."""
    return (OPERATION_AREA_X[0] <= p[0] <= OPERATION_AREA_X[1]
            and OPERATION_AREA_Y[0] <= p[1] <= OPERATION_AREA_Y[1]
            and OPERATION_AREA_Z[0] <= p[2] <= OPERATION_AREA_Z[1])


def yaw_of(q: Quat) -> float:
    """Yaw of a (w, x, y, z) quaternion: ``np.arctan2(2(wz + xy), 1 - 2(y^2 + z^2))``."""
    w, x, y, z = q
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def _wrap_to_pi(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def axis_error(yaw: float, target: float) -> float:
    """Angle between a bar's axis and the target yaw; the axis is the same after a half turn."""
    return min(abs(_wrap_to_pi(yaw - c)) for c in (target, target + math.pi, target - math.pi))
