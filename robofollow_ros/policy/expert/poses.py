"""The only way object poses reach the expert: :class:`ObjectPoses`.

In simulation the evaluator supplies them as the observation extension ``obs["privileged"]``
(``objects``: name → [x, y, z], ``object_quats``: name → [w, x, y, z], world frame); on the rig the
perception node fills the same keys from what it sees. Baselines that must not look at the scene
build a :class:`PoseSnapshot` from a layout's nominal positions instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from robofollow_ros.benchmark import Layout
from robofollow_ros.policy.interface import PolicyError


class ObjectPoses(Protocol):
    """World-frame positions and orientations of named objects."""

    def names(self) -> tuple[str, ...]: ...

    def position(self, name: str) -> np.ndarray: ...

    def quat_wxyz(self, name: str) -> np.ndarray: ...


@dataclass(frozen=True)
class PoseSnapshot:
    """Poses at one instant; missing quaternions read as identity."""

    positions: Mapping[str, np.ndarray]
    quats: Mapping[str, np.ndarray]

    def names(self) -> tuple[str, ...]:
        return tuple(self.positions)

    def position(self, name: str) -> np.ndarray:
        if name not in self.positions:
            raise PolicyError(f"object poses: no pose for {name!r} (known: {', '.join(sorted(self.positions))})")
        return np.array(self.positions[name], dtype=np.float64)

    def quat_wxyz(self, name: str) -> np.ndarray:
        return np.array(self.quats.get(name, (1.0, 0.0, 0.0, 0.0)), dtype=np.float64)


def yaw_of(poses: ObjectPoses, name: str) -> float:
    """Yaw about world z (the scorer's formula: atan2(2(wz+xy), 1−2(y²+z²)))."""
    w, x, y, z = poses.quat_wxyz(name)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def poses_from_observation(obs: Mapping[str, Any]) -> PoseSnapshot:
    """Read ``obs["privileged"]``; a clear error says what is missing (e.g. a server fed by a plain peer)."""
    privileged = obs.get("privileged") if isinstance(obs, Mapping) else None
    if not isinstance(privileged, Mapping) or not isinstance(privileged.get("objects"), Mapping):
        raise PolicyError("observation: privileged.objects is missing; the oracle needs object poses "
                          "(the evaluator or the perception node supplies them)")
    positions = {str(name): _vector(value, 3, f"privileged.objects[{name!r}]", "[x, y, z]")
                 for name, value in privileged["objects"].items()}
    quats = {str(name): _vector(value, 4, f"privileged.object_quats[{name!r}]", "[w, x, y, z]")
             for name, value in (privileged.get("object_quats") or {}).items()}
    return PoseSnapshot(positions, quats)


def _vector(value: Any, size: int, field: str, form: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        arr = np.empty(0)
    if arr.shape != (size,) or not np.isfinite(arr).all():
        raise PolicyError(f"observation: {field} = {value!r} is not a finite {form}")
    return arr


def task_id_from_observation(obs: Mapping[str, Any]) -> str:
    privileged = obs.get("privileged") if isinstance(obs, Mapping) else None
    task_id = privileged.get("task_id") if isinstance(privileged, Mapping) else None
    if not isinstance(task_id, str) or not task_id:
        raise PolicyError("observation: privileged.task_id is missing; the oracle needs the evaluation task id")
    return task_id


def nominal_poses(layout: Layout) -> PoseSnapshot:
    """Where a layout puts its objects before jitter and physics: what a policy that never looks would assume.

    Stacked and in-bowl objects sit on their base (base z + both half heights + 0.002, as the scene spawns them).
    """
    positions: dict[str, np.ndarray] = {}
    quats: dict[str, np.ndarray] = {}
    by_name = {o.name: o for o in layout.objects}

    def place(name: str) -> np.ndarray:
        if name in positions:
            return positions[name]
        obj = by_name[name]
        base_name = obj.on_top_of or obj.in_container
        if base_name is not None:
            base = place(base_name)
            base_half = by_name[base_name].half_height if obj.on_top_of else -0.02 + 0.004
            z = base[2] + base_half + obj.half_height + 0.002
            positions[name] = np.array([base[0], base[1], z])
        else:
            z = obj.spawn_z if obj.spawn_z is not None else 0.74 + obj.half_height + 0.001
            positions[name] = np.array([obj.nominal_xy[0], obj.nominal_xy[1], z])
        return positions[name]

    for obj in layout.objects:
        place(obj.name)
        quats[obj.name] = np.array([math.cos(obj.yaw / 2), 0.0, 0.0, math.sin(obj.yaw / 2)])
    return PoseSnapshot(positions, quats)
