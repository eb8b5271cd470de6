"""The 3-D scene of one trial as Foxglove ``SceneUpdate`` entities.

Built from the registry (shapes, sizes, colours) and one scorer frame (positions, quaternions,
EE points), so a recording shows exactly what the scorer saw. The task's source and target are
drawn with a highlight (a ring and a label), and the region the task's stage checks (Scene 1
relation sector, bowl / stack / slot disc, Scene 3 route box, the finish stage's operation area)
is drawn translucent on the table, because "why did that stage fail?" is the usual question.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from foxglove.messages import (
    Color,
    CubePrimitive,
    CylinderPrimitive,
    LinePrimitive,
    LinePrimitiveLineType,
    Point3,
    Pose,
    Quaternion,
    SceneEntity,
    SceneUpdate,
    SpherePrimitive,
    TextPrimitive,
    Vector3,
)

from robofollow_ros.benchmark import EvalTask, Layout, ObjectSpec
from robofollow_ros.contract import TABLE_SIZE_XY, TABLE_TOP_Z, WORLD_FRAME
from robofollow_ros.scoring import thresholds as th

#: Table centre in the world frame (docs/sim.md, "World").
TABLE_CENTRE_XY = (0.0, -0.05)
TABLE_THICKNESS = 0.02
SOURCE_COLOUR = (1.0, 0.55, 0.0)
TARGET_COLOUR = (0.1, 0.6, 1.0)
REGION_ALPHA = 0.25
EE_COLOURS = {"left": (0.9, 0.2, 0.9), "right": (0.2, 0.9, 0.9)}

Vec3 = Sequence[float]


def _pose(xyz: Vec3, quat_wxyz: Vec3 = (1.0, 0.0, 0.0, 0.0)) -> Pose:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return Pose(position=Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])),
                orientation=Quaternion(x=x, y=y, z=z, w=w))


def _colour(rgb: Vec3, alpha: float = 1.0) -> Color:
    return Color(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=alpha)


def _vec(x: float, y: float, z: float) -> Vector3:
    return Vector3(x=float(x), y=float(y), z=float(z))


class SceneBuilder:
    """Turns scorer frames of one task into ``SceneUpdate`` messages (static parts built once)."""

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: Mapping[int, tuple[float, float]]) -> None:
        self.task = task
        self.layout = layout
        self.slot_xy = slot_xy
        self._static = [self._table(), *self._regions_static()]

    # -- public ------------------------------------------------------------------------------------
    def update(self, frame: Mapping[str, Any]) -> SceneUpdate:
        """Everything of one frame: table, regions, objects (highlighted roles), EE points."""
        objects: Mapping[str, Vec3] = frame.get("objects", {})
        quats: Mapping[str, Vec3] = frame.get("object_quats", {})
        entities = list(self._static)
        entities.extend(self._object(spec, objects[spec.name], quats.get(spec.name))
                        for spec in self.layout.objects if spec.name in objects)
        entities.extend(self._regions_dynamic(objects))
        for arm in ("left", "right"):
            key = f"ee_{arm}"
            if key in frame:
                entities.append(self._ee(arm, frame[key], float(frame.get(f"gripper_{arm}", 1.0))))
        return SceneUpdate(entities=entities)

    # -- pieces ------------------------------------------------------------------------------------
    def _table(self) -> SceneEntity:
        cx, cy = TABLE_CENTRE_XY
        cube = CubePrimitive(pose=_pose((cx, cy, TABLE_TOP_Z - TABLE_THICKNESS / 2)),
                             size=_vec(TABLE_SIZE_XY[0], TABLE_SIZE_XY[1], TABLE_THICKNESS),
                             color=_colour((0.55, 0.45, 0.35)))
        return SceneEntity(frame_id=WORLD_FRAME, id="table", cubes=[cube])

    def _object(self, spec: ObjectSpec, xyz: Vec3, quat: Vec3 | None) -> SceneEntity:
        role = "source" if spec.name in (self.task.source, self.task.second_source) else (
            "target" if spec.name == self.task.target else "")
        colour = _colour(spec.color_rgb, 0.5 if spec.role == "bowl" else 1.0)
        entity: dict[str, Any] = {"cubes": [], "spheres": [], "cylinders": []}
        if spec.shape == "sphere":
            d = 2 * spec.size[0]
            entity["spheres"].append(SpherePrimitive(pose=_pose(xyz), size=_vec(d, d, d), color=colour))
        elif spec.shape in ("cube", "box"):
            half = [spec.size[0]] * 3 if spec.shape == "cube" else list(spec.size)
            entity["cubes"].append(CubePrimitive(pose=_pose(xyz, quat or spec.quat_wxyz),
                                                 size=_vec(*(2 * h for h in half)), color=colour))
        elif spec.shape == "cylinder":
            d, h = 2 * spec.size[0], 2 * spec.size[1]
            entity["cylinders"].append(CylinderPrimitive(pose=_pose(xyz), size=_vec(d, d, h),
                                                         bottom_scale=1.0, top_scale=1.0, color=colour))
        else:  # bowl: RoboTwin bowl stand-in, outer radius 0.06 s, height 0.05 s, origin 0.02 above bottom
            d, h = 0.12 * spec.scale, 0.05 * spec.scale
            centre = (xyz[0], xyz[1], xyz[2] - 0.02 + h / 2)
            entity["cylinders"].append(CylinderPrimitive(pose=_pose(centre), size=_vec(d, d, h),
                                                         bottom_scale=1.0, top_scale=1.0, color=colour))
        texts = []
        if role:
            ring = _ring(xyz[0], xyz[1], TABLE_TOP_Z + 0.002, 0.045)
            rgb = SOURCE_COLOUR if role == "source" else TARGET_COLOUR
            entity.setdefault("lines", []).append(LinePrimitive(type=LinePrimitiveLineType.LineLoop, thickness=0.004,
                                                                points=ring, color=_colour(rgb)))
            texts.append(TextPrimitive(pose=_pose((xyz[0], xyz[1], xyz[2] + 0.06)), billboard=True, font_size=14.0,
                                       scale_invariant=True, color=_colour(rgb), text=f"{role}: {spec.name}"))
        return SceneEntity(frame_id=WORLD_FRAME, id=f"object/{spec.name}", texts=texts, **entity)

    def _ee(self, arm: str, xyz: Vec3, gripper: float) -> SceneEntity:
        d = 0.02 if gripper >= th.CLOSE_THRESHOLD else 0.03  # a closed gripper shows as a bigger dot
        sphere = SpherePrimitive(pose=_pose(xyz), size=_vec(d, d, d), color=_colour(EE_COLOURS[arm]))
        return SceneEntity(frame_id=WORLD_FRAME, id=f"ee/{arm}", spheres=[sphere])

    def _regions_static(self) -> list[SceneEntity]:
        """Regions fixed in the world: the operation area (finish stage) and a Scene 4 slot."""
        (x0, x1), (y0, y1), (z0, z1) = th.OPERATION_AREA_X, th.OPERATION_AREA_Y, th.OPERATION_AREA_Z
        area = CubePrimitive(pose=_pose(((x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2)),
                             size=_vec(x1 - x0, y1 - y0, z1 - z0), color=_colour((0.5, 0.5, 0.5), 0.08))
        out = [SceneEntity(frame_id=WORLD_FRAME, id="region/operation_area", cubes=[area])]
        if self.task.place_slot is not None and self.task.place_slot in self.slot_xy:
            x, y = self.slot_xy[self.task.place_slot]
            out.append(_disc("region/target", x, y, th.S4_PLACE_EXEC_XY))
        return out

    def _regions_dynamic(self, objects: Mapping[str, Vec3]) -> list[SceneEntity]:
        """Regions that move with the target object: relation sector, bowl / stack disc, route box."""
        task, target = self.task, self.task.target
        if target is None or target not in objects:
            return []
        tx, ty = float(objects[target][0]), float(objects[target][1])
        if task.action in th.RELATION_DIRECTION:
            return [_sector("region/target", tx, ty, th.RELATION_DIRECTION[task.action], th.RELATION_MAX_DIST)]
        if task.action == "place_bowl":
            return [_disc("region/target", tx, ty, th.BOWL_XY)]
        if task.action in ("stack", "stack_on_target"):
            return [_disc("region/target", tx, ty, th.STACK_XY if task.scene == "scene2" else th.S4_PLACE_EXEC_XY)]
        if task.scene == "scene3":
            box = CubePrimitive(pose=_pose((tx, ty, TABLE_TOP_Z + 0.003)),
                                size=_vec(2 * th.ROUTE_X + 0.004, 2 * th.ROUTE_Y_CORRECT, 0.004),
                                color=_colour(TARGET_COLOUR, REGION_ALPHA))
            return [SceneEntity(frame_id=WORLD_FRAME, id="region/target", cubes=[box])]
        return []


def _ring(x: float, y: float, z: float, radius: float, n: int = 24) -> list[Point3]:
    return [Point3(x=x + radius * math.cos(2 * math.pi * i / n), y=y + radius * math.sin(2 * math.pi * i / n), z=z)
            for i in range(n)]


def _disc(entity_id: str, x: float, y: float, radius: float) -> SceneEntity:
    cyl = CylinderPrimitive(pose=_pose((x, y, TABLE_TOP_Z + 0.001)), size=_vec(2 * radius, 2 * radius, 0.002),
                            bottom_scale=1.0, top_scale=1.0, color=_colour(TARGET_COLOUR, REGION_ALPHA))
    return SceneEntity(frame_id=WORLD_FRAME, id=entity_id, cylinders=[cyl])


def _sector(entity_id: str, x: float, y: float, direction: tuple[float, float], radius: float) -> SceneEntity:
    """The Scene 1 relation test: within ``radius`` of the target and within 45 degrees of the direction."""
    centre = math.atan2(direction[1], direction[0])
    half = math.acos(th.RELATION_COS)
    z = TABLE_TOP_Z + 0.002
    arc = [Point3(x=x + radius * math.cos(a), y=y + radius * math.sin(a), z=z)
           for a in (centre - half + 2 * half * i / 12 for i in range(13))]
    points = [Point3(x=x, y=y, z=z), *arc, Point3(x=x, y=y, z=z)]
    line = LinePrimitive(type=LinePrimitiveLineType.LineStrip, thickness=0.004, points=points,
                         color=_colour(TARGET_COLOUR, 0.8))
    return SceneEntity(frame_id=WORLD_FRAME, id=entity_id, lines=[line])
