"""What each of a layout's identities should look like to the detector, derived from the registry.

Grounding compares measured features (colour, width, top height, flat or round top) against these,
so a new layout needs no new code: sizes, colours, stacking and bowls all come from ``ObjectSpec``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.perception.colour_names import canonical_class
from robofollow_ros.perception.primitives import Primitive
from robofollow_ros.robot.bowl import BowlGeometry

#: The bowl's pose origin sits this far above its bottom (robot/bowl.py; spec spawn z = table + 0.02).
BOWL_ORIGIN_ABOVE_TABLE = 0.02
#: Objects thinner than this (m) lie flat in the table plane (Scene 3's labels): depth cannot see them.
FLAT_HEIGHT = 0.006


@dataclass(frozen=True)
class IdentityModel:
    """Expected appearance of one named object resting where its layout puts it."""

    name: str
    colour: str
    shape: str
    #: Extent along world x (m) seen from above at the layout's yaw.
    width: float
    #: Half extent along world y: front-most visible point to centre.
    half_depth: float
    #: Centre to top (m): the pose origin lies this far below the highest point.
    top_offset: float
    #: Highest point above the table when resting as laid out.
    resting_top_height: float
    round_top: bool
    nominal_xy: tuple[float, float]
    has_yaw: bool
    #: The shape fitted to the object's points (sizes from the registry).
    primitive: Primitive
    #: Lies flat in the table plane (a label): found by colour on the plane, not by height.
    flat: bool = False
    #: Layout yaw (rad): a flat label's expected orientation.
    layout_yaw: float = 0.0
    #: Height of the pose origin above the table when the object stands on the table itself (its lowest).
    table_centre_height: float = 0.0


def _top_offset(spec: ObjectSpec) -> float:
    if spec.shape == "bowl":
        return BowlGeometry(spec.scale).rim_z
    return spec.half_height


def _footprint(spec: ObjectSpec) -> tuple[float, float]:
    """(width along x, half depth along y) of the object's outline from above."""
    if spec.shape in ("sphere", "cylinder"):
        return 2 * spec.size[0], spec.size[0]
    if spec.shape == "bowl":
        radius = BowlGeometry(spec.scale).outer_radius
        return 2 * radius, radius
    hx, hy = (spec.size[0], spec.size[0]) if spec.shape == "cube" else (spec.size[0], spec.size[1])
    c, s = abs(math.cos(spec.yaw)), abs(math.sin(spec.yaw))
    return 2 * (hx * c + hy * s), hx * s + hy * c


def _resting_top(spec: ObjectSpec, layout: Layout) -> float:
    """Height of the object's top above the table in the layout as spawned (stacks and bowls included)."""
    if spec.on_top_of is not None:
        base = layout.object(spec.on_top_of)
        return _resting_top(base, layout) + 2 * spec.half_height
    if spec.in_container is not None:
        bowl = BowlGeometry(layout.object(spec.in_container).scale)
        floor = BOWL_ORIGIN_ABOVE_TABLE + bowl.floor_z
        return floor + 2 * spec.half_height
    if spec.shape == "bowl":
        return BOWL_ORIGIN_ABOVE_TABLE + BowlGeometry(spec.scale).rim_z
    # Settled, not spawned: blocks spawn 1 mm above the table (spawn_z) and drop onto it.
    return 2 * spec.half_height


def _nominal_xy(spec: ObjectSpec, layout: Layout) -> tuple[float, float]:
    if spec.on_top_of is not None:
        return _nominal_xy(layout.object(spec.on_top_of), layout)
    if spec.in_container is not None:
        return _nominal_xy(layout.object(spec.in_container), layout)
    return float(spec.nominal_xy[0]), float(spec.nominal_xy[1])


def _primitive(spec: ObjectSpec) -> Primitive:
    if spec.shape == "sphere":
        return Primitive("sphere", (spec.size[0],))
    if spec.shape == "cube":
        return Primitive("box", (spec.size[0],) * 3)
    if spec.shape == "box":
        return Primitive("box", (spec.size[0], spec.size[1], spec.size[2]))
    if spec.shape == "cylinder":
        return Primitive("cylinder", (spec.size[0], spec.size[1]))
    if spec.shape == "bowl":
        bowl = BowlGeometry(spec.scale)
        return Primitive("bowl", (bowl.outer_radius, bowl.inner_radius, -BOWL_ORIGIN_ABOVE_TABLE, bowl.rim_z))
    raise ValueError(f"shape: no primitive for {spec.shape!r} ({spec.name})")


def identity_models(layout: Layout) -> list[IdentityModel]:
    """One model per object of the layout, in layout order (which breaks ties between look-alikes)."""
    models = []
    for spec in layout.objects:
        width, half_depth = _footprint(spec)
        models.append(IdentityModel(
            name=spec.name, colour=canonical_class(spec.color_rgb), shape=spec.shape, width=width,
            half_depth=half_depth, top_offset=_top_offset(spec), resting_top_height=_resting_top(spec, layout),
            round_top=spec.shape == "sphere", nominal_xy=_nominal_xy(spec, layout),
            has_yaw=spec.shape in ("cube", "box"), primitive=_primitive(spec),
            flat=spec.shape == "box" and spec.is_static and 2 * spec.half_height < FLAT_HEIGHT,
            layout_yaw=float(spec.yaw),
            table_centre_height=BOWL_ORIGIN_ABOVE_TABLE if spec.shape == "bowl" else spec.half_height,
        ))
    return models
