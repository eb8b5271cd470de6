"""Table, objects, labels and bowls of a layout as SAPIEN actors (spec section a).

Shapes, sizes, colours, masses and friction come from the registry's ``ObjectSpec``; mass is set
through density so inertia stays consistent. With ``visuals=False`` no visual shape is created,
so render-free scenes never need a render system.
"""

from __future__ import annotations

import math

import numpy as np
import sapien

from robofollow_ros.benchmark.records import ObjectSpec
from robofollow_ros.contract import TABLE_SIZE_XY, TABLE_TOP_Z
from robofollow_ros.robot.bowl import BowlGeometry

TABLE_CENTRE_XY = (0.0, -0.05)
TABLE_THICKNESS = 0.05
TABLE_FRICTION = 0.5
TABLE_COLOUR = (0.72, 0.62, 0.50)
#: SAPIEN cylinders lie along x; this turns them upright (axis along z).
_CYLINDER_UP = sapien.Pose(q=[math.sqrt(0.5), 0.0, -math.sqrt(0.5), 0.0])


def _material(friction: float) -> sapien.physx.PhysxMaterial:
    return sapien.physx.PhysxMaterial(friction, friction, 0.0)


def _colour(rgb: tuple[float, float, float]) -> sapien.render.RenderMaterial:
    return sapien.render.RenderMaterial(base_color=[*rgb, 1.0], roughness=0.7, metallic=0.0)


def build_table(scene: sapien.Scene, visuals: bool) -> sapien.Entity:
    builder = scene.create_actor_builder()
    half = [TABLE_SIZE_XY[0] / 2, TABLE_SIZE_XY[1] / 2, TABLE_THICKNESS / 2]
    pose = sapien.Pose([TABLE_CENTRE_XY[0], TABLE_CENTRE_XY[1], TABLE_TOP_Z - TABLE_THICKNESS / 2])
    builder.add_box_collision(pose, half, material=_material(TABLE_FRICTION))
    if visuals:
        builder.add_box_visual(pose, half, material=_colour(TABLE_COLOUR))
    builder.set_physx_body_type("static")
    return builder.build(name="table")


def _object_volume(spec: ObjectSpec) -> float:
    if spec.shape == "sphere":
        return 4.0 / 3.0 * math.pi * spec.size[0] ** 3
    if spec.shape == "cube":
        return (2 * spec.size[0]) ** 3
    if spec.shape == "cylinder":
        return math.pi * spec.size[0] ** 2 * 2 * spec.size[1]
    if spec.shape == "box":
        return 8 * spec.size[0] * spec.size[1] * spec.size[2]
    if spec.shape == "bowl":
        return BowlGeometry(spec.scale).volume()
    raise ValueError(f"shape: unknown object shape {spec.shape!r} for {spec.name!r}")


def build_object(scene: sapien.Scene, spec: ObjectSpec, pose: sapien.Pose, visuals: bool) -> sapien.Entity:
    """One layout entry as an actor at ``pose`` (static for labels and static bowls)."""
    builder = scene.create_actor_builder()
    material = _material(spec.friction)
    density = spec.mass / _object_volume(spec)
    colour = _colour(spec.color_rgb) if visuals else None
    identity = sapien.Pose()
    if spec.shape == "sphere":
        builder.add_sphere_collision(identity, spec.size[0], material=material, density=density)
        if colour is not None:
            builder.add_sphere_visual(identity, spec.size[0], material=colour)
    elif spec.shape in ("cube", "box"):
        half = [spec.size[0]] * 3 if spec.shape == "cube" else list(spec.size)
        builder.add_box_collision(identity, half, material=material, density=density)
        if colour is not None:
            builder.add_box_visual(identity, half, material=colour)
    elif spec.shape == "cylinder":
        radius, half_height = spec.size
        builder.add_cylinder_collision(_CYLINDER_UP, radius, half_height, material=material, density=density)
        if colour is not None:
            builder.add_cylinder_visual(_CYLINDER_UP, radius, half_height, material=colour)
    elif spec.shape == "bowl":
        _add_bowl(builder, BowlGeometry(spec.scale), material, density, colour)
    else:
        raise ValueError(f"shape: unknown object shape {spec.shape!r} for {spec.name!r}")
    builder.set_physx_body_type("static" if spec.is_static else "dynamic")
    builder.set_initial_pose(pose)
    entity = builder.build(name=spec.name)
    body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
    if body is not None and body.mass > 0:
        # PhysX cylinders are convex meshes slightly smaller than the ideal solid: restore the
        # spec's mass exactly, scaling the inertia with it.
        ratio = spec.mass / body.mass
        body.set_inertia(np.asarray(body.inertia) * ratio)
        body.set_mass(spec.mass)
    return entity


def _add_bowl(builder: sapien.ActorBuilder, geometry: BowlGeometry, material: sapien.physx.PhysxMaterial,
              density: float, colour: sapien.render.RenderMaterial | None) -> None:
    radius, half_thickness, centre_z = geometry.base_piece()
    base_pose = sapien.Pose([0.0, 0.0, centre_z]) * _CYLINDER_UP
    builder.add_cylinder_collision(base_pose, radius, half_thickness, material=material, density=density)
    if colour is not None:
        builder.add_cylinder_visual(base_pose, radius, half_thickness, material=colour)
    for piece in geometry.wall_pieces():
        pose = sapien.Pose(list(piece.position), [math.cos(piece.yaw / 2), 0.0, 0.0, math.sin(piece.yaw / 2)])
        builder.add_box_collision(pose, list(piece.half_size), material=material, density=density)
        if colour is not None:
            builder.add_box_visual(pose, list(piece.half_size), material=colour)


def yaw_pose(x: float, y: float, z: float, yaw: float) -> sapien.Pose:
    return sapien.Pose([x, y, z], [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def entity_pose_arrays(entity: sapien.Entity) -> tuple[np.ndarray, np.ndarray]:
    pose = entity.pose
    return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)
