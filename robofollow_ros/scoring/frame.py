"""One recorded frame of a trial, and the validating reader of the trajectory JSON contract.

Frames hold plain tuples of floats, not NumPy arrays: the monitor touches a handful of numbers
per frame and small-array overhead would dominate its per-frame cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]


class TrajectoryError(ValueError):
    """Bad trajectory input; the message names the frame index and the field."""


@dataclass(frozen=True)
class Frame:
    """What the scorer sees after one executed action row, in the ``world`` frame.

    ``ee_*`` are the points the scene's rules use (Scene 1: fingertip proxy, else the TCP);
    grippers are normalised (1 open, 0 closed); ``object_quats`` (w, x, y, z) only where rules
    need them (Scene 3 bars). ``doubtful``: objects whose pose perception published this frame below
    ``contract.MIN_POSE_CONFIDENCE`` (the pose given is the last confident one); the monitor holds its
    verdict on such a frame (``StageMonitor.update``).
    """

    ee_left: Vec3
    ee_right: Vec3
    gripper_left: float
    gripper_right: float
    objects: Mapping[str, Vec3]
    object_quats: Mapping[str, Quat] = field(default_factory=dict)
    doubtful: frozenset[str] = frozenset()

    def ee(self, arm: str) -> Vec3:
        return self.ee_left if arm == "left" else self.ee_right

    def gripper(self, arm: str) -> float:
        return self.gripper_left if arm == "left" else self.gripper_right

    def to_dict(self) -> dict[str, Any]:
        """The trajectory-file form of this frame (inverse of :func:`frame_from_dict`)."""
        out: dict[str, Any] = {
            "ee_left": list(self.ee_left),
            "ee_right": list(self.ee_right),
            "gripper_left": self.gripper_left,
            "gripper_right": self.gripper_right,
            "objects": {k: list(v) for k, v in self.objects.items()},
        }
        if self.object_quats:
            out["object_quats"] = {k: list(v) for k, v in self.object_quats.items()}
        if self.doubtful:
            out["doubtful"] = sorted(self.doubtful)
        return out


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrajectoryError(f"{where}: expected a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise TrajectoryError(f"{where}: expected a finite number, got {value!r}")
    return out


def _vector(value: Any, length: int, where: str) -> tuple[float, ...]:
    if not isinstance(value, list | tuple):
        raise TrajectoryError(f"{where}: expected a list of {length} numbers, got {value!r}")
    if len(value) != length:
        raise TrajectoryError(f"{where}: expected {length} numbers, got {len(value)}")
    return tuple(_number(v, f"{where}[{i}]") for i, v in enumerate(value))


def frame_from_dict(
    data: Any, index: int, required_objects: Iterable[str] = (), required_quats: Iterable[str] = ()
) -> Frame:
    """Validate one trajectory-file frame; errors read ``frame <index>: <field>: <problem>``."""
    where = f"frame {index}"
    if not isinstance(data, Mapping):
        raise TrajectoryError(f"{where}: expected an object, got {type(data).__name__}")
    for key in ("ee_left", "ee_right", "gripper_left", "gripper_right", "objects"):
        if key not in data:
            raise TrajectoryError(f"{where}: field {key!r} is missing")
    ee_left = _vector(data["ee_left"], 3, f"{where}: ee_left")
    ee_right = _vector(data["ee_right"], 3, f"{where}: ee_right")
    g_left = _number(data["gripper_left"], f"{where}: gripper_left")
    g_right = _number(data["gripper_right"], f"{where}: gripper_right")
    raw_objects = data["objects"]
    if not isinstance(raw_objects, Mapping):
        raise TrajectoryError(f"{where}: objects: expected an object of name -> [x, y, z]")
    objects = {str(k): _vector(v, 3, f"{where}: objects.{k}") for k, v in raw_objects.items()}
    for name in required_objects:
        if name not in objects:
            raise TrajectoryError(f"{where}: objects.{name}: missing (the task needs it)")
    raw_quats = data.get("object_quats", {})
    if not isinstance(raw_quats, Mapping):
        raise TrajectoryError(f"{where}: object_quats: expected an object of name -> [w, x, y, z]")
    quats = {str(k): _vector(v, 4, f"{where}: object_quats.{k}") for k, v in raw_quats.items()}
    for name in required_quats:
        if name not in quats:
            raise TrajectoryError(f"{where}: object_quats.{name}: missing (the task needs it)")
    raw_doubtful = data.get("doubtful", [])
    if not isinstance(raw_doubtful, list | tuple) or not all(isinstance(n, str) for n in raw_doubtful):
        raise TrajectoryError(f"{where}: doubtful: expected a list of object names, got {raw_doubtful!r}")
    return Frame(ee_left, ee_right, g_left, g_right, objects, quats,  # type: ignore[arg-type]
                 frozenset(raw_doubtful))
