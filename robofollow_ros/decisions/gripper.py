"""The rig's parallel gripper as the OWDA world model sees it: where its fingers and palm are around the TCP.

The figures are the rig's (``RigConfig.gripper_geometry``, the rig YAML's ``gripper_geometry``: docs/rigs.md;
``test_owda_clearance`` measures each shipped rig's in SAPIEN): each finger is a box reaching
``finger_below_tcp`` below the TCP (along the approach), ``finger_half_across`` either side of the opening axis
and ``finger_thickness`` thick, its inner face ``finger_inner_closed`` + ``finger_travel`` × opening from the
TCP; the palm's underside is ``palm_above_tcp`` above the TCP and reaches ``palm_half_along`` along the opening
axis and ``palm_half_across`` across it. The heights and openings of a top-down grasp are the oracle's
(``top_down_grasp_tcp_z``, ``skills.opening_for`` with the rig's ``finger_half_gap``), so the world model
checks the same motion that execution runs.

A world state reads the active rig's gripper once (``active_gripper``: one load per rig a process names), not
per check: the OWDA generator checks room for the gripper ~300,000 times a suite.
"""

from __future__ import annotations

import os

from robofollow_ros.policy.expert.skills import opening_for
from robofollow_ros.robot.kinematics import top_down_grasp_tcp_z
from robofollow_ros.robot.rig_description import ENV_RIG
from robofollow_ros.robot.rig_model import GripperGeometry, RigConfig


class Gripper:
    """One rig's gripper, its figures read once: the finger and palm boxes and the openings of its fingers."""

    __slots__ = ("closed_fingers_half", "finger_half", "geometry", "half_gap", "palm_half")

    def __init__(self, geometry: GripperGeometry, half_gap: tuple[float, float]) -> None:
        self.geometry = geometry
        #: the rig's ``finger_half_gap``: the oracle's pre-grasp opening is computed from it
        self.half_gap = half_gap
        #: a finger's footprint half sizes (along the opening axis, across it)
        self.finger_half = (geometry.finger_thickness / 2, geometry.finger_half_across)
        #: from the TCP to each closed finger's outer face
        self.closed_fingers_half = geometry.finger_inner_closed + geometry.finger_thickness
        self.palm_half = (geometry.palm_half_along, geometry.palm_half_across)

    @classmethod
    def of(cls, rig: RigConfig) -> Gripper:
        return cls(rig.gripper_geometry, rig.finger_half_gap)

    def inner_face(self, opening: float) -> float:
        """Distance from the TCP to each finger's inner face at gripper value ``opening`` (0 closed, 1 open)."""
        return self.geometry.finger_inner_closed + self.geometry.finger_travel * opening

    def opening_with_inner_face(self, distance: float) -> float:
        """The gripper value that puts each finger's inner face ``distance`` from the TCP (clipped to 0..1)."""
        g = self.geometry
        return min(1.0, max(0.0, (distance - g.finger_inner_closed) / g.finger_travel))

    def grasp_opening(self, half_width: float) -> float:
        """How far the oracle opens before a top-down grasp of an object ``half_width`` wide across the fingers."""
        return opening_for(half_width, self.half_gap)


_ACTIVE: dict[str | None, Gripper] = {}


def active_gripper() -> Gripper:
    """The active rig's gripper (``ROBOFOLLOW_RIG``, else the built-in rig's), read once per rig a process names."""
    spec = os.environ.get(ENV_RIG) or None
    gripper = _ACTIVE.get(spec)
    if gripper is None:
        from robofollow_ros.robot.rig_config import load_rig_config

        gripper = _ACTIVE[spec] = Gripper.of(load_rig_config(spec))
    return gripper


def grasp_tcp_height(top: float) -> float:
    """TCP height above the table for a top-down grasp of an object whose top is ``top`` above the table."""
    return top_down_grasp_tcp_z(top, table_z=0.0)
