"""Manipulation skills: each appends rows for one arm to a :class:`MotionBuilder`.

Conventions (spec section a, expert): pre-grasp +0.08 m above the grasp, lift 0.10 m, place approach
+0.06 m, retreat +0.08 m; the grasp is top-down with the fingers opening along the object's narrow
side. Heights are the rig's (``top_down_grasp_tcp_z``). Every skill reads poses at the moment it is
planned, so a phase that starts after the object moved adapts to where it really is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from robofollow_ros.benchmark import Layout, ObjectSpec
from robofollow_ros.contract import ARM_SLICE, TABLE_TOP_Z
from robofollow_ros.policy.expert.motion import MotionBuilder, wrap_half_turn
from robofollow_ros.policy.expert.poses import ObjectPoses, yaw_of
from robofollow_ros.robot.kinematics import RigKinematics, top_down_grasp_tcp_z

PRE_GRASP = 0.08
LIFT = 0.10
PLACE_APPROACH = 0.06
RETREAT = 0.08
#: Gripper opening when releasing: above the scorer's open threshold 0.7, narrow enough to spare neighbours.
RELEASE_OPEN = 0.85
#: How far each finger must clear a released object's side (m).
RELEASE_CLEARANCE = 0.003
#: Carry moves are cut into rows of at most this length so a friction grasp is not shaken loose.
CARRY_ROW_M = 0.04


@dataclass
class SkillContext:
    """Everything a skill may read: kinematics, the layout's geometry, current poses, frame-0 state."""

    kin: RigKinematics
    layout: Layout
    poses: ObjectPoses
    home: np.ndarray  # the 14-vector at frame 0: "home" for the finish stage
    #: TCP − object centre at the grasp, per arm: used to place the object (not the TCP) on a target
    #: when poses are not re-read (open-loop baselines).
    hold_offset: dict[str, np.ndarray] = field(default_factory=dict)
    closed_loop: bool = True

    def spec(self, name: str) -> ObjectSpec:
        return self.layout.object(name)


def half_width(obj: ObjectSpec) -> float:
    """Half of the object's extent across the fingers (along x at grasp yaw 0)."""
    if obj.shape == "box":
        return obj.size[0]
    if obj.shape in ("sphere", "cube", "cylinder"):
        return obj.size[0]
    return 0.03


def grasp_yaw(ctx: SkillContext, name: str) -> float:
    """Finger direction for a top-down grasp: across a bar's narrow side, along a cube's face."""
    obj = ctx.spec(name)
    if obj.shape == "box":
        return wrap_half_turn(yaw_of(ctx.poses, name))
    if obj.shape == "cube":
        yaw = yaw_of(ctx.poses, name)
        return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4
    return 0.0


def open_width(obj: ObjectSpec, half_gap: tuple[float, float] = (0.0, 0.04)) -> float:
    """Open just wide enough so fingers miss neighbours and bowl rims; ``half_gap`` is the rig's distance from
    the TCP to each finger's inner face when closed and when open (``RigConfig.finger_half_gap``)."""
    return opening_for(half_width(obj), half_gap)


def opening_for(half: float, half_gap: tuple[float, float] = (0.0, 0.04)) -> float:
    """The pre-grasp opening for an object ``half`` metres wide on each side of the fingers' centre line."""
    # min/max, not np.clip: the same value, and OWDA's generator asks this ~300,000 times a suite (np.clip on a
    # scalar cost a fifth of the generation time)
    closed, wide = half_gap
    return float(min(max((half + 0.014 - closed) / (wide - closed), 0.75), 1.0))


def grasp(ctx: SkillContext, mb: MotionBuilder, arm: str, name: str) -> None:
    """Pre-grasp above the object, descend, close, lift straight up."""
    obj = ctx.spec(name)
    p = ctx.poses.position(name)
    grasp_z = top_down_grasp_tcp_z(p[2] + obj.half_height)
    yaw = grasp_yaw(ctx, name)
    above = np.array([p[0], p[1], grasp_z + PRE_GRASP])
    opening = open_width(obj, ctx.kin.rig.finger_half_gap)
    if mb.tcp(arm)[2] < above[2] - 0.02:  # after a failed grasp: rise before moving sideways
        mb.move(arm, mb.tcp(arm) + np.array([0.0, 0.0, RETREAT]), 2, gripper=opening)
    mb.transit(arm, above, yaw, 3, gripper=opening)
    mb.move(arm, np.array([p[0], p[1], grasp_z]), 3)
    mb.grip(arm, 0.0)
    mb.hold()
    ctx.hold_offset[arm] = np.array([0.0, 0.0, grasp_z - p[2]])
    mb.move(arm, np.array([p[0], p[1], grasp_z + LIFT]), 3)


def object_offset(ctx: SkillContext, mb: MotionBuilder, arm: str, name: str) -> np.ndarray:
    """TCP minus object centre now (closed loop), or as grasped (open loop)."""
    if ctx.closed_loop:
        return mb.tcp(arm) - ctx.poses.position(name)
    return ctx.hold_offset.get(arm, np.zeros(3))


def carry(ctx: SkillContext, mb: MotionBuilder, arm: str, name: str, object_xy: np.ndarray,
          yaw: float | None = None) -> None:
    """Move the held object horizontally so its centre is over ``object_xy``, at the current height."""
    offset = object_offset(ctx, mb, arm, name)
    tcp = mb.tcp(arm)
    goal = np.array([object_xy[0] + offset[0], object_xy[1] + offset[1], tcp[2]])
    rows = max(2, math.ceil(np.linalg.norm(goal[:2] - tcp[:2]) / CARRY_ROW_M))
    mb.move(arm, goal, rows, yaw=yaw)


#: How a held object is let go once it is at its release pose: (builder, arm, release TCP, the object's spec).
Release = Callable[[MotionBuilder, str, np.ndarray, ObjectSpec], None]


def release_opening(obj: ObjectSpec, half_gap: tuple[float, float]) -> float:
    """``RELEASE_OPEN``, or wider where the rig's fingers at that opening would still touch the object (3 mm
    clear of it on each side): the ALOHA's fingers open 34.6 mm from the TCP, the built-in rig's 40 mm."""
    closed, wide = half_gap
    return float(min(1.0, max(RELEASE_OPEN, (half_width(obj) + RELEASE_CLEARANCE - closed) / (wide - closed))))


def open_and_retreat(mb: MotionBuilder, arm: str, release_tcp: np.ndarray, obj: ObjectSpec) -> None:
    """The oracle's release: open to ``release_opening`` at once and rise ``RETREAT``."""
    mb.grip(arm, release_opening(obj, mb.kin.rig.finger_half_gap))
    mb.move(arm, release_tcp + np.array([0.0, 0.0, RETREAT]), 2)


def place(ctx: SkillContext, mb: MotionBuilder, arm: str, name: str, centre: np.ndarray,
          yaw: float | None = None, release: Release = open_and_retreat) -> None:
    """Carry the held object over ``centre`` (its centre at release), lower, let go (``release``), retreat up."""
    offset = object_offset(ctx, mb, arm, name)
    tcp = mb.tcp(arm)
    release_tcp = np.asarray(centre, dtype=np.float64) + offset
    carry_z = max(tcp[2], release_tcp[2] + PLACE_APPROACH)
    if carry_z > tcp[2] + 1e-3:
        mb.move(arm, np.array([tcp[0], tcp[1], carry_z]), 2)
    rows = max(2, math.ceil(np.linalg.norm(release_tcp[:2] - tcp[:2]) / CARRY_ROW_M))
    mb.move(arm, np.array([release_tcp[0], release_tcp[1], carry_z]), rows, yaw=yaw)
    mb.move(arm, release_tcp, 3)
    mb.hold()
    release(mb, arm, release_tcp, ctx.spec(name))


def push(ctx: SkillContext, mb: MotionBuilder, arm: str, name: str, direction: np.ndarray, distance: float) -> None:
    """Close the gripper above the object's back side, lower it beside the table, push along ``direction``."""
    obj = ctx.spec(name)
    p = ctx.poses.position(name)
    u = np.asarray(direction, dtype=np.float64) / np.linalg.norm(direction)
    extent = obj.size[0] * (abs(u[0]) + abs(u[1])) if obj.shape == "cube" else obj.size[0]
    start_xy = p[:2] - u * (extent + 0.022)
    push_z = TABLE_TOP_Z + 0.04 + 0.012
    yaw = wrap_half_turn(math.atan2(u[1], u[0]))
    mb.transit(arm, np.array([start_xy[0], start_xy[1], push_z + PRE_GRASP]), yaw, 3)
    mb.grip(arm, 0.0)
    mb.move(arm, np.array([start_xy[0], start_xy[1], push_z]), 3)
    end_xy = start_xy + u * distance
    mb.move(arm, np.array([end_xy[0], end_xy[1], push_z]), max(3, math.ceil(distance / 0.012)))
    mb.hold()
    mb.move(arm, np.array([end_xy[0], end_xy[1], push_z + RETREAT]), 2)


def go_home(ctx: SkillContext, mb: MotionBuilder, arm: str) -> None:
    """Back to the frame-0 joints (the finish stage's home), rising first if still low."""
    tcp = mb.tcp(arm)
    if tcp[2] < 0.86:
        mb.move(arm, np.array([tcp[0], tcp[1], 0.86]), 2)
    mb.joints(arm, ctx.home[ARM_SLICE[arm]], 3)
    mb.hold(2)

