"""The 3-D scene of one trial as a ``visualization_msgs/MarkerArray`` (``/robofollow/scene``).

Built from the registry (shapes, sizes, colours) and one scorer frame (positions, quaternions,
EE points), so a recording shows exactly what the scorer saw. The task's source and target are
drawn with a highlight (a ring and a label), and the region the task's stage checks (Scene 1
relation sector, bowl / stack / slot disc, Scene 3 route box, the finish stage's operation area)
is drawn translucent on the table, because "why did that stage fail?" is the usual question.
A ROS type (not foxglove.SceneUpdate) so the recording stays a ROS 2 bag; Foxglove draws markers
natively. Each update starts with DELETEALL, so a region that no longer applies disappears.

Doubt is drawn (issue 37): an object whose pose perception published below the stage monitor's threshold
(the frame's ``doubtful`` names, ``contract.MIN_POSE_CONFIDENCE``) is drawn at ``DOUBTFUL_ALPHA`` with a
"doubtful" label over it; with per-object ``confidence`` (the frame drawn from ``/robofollow/objects``) every
object's opacity follows its confidence (never below ``MIN_ALPHA``, so it stays visible).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout, ObjectSpec
from robofollow_ros.contract import TABLE_SIZE_XY, TABLE_TOP_Z, WORLD_FRAME
from robofollow_ros.monitoring import rosmsg
from robofollow_ros.monitoring.topics import OBJECT_FRAME_PREFIX
from robofollow_ros.scoring import thresholds as th

#: Table centre in the world frame (docs/sim.md, "World").
TABLE_CENTRE_XY = (0.0, -0.05)
TABLE_THICKNESS = 0.02
SOURCE_COLOUR = (1.0, 0.55, 0.0)
TARGET_COLOUR = (0.1, 0.6, 1.0)
REGION_ALPHA = 0.25
EE_COLOURS = {"left": (0.9, 0.2, 0.9), "right": (0.2, 0.9, 0.9)}
DOUBTFUL_ALPHA = 0.25
MIN_ALPHA = 0.1
DOUBT_COLOUR = (0.85, 0.1, 0.1)

Vec3 = Sequence[float]


class SceneBuilder:
    """Turns scorer frames of one task into MarkerArrays (table and fixed regions built once per update)."""

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: Mapping[int, tuple[float, float]]) -> None:
        self.task = task
        self.layout = layout
        self.slot_xy = slot_xy

    def update(self, frame: Mapping[str, Any], time_ns: int = 0) -> Any:
        """Everything of one frame: table, regions, objects (highlighted roles), EE points."""
        m = _Markers(time_ns)
        m.add("table", "CUBE", xyz=(*TABLE_CENTRE_XY, TABLE_TOP_Z - TABLE_THICKNESS / 2),
              scale=(*TABLE_SIZE_XY, TABLE_THICKNESS), rgba=(0.55, 0.45, 0.35, 1.0))
        self._regions_static(m)
        objects: Mapping[str, Vec3] = frame.get("objects", {})
        quats: Mapping[str, Vec3] = frame.get("object_quats", {})
        doubtful = set(frame.get("doubtful", ()))
        confidence: Mapping[str, float] = frame.get("confidence", {})
        for spec in self.layout.objects:
            if spec.name in objects:
                self._object(m, spec, objects[spec.name], quats.get(spec.name), spec.name in doubtful,
                             confidence.get(spec.name))
        self._regions_dynamic(m, objects)
        for arm in ("left", "right"):
            if f"ee_{arm}" in frame:
                closed = float(frame.get(f"gripper_{arm}", 1.0)) < th.CLOSE_THRESHOLD
                d = 0.03 if closed else 0.02  # a closed gripper shows as a bigger dot
                m.add(f"ee/{arm}", "SPHERE", xyz=frame[f"ee_{arm}"], scale=(d, d, d), rgba=(*EE_COLOURS[arm], 1.0))
        return m.array()

    def _object(self, m: _Markers, spec: ObjectSpec, xyz: Vec3, quat: Vec3 | None, doubtful: bool = False,
                confidence: float | None = None) -> None:
        ns = f"object/{spec.name}"
        role = "source" if spec.name in (self.task.source, self.task.second_source) else (
            "target" if spec.name == self.task.target else "")
        alpha = 0.5 if spec.role == "bowl" else 1.0
        if confidence is not None:
            alpha *= max(MIN_ALPHA, min(1.0, float(confidence)))
        if doubtful:
            alpha = min(alpha, DOUBTFUL_ALPHA)
        rgba = (*spec.color_rgb, alpha)
        if spec.shape == "sphere":
            d = 2 * spec.size[0]
            m.add(ns, "SPHERE", xyz=xyz, scale=(d, d, d), rgba=rgba)
        elif spec.shape in ("cube", "box"):
            half = [spec.size[0]] * 3 if spec.shape == "cube" else list(spec.size)
            m.add(ns, "CUBE", xyz=xyz, quat_wxyz=quat or spec.quat_wxyz, scale=[2 * h for h in half], rgba=rgba)
        elif spec.shape == "cylinder":
            d, h = 2 * spec.size[0], 2 * spec.size[1]
            m.add(ns, "CYLINDER", xyz=xyz, scale=(d, d, h), rgba=rgba)
        else:  # bowl: RoboTwin bowl stand-in, outer radius 0.06 s, height 0.05 s, origin 0.02 above bottom
            d, h = 0.12 * spec.scale, 0.05 * spec.scale
            m.add(ns, "CYLINDER", xyz=(xyz[0], xyz[1], xyz[2] - 0.02 + h / 2), scale=(d, d, h), rgba=rgba)
        if role:
            rgb = SOURCE_COLOUR if role == "source" else TARGET_COLOUR
            ring = _ring(xyz[0], xyz[1], TABLE_TOP_Z + 0.002, 0.045)
            m.add(ns, "LINE_STRIP", scale=(0.004, 0, 0), rgba=(*rgb, 1.0), points=[*ring, ring[0]])
            m.add(ns, "TEXT_VIEW_FACING", xyz=(xyz[0], xyz[1], xyz[2] + 0.06), scale=(0, 0, 0.03), rgba=(*rgb, 1.0),
                  text=f"{role}: {spec.name}")
        if doubtful:
            m.add(ns, "TEXT_VIEW_FACING", xyz=(xyz[0], xyz[1], xyz[2] + (0.1 if role else 0.06)), scale=(0, 0, 0.03),
                  rgba=(*DOUBT_COLOUR, 1.0), text=f"doubtful: {spec.name}")

    def _regions_static(self, m: _Markers) -> None:
        """Regions fixed in the world: the operation area (finish stage) and a Scene 4 slot."""
        (x0, x1), (y0, y1), (z0, z1) = th.OPERATION_AREA_X, th.OPERATION_AREA_Y, th.OPERATION_AREA_Z
        m.add("region/operation_area", "CUBE", xyz=((x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2),
              scale=(x1 - x0, y1 - y0, z1 - z0), rgba=(0.5, 0.5, 0.5, 0.08))
        if self.task.place_slot is not None and self.task.place_slot in self.slot_xy:
            _disc(m, *self.slot_xy[self.task.place_slot], th.S4_PLACE_EXEC_XY)

    def _regions_dynamic(self, m: _Markers, objects: Mapping[str, Vec3]) -> None:
        """Regions that move with the target object: relation sector, bowl / stack disc, route box."""
        task, target = self.task, self.task.target
        if target is None or target not in objects:
            return
        tx, ty = float(objects[target][0]), float(objects[target][1])
        if task.action in th.RELATION_DIRECTION:
            _sector(m, tx, ty, th.RELATION_DIRECTION[task.action], th.RELATION_MAX_DIST)
        elif task.action == "place_bowl":
            _disc(m, tx, ty, th.BOWL_XY)
        elif task.action in ("stack", "stack_on_target"):
            _disc(m, tx, ty, th.STACK_XY if task.scene == "scene2" else th.S4_PLACE_EXEC_XY)
        elif task.scene == "scene3":
            m.add("region/target", "CUBE", xyz=(tx, ty, TABLE_TOP_Z + 0.003),
                  scale=(2 * th.ROUTE_X + 0.004, 2 * th.ROUTE_Y_CORRECT, 0.004), rgba=(*TARGET_COLOUR, REGION_ALPHA))


class _Markers:
    """Collects markers of one update; ids count up per namespace; DELETEALL first."""

    def __init__(self, time_ns: int) -> None:
        self.time_ns = time_ns
        self.markers = [rosmsg.marker(time_ns, WORLD_FRAME, "", 0, "CUBE", action="DELETEALL")]
        self._ids: dict[str, int] = {}

    def add(self, ns: str, kind: str, **kwargs: Any) -> None:
        marker_id = self._ids.get(ns, 0)
        self._ids[ns] = marker_id + 1
        self.markers.append(rosmsg.marker(self.time_ns, WORLD_FRAME, ns, marker_id, kind, **kwargs))

    def array(self) -> Any:
        return rosmsg.marker_array(self.markers)


def object_markers(poses: Mapping[str, tuple[Vec3, Vec3]], time_ns: int) -> Any:
    """``/robofollow/objects`` as the graph publishes it: one sphere per object, ``ns`` = object name."""
    return rosmsg.marker_array(rosmsg.marker(time_ns, WORLD_FRAME, name, i, "SPHERE", xyz=xyz, quat_wxyz=quat,
                                             scale=(0.03, 0.03, 0.03))
                               for i, (name, (xyz, quat)) in enumerate(poses.items()))


def object_transforms(frame: Mapping[str, Any], time_ns: int) -> list[Any]:
    """world -> ``object/<name>`` for every object of a scorer frame (position and quaternion)."""
    quats: Mapping[str, Vec3] = frame.get("object_quats", {})
    return [rosmsg.transform(time_ns, WORLD_FRAME, f"{OBJECT_FRAME_PREFIX}{name}", xyz,
                             quats.get(name, (1.0, 0.0, 0.0, 0.0)))
            for name, xyz in frame.get("objects", {}).items()]


def _ring(x: float, y: float, z: float, radius: float, n: int = 24) -> list[tuple[float, float, float]]:
    return [(x + radius * math.cos(2 * math.pi * i / n), y + radius * math.sin(2 * math.pi * i / n), z)
            for i in range(n)]


def _disc(m: _Markers, x: float, y: float, radius: float) -> None:
    m.add("region/target", "CYLINDER", xyz=(x, y, TABLE_TOP_Z + 0.001), scale=(2 * radius, 2 * radius, 0.002),
          rgba=(*TARGET_COLOUR, REGION_ALPHA))


def _sector(m: _Markers, x: float, y: float, direction: tuple[float, float], radius: float) -> None:
    """The Scene 1 relation test: within ``radius`` of the target and within 45 degrees of the direction."""
    centre = math.atan2(direction[1], direction[0])
    half = math.acos(th.RELATION_COS)
    z = TABLE_TOP_Z + 0.002
    arc = [(x + radius * math.cos(a), y + radius * math.sin(a), z)
           for a in (centre - half + 2 * half * i / 12 for i in range(13))]
    m.add("region/target", "LINE_STRIP", scale=(0.004, 0, 0), rgba=(*TARGET_COLOUR, 0.8),
          points=[(x, y, z), *arc, (x, y, z)])
