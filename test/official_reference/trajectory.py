"""The evaluator's recorded trajectory and task record, built from a trajectory file's frames.

Positions become float64 NumPy vectors, listed in the order the simulated scene registers its
things (objects, then labels, then bowls; Scene 4: the bowl, objects on the table, objects in a
container, stacked objects), since the evaluator's nearest-object loops keep the first of equals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.benchmark import EvalTask, Layout

TABLE_HEIGHT = 0.74


@dataclass
class Trajectory:
    ee: dict[str, list[np.ndarray]]
    grip: dict[str, list[float]]
    obj_pos: dict[str, list[np.ndarray]]
    obj_quat: dict[str, list[np.ndarray]]
    labels: set[str]
    bowls: set[str]
    n_steps: int
    label_half_size: dict[str, np.ndarray] = field(default_factory=dict)
    #: Scene 3 fallback for label sizes (the scene config), Scene 4 table and half-heights.
    config_label_half_size: dict[str, tuple[float, ...]] = field(default_factory=dict)
    table_height: float = TABLE_HEIGHT
    half_heights: dict[str, float] = field(default_factory=dict)


@dataclass
class TaskView:
    """The fields of the evaluator's ``Scene*EvalTask`` records."""

    name: str
    instruction: str
    source: str
    target: str | None
    arm: str
    action: str
    base_task_type: str
    via: str | None = None
    route_mode: str | None = None
    place_mode: str | None = None
    place_slot: int | None = None
    second_source: str | None = None
    second_arm: str | None = None


def eval_task_view(task: EvalTask) -> TaskView:
    return TaskView(name=task.task_id, instruction=task.instruction, source=task.source, target=task.target,
                    arm=task.arm, action=task.action, base_task_type=task.base_task_type, via=task.via,
                    route_mode=task.route_mode, place_mode=task.place_mode, place_slot=task.place_slot,
                    second_source=task.second_source, second_arm=task.second_arm)


def registration_order(scene: str, layout: Layout) -> list[str]:
    objects = [o for o in layout.objects if o.role == "object"]
    labels = [o.name for o in layout.objects if o.role == "label"]
    bowls = [o.name for o in layout.objects if o.role == "bowl"]
    if scene == "scene4":
        standing = [o.name for o in objects if o.on_top_of is None and o.in_container is None]
        inside = [o.name for o in objects if o.in_container is not None]
        stacked = [o.name for o in objects if o.on_top_of is not None]
        return bowls + standing + inside + stacked
    return [o.name for o in objects] + labels + bowls


def build(scene: str, layout: Layout, frames: list[dict[str, Any]]) -> Trajectory:
    order = registration_order(scene, layout)
    traj = Trajectory(
        ee={"left": [np.asarray(f["ee_left"], dtype=np.float64) for f in frames],
            "right": [np.asarray(f["ee_right"], dtype=np.float64) for f in frames]},
        grip={"left": [float(f["gripper_left"]) for f in frames],
              "right": [float(f["gripper_right"]) for f in frames]},
        obj_pos={name: [np.asarray(f["objects"][name], dtype=np.float64) for f in frames] for name in order}
        if frames else {},
        obj_quat={name: [np.asarray(f["object_quats"][name], dtype=np.float64) for f in frames]
                  for name in (frames[0].get("object_quats", {}) if frames else {})},
        labels={o.name for o in layout.objects if o.role == "label"},
        bowls={o.name for o in layout.objects if o.role == "bowl"},
        n_steps=len(frames),
    )
    traj.config_label_half_size = {o.name: o.size for o in layout.objects if o.role == "label"}
    for o in layout.objects:
        if o.shape in ("cube", "sphere"):
            traj.half_heights[o.name] = float(o.size[0])
        elif o.shape == "cylinder":
            traj.half_heights[o.name] = float(o.size[1])
    return traj


def prefix(traj: Trajectory, k: int) -> Trajectory:
    """The trajectory as recorded after its first k frames."""
    return Trajectory(
        ee={arm: v[:k] for arm, v in traj.ee.items()}, grip={arm: v[:k] for arm, v in traj.grip.items()},
        obj_pos={n: v[:k] for n, v in traj.obj_pos.items()} if k else {},
        obj_quat={n: v[:k] for n, v in traj.obj_quat.items()} if k else {},
        labels=traj.labels, bowls=traj.bowls, n_steps=k, label_half_size=traj.label_half_size,
        config_label_half_size=traj.config_label_half_size, table_height=traj.table_height,
        half_heights=traj.half_heights)
