"""Where a layout puts each object for a seed, without physics: the resting pose on the table.

The rig has no simulator to settle a layout, yet the operator must be shown where to place each
object and the mock hardware must report objects where a trial expects them. The seed's jitter
comes from ``Layout.jittered_xy`` (the same numbers the simulator spawns at); heights follow the
spawn rules of ``sim.layout_builder`` with every object at rest: on the table, stacked on its base,
or on the floor of its bowl. ``test_rig_layout_poses`` checks these against SAPIEN's settled poses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.robot.bowl import ORIGIN_ABOVE_BOTTOM, BowlGeometry
from robofollow_ros.robot.transforms import yaw_quat


@dataclass(frozen=True)
class RestPose:
    position: np.ndarray  # (3,) world frame, the object's centre (a bowl's pose origin)
    quat_wxyz: np.ndarray  # (4,)
    yaw: float


def _resting_z(spec: ObjectSpec) -> float:
    if spec.shape == "bowl":
        return TABLE_TOP_Z + ORIGIN_ABOVE_BOTTOM  # the bowl's origin sits this far above its bottom
    return TABLE_TOP_Z + spec.half_height


def layout_rest_poses(layout: Layout, seed: int) -> dict[str, RestPose]:
    """Every object's resting pose for ``seed``, in the layout's order."""
    xy = layout.jittered_xy(seed)
    poses: dict[str, RestPose] = {}
    pending = list(layout.objects)
    while pending:  # bases and bowls first, then what rests on or in them
        waiting = []
        for spec in pending:
            base = spec.on_top_of or spec.in_container
            if base is not None and base not in poses:
                waiting.append(spec)
                continue
            if spec.on_top_of is not None:
                under = poses[spec.on_top_of]
                x, y = under.position[:2]
                z = float(under.position[2]) + layout.object(spec.on_top_of).half_height + spec.half_height
            elif spec.in_container is not None:
                bowl = poses[spec.in_container]
                x, y = bowl.position[:2]
                floor = BowlGeometry(layout.object(spec.in_container).scale).floor_z
                z = float(bowl.position[2]) + floor + spec.half_height
            else:
                x, y = xy[spec.name]
                z = _resting_z(spec)
            poses[spec.name] = RestPose(np.array([float(x), float(y), z]), yaw_quat(spec.yaw), float(spec.yaw))
        if len(waiting) == len(pending):
            names = ", ".join(s.name for s in waiting)
            raise ValueError(f"layout {layout.scene}/{layout.key}: {names} rest on objects that are not in it")
        pending = waiting
    return {spec.name: poses[spec.name] for spec in layout.objects}
