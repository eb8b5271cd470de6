"""Is the table set up as the trial's layout says? What perception sees against the layout's resting poses.

On the rig a person places the objects, and every score after that comes from perception, so a trial
must not start from a table that differs from the layout the sim evaluation starts from: an object
1.5 cm off changes a grasp, a missing one makes a task impossible, an extra one is an obstacle the
policy was never scored with. This compares, ROS-free, the poses perception reports with
``rig.layout_poses`` and says what is wrong in words an operator can act on: which object, which way,
how far (``+x`` is the robot's right, ``+y`` away from the robot: the RoboTwin table frame).

Yaw is compared only for shapes whose yaw changes the task (``yaw_shapes``, default the Scene 3 bars,
``box``: their end yaw is scored by ``scoring.scene3`` against a target yaw, so a bar that starts
turned starts a different task), modulo the shape's own symmetry (a box is the same after a half turn,
a cube after a quarter turn). Spheres, cylinders and bowls look the same at every yaw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.contract import MIN_POSE_CONFIDENCE
from robofollow_ros.rig.layout_poses import RestPose, layout_rest_poses

#: Defaults of the trial manager's parameters (docs/ros.md, "Reset verification").
DEFAULT_TOLERANCE_M = 0.015
DEFAULT_YAW_TOLERANCE_DEG = 10.0
DEFAULT_YAW_SHAPES = ("box",)
#: A pose reported with less confidence than this (or not currently visible) does not show an object present.
DEFAULT_MIN_CONFIDENCE = MIN_POSE_CONFIDENCE
#: The turn after which a shape looks the same (rad); shapes not listed look the same at every yaw.
SYMMETRY_RAD = {"box": math.pi, "cube": math.pi / 2}

OK = "ok"
MISPLACED = "misplaced"
MISSING = "missing"
#: Seen, but not confidently, or perception refused the name to what stands there (a look-alike).
UNCONFIRMED = "unconfirmed"


@dataclass(frozen=True)
class Seen:
    """One object as perception reports it: position (world, m), quaternion (w, x, y, z), and how sure."""

    position: Sequence[float]
    quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0)
    confidence: float = 1.0
    visible: bool = True


@dataclass(frozen=True)
class ObjectCheck:
    name: str
    status: str  # OK, MISPLACED or MISSING
    expected: tuple[float, float, float]
    expected_yaw: float
    seen: tuple[float, float, float] | None = None
    seen_yaw: float | None = None
    distance_m: float | None = None
    yaw_error_deg: float | None = None  # None where yaw does not matter
    doubt: str = ""  # UNCONFIRMED: why perception cannot confirm it

    @property
    def correction(self) -> tuple[float, float, float] | None:
        """Where to move it: expected − seen (m)."""
        if self.seen is None:
            return None
        return (self.expected[0] - self.seen[0], self.expected[1] - self.seen[1], self.expected[2] - self.seen[2])

    def line(self) -> str:
        """What the operator must do with this object, in one line (empty when it is in place)."""
        x, y, _ = self.expected
        where = f"x {x:+.3f} y {y:+.3f} m"
        if self.status == MISSING:
            return f"{self.name}: not seen on the table; place it at {where}"
        if self.status == UNCONFIRMED:
            return f"cannot confirm {self.name}: {self.doubt}; check it is the right object at {where}"
        if self.status == OK:
            return ""
        moves = []
        dx, dy, dz = self.correction or (0.0, 0.0, 0.0)
        if abs(dx) >= 0.002:
            moves.append(f"{abs(dx) * 100:.1f} cm {'right (+x)' if dx > 0 else 'left (-x)'}")
        if abs(dy) >= 0.002:
            moves.append(f"{abs(dy) * 100:.1f} cm {'away from the robot (+y)' if dy > 0 else 'toward the robot (-y)'}")
        if abs(dz) >= 0.005:
            moves.append(f"{abs(dz) * 100:.1f} cm {'up' if dz > 0 else 'down'}")
        words = [f"{self.name}: {(self.distance_m or 0.0) * 100:.1f} cm off"]
        if moves:
            words.append(f"move it {' and '.join(moves)} to {where}")
        if self.yaw_error_deg is not None and self.seen_yaw is not None and abs(self.yaw_error_deg) > 0.0:
            turn = "counter-clockwise" if self.yaw_error_deg > 0 else "clockwise"
            words.append(f"turn it {abs(self.yaw_error_deg):.0f} deg {turn} seen from above")
        return "; ".join(words)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status,
                               "expected": [round(v, 4) for v in self.expected]}
        if self.seen is not None:
            out["seen"] = [round(v, 4) for v in self.seen]
            out["distance_m"] = round(float(self.distance_m or 0.0), 4)
        if self.yaw_error_deg is not None:
            out["yaw_error_deg"] = round(self.yaw_error_deg, 2)
        if self.doubt:
            out["doubt"] = self.doubt
        return out


@dataclass(frozen=True)
class Extra:
    """Something on the table the layout does not have: a named object of another layout, or a blob."""

    what: str
    position: tuple[float, float, float] | None

    def line(self) -> str:
        if self.position is None:
            return f"{self.what}: not in this layout; take it off the table"
        x, y, _ = self.position
        return f"{self.what} at x {x:+.3f} y {y:+.3f} m: not in this layout; take it off the table"


@dataclass(frozen=True)
class ResetReport:
    objects: tuple[ObjectCheck, ...]
    extra: tuple[Extra, ...] = ()
    tolerance_m: float = DEFAULT_TOLERANCE_M
    yaw_tolerance_deg: float = DEFAULT_YAW_TOLERANCE_DEG

    @property
    def ok(self) -> bool:
        return not self.extra and all(o.status == OK for o in self.objects)

    @property
    def wrong(self) -> tuple[ObjectCheck, ...]:
        return tuple(o for o in self.objects if o.status != OK)

    def lines(self) -> list[str]:
        """One line per object to move, place or take away (empty when the table is right)."""
        return [o.line() for o in self.wrong] + [e.line() for e in self.extra]

    def summary(self) -> str:
        if self.ok:
            return "every object in place"
        parts = [f"{o.name} {o.status}" for o in self.wrong] + [f"{e.what} extra" for e in self.extra]
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "tolerance_m": self.tolerance_m, "yaw_tolerance_deg": self.yaw_tolerance_deg,
                "misplaced": [o.name for o in self.wrong if o.status == MISPLACED],
                "missing": [o.name for o in self.wrong if o.status == MISSING],
                "unconfirmed": [o.name for o in self.wrong if o.status == UNCONFIRMED],
                "extra": [e.what for e in self.extra], "objects": [o.as_dict() for o in self.objects]}


def _xyz(values: Any) -> tuple[float, float, float]:
    x, y, z = (float(v) for v in values)
    return x, y, z


def yaw_of(q: Sequence[float]) -> float:
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_error(seen: float, expected: float, period: float) -> float:
    """Signed turn (rad) that brings ``seen`` to ``expected``, the shortest modulo ``period``."""
    return (expected - seen + period / 2) % period - period / 2


def check_reset(layout: Layout, expected: Mapping[str, RestPose], seen: Mapping[str, Seen],
                tolerance_m: float = DEFAULT_TOLERANCE_M, yaw_tolerance_deg: float = DEFAULT_YAW_TOLERANCE_DEG,
                yaw_shapes: Sequence[str] = DEFAULT_YAW_SHAPES, min_confidence: float = DEFAULT_MIN_CONFIDENCE,
                blobs: Sequence[tuple[str, Sequence[float] | None]] = (),
                doubts: Mapping[str, str] | None = None) -> ResetReport:
    """Compare what is ``seen`` with the ``expected`` resting poses; ``blobs``: things seen that match no
    object (perception's ``unexplained``: a colour and a position); ``doubts``: per name, why perception
    refused that name to a segment (``perception/doubt.py``: a look-alike of the wrong size or shape).

    An object passes only when seen with confidence: one seen at lower confidence, or not named because
    what stands there is not its shape, is *unconfirmed* and blocks the reset with a line naming it."""
    checks = []
    doubts = doubts or {}
    for spec in layout.objects:
        pose = expected[spec.name]
        target = _xyz(pose.position)
        got = seen.get(spec.name)
        if got is None or not got.visible or got.confidence < min_confidence:
            doubt = doubts.get(spec.name, "")
            if not doubt and got is not None and got.visible:
                doubt = f"seen at confidence {got.confidence:.2f} (below {min_confidence:.2f})"
            checks.append(ObjectCheck(spec.name, UNCONFIRMED if doubt else MISSING, target, pose.yaw,
                                      doubt=doubt))
            continue
        position = _xyz(got.position)
        distance = float(np.linalg.norm(np.subtract(target, position)))
        seen_yaw = yaw_of(got.quat_wxyz)
        yaw_err = None
        if spec.shape in yaw_shapes:
            yaw_err = math.degrees(yaw_error(seen_yaw, pose.yaw, SYMMETRY_RAD.get(spec.shape, 2 * math.pi)))
        bad = distance > tolerance_m or (yaw_err is not None and abs(yaw_err) > yaw_tolerance_deg)
        checks.append(ObjectCheck(spec.name, MISPLACED if bad else OK, target, pose.yaw, position, seen_yaw, distance,
                                  yaw_err))
    names = set(layout.names)
    extra = [Extra(name, _xyz(s.position)) for name, s in sorted(seen.items())
             if name not in names and s.visible and s.confidence >= min_confidence]
    extra += [Extra(f"unknown {colour} object", None if p is None else _xyz(p)) for colour, p in blobs]
    return ResetReport(tuple(checks), tuple(extra), tolerance_m, yaw_tolerance_deg)


def expected_poses(layout: Layout, seed: int) -> dict[str, RestPose]:
    """The layout's resting poses for ``seed`` (what the operator is shown, what the sim starts from)."""
    return layout_rest_poses(layout, seed)


class ResetBlockers:
    """Every object that kept one trial's reset from passing, and how far off it was at worst.

    The reset record in results.json is the report that finally passed (or was overridden); this keeps
    what blocked it before, so a reset held for 12 s by a displaced bar says so."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, Any]] = {}

    def fold(self, report: ResetReport, waited_s: float) -> None:
        for check in report.wrong:
            entry = self._by_name.setdefault(check.name, {"name": check.name, "status": check.status,
                                                          "first_s": round(waited_s, 3), "looks": 0})
            entry["looks"] += 1
            entry["status"] = check.status
            entry["last_s"] = round(waited_s, 3)
            entry["line"] = check.line()
            if check.distance_m is not None:
                entry["max_distance_m"] = round(max(entry.get("max_distance_m", 0.0), check.distance_m), 4)
        for extra in report.extra:
            entry = self._by_name.setdefault(extra.what, {"name": extra.what, "status": "extra",
                                                          "first_s": round(waited_s, 3), "looks": 0})
            entry["looks"] += 1
            entry["last_s"] = round(waited_s, 3)
            entry["line"] = extra.line()

    def as_list(self) -> list[dict[str, Any]]:
        return list(self._by_name.values())
