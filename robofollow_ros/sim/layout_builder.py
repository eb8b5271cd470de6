"""Placing a layout's objects with the spec's spawn and settle rules (spec section a).

One seed always gives one layout: jitter comes from ``Layout.jittered_xy(seed)`` and every later
position is computed from the settled physics state, which is itself deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

import sapien

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.robot.bowl import BowlGeometry
from robofollow_ros.sim.scene_objects import build_object, yaw_pose

#: Settle steps after spawning: Scene 2's eval env steps 500; Scene 4 settles 180 after the base
#: objects and 180 after the stacked ones; Scenes 1 and 3 (not stated in the spec) settle 100.
SETTLE_STEPS = {"scene1": 100, "scene2": 500, "scene3": 100, "scene4": 180}
#: Gap left between a stacked object and its base at spawn (spec: base z + both half heights + 0.002).
STACK_GAP = 0.002
#: An in-bowl object is dropped from rim height + its half height + this clearance.
BOWL_DROP_CLEARANCE = 0.015
#: Dynamic bowls are spawned this much above their resting height, so they never start in the table.
DYNAMIC_BOWL_LIFT = 0.001


def _spawn_z(spec: ObjectSpec) -> float:
    if spec.spawn_z is None:
        raise ValueError(f"object {spec.name!r}: no spawn height and not stacked or in a container")
    if spec.shape == "bowl" and not spec.is_static:
        return spec.spawn_z + DYNAMIC_BOWL_LIFT
    return spec.spawn_z


def place_layout(scene: sapien.Scene, layout: Layout, seed: int, visuals: bool,
                 step: Callable[[int], None]) -> dict[str, sapien.Entity]:
    """Spawn every object of ``layout`` for ``seed`` and let it settle; returns name -> entity (layout order)."""
    xy = layout.jittered_xy(seed)
    entities: dict[str, sapien.Entity] = {}
    for spec in layout.objects:
        if spec.on_top_of is None and spec.in_container is None:
            x, y = xy[spec.name]
            entities[spec.name] = build_object(scene, spec, yaw_pose(x, y, _spawn_z(spec), spec.yaw), visuals)
    step(SETTLE_STEPS.get(layout.scene, 100))
    dependants = [s for s in layout.objects if s.on_top_of is not None or s.in_container is not None]
    if dependants:
        for spec in dependants:
            entities[spec.name] = build_object(scene, spec, _dependant_pose(layout, spec, entities), visuals)
        step(SETTLE_STEPS.get(layout.scene, 100))
    return {spec.name: entities[spec.name] for spec in layout.objects}


def _dependant_pose(layout: Layout, spec: ObjectSpec, entities: dict[str, sapien.Entity]) -> sapien.Pose:
    if spec.on_top_of is not None:
        base = entities[spec.on_top_of].pose.p
        base_spec = layout.object(spec.on_top_of)
        z = float(base[2]) + base_spec.half_height + spec.half_height + STACK_GAP
        return yaw_pose(float(base[0]), float(base[1]), z, spec.yaw)
    assert spec.in_container is not None
    bowl = entities[spec.in_container].pose.p
    rim = float(bowl[2]) + BowlGeometry(layout.object(spec.in_container).scale).rim_z
    return yaw_pose(float(bowl[0]), float(bowl[1]), rim + spec.half_height + BOWL_DROP_CLEARANCE, spec.yaw)
