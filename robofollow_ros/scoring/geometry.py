"""Small geometric tests the rules share, on plain float tuples (no NumPy: per-frame speed)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from robofollow_ros.scoring.frame import Quat, Vec3
from robofollow_ros.scoring.thresholds import (
    OPERATION_AREA_X,
    OPERATION_AREA_Y,
    OPERATION_AREA_Z,
    SUPPORT_MIN_DZ,
    SUPPORT_XY,
)


def xy_dist(a: Vec3, b: Vec3) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def dist3(a: Vec3, b: Vec3) -> float:
    return math.sqrt((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2 + (a[2] - b[2]) ** 2)


def nearest(point: Vec3, objects: Mapping[str, Vec3], candidates: Iterable[str], exclude: str | None = None
            ) -> tuple[str | None, float]:
    """The candidate nearest to ``point`` in XY and its distance (first listed wins a tie)."""
    best: str | None = None
    best_d = math.inf
    px, py = point[0], point[1]
    for name in candidates:
        if name == exclude:
            continue
        p = objects[name]
        d = math.hypot(p[0] - px, p[1] - py)
        if d < best_d:
            best, best_d = name, d
    return best, best_d


def support_under(source: str, objects: Mapping[str, Vec3], candidates: Iterable[str]) -> str | None:
    """Scene 4: the candidate directly under ``source`` (XY <= 0.02, source >= 0.005 higher), lowest gap."""
    src = objects[source]
    best: str | None = None
    best_gap = math.inf
    for name in candidates:
        if name == source:
            continue
        p = objects[name]
        gap = src[2] - p[2]
        if gap >= SUPPORT_MIN_DZ and math.hypot(src[0] - p[0], src[1] - p[1]) <= SUPPORT_XY and gap < best_gap:
            best, best_gap = name, gap
    return best


def in_operation_area(p: Vec3) -> bool:
    """Whether a point lies in the finish check's operation box (bounds inclusive)."""
    return (OPERATION_AREA_X[0] <= p[0] <= OPERATION_AREA_X[1]
            and OPERATION_AREA_Y[0] <= p[1] <= OPERATION_AREA_Y[1]
            and OPERATION_AREA_Z[0] <= p[2] <= OPERATION_AREA_Z[1])


def yaw_of(q: Quat) -> float:
    """Yaw of a (w, x, y, z) quaternion: atan2(2(wz + xy), 1 - 2(y^2 + z^2))."""
    w, x, y, z = q
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def axis_error(yaw: float, target: float) -> float:
    """Angle between a bar's axis and the target yaw, modulo 180 degrees (the axis is symmetric)."""
    err = (yaw - target) % math.pi
    return min(err, math.pi - err)
