"""The rig's parallel gripper as the OWDA world model sees it: where its fingers and palm are around the TCP.

From the collision boxes of ``urdf/robofollow_rig.urdf`` (``test_owda_clearance`` measures them in SAPIEN):
each finger is a box reaching ``FINGER_BELOW_TCP_M`` below the TCP (along the approach), ``FINGER_HALF_ACROSS_M``
either side of the opening axis and ``FINGER_THICKNESS_M`` thick, its inner face ``FINGER_INNER_M`` +
``GRIPPER_TRAVEL_M`` × opening from the TCP; the palm's underside is at the TCP and reaches
``PALM_HALF_ALONG_M`` along the opening axis and ``PALM_HALF_ACROSS_M`` across it. The heights and openings
of a top-down grasp are the oracle's (``top_down_grasp_tcp_z``, ``skills.opening_for``), so the world model
checks the same motion that execution runs.
"""

from __future__ import annotations

from robofollow_ros.policy.expert.skills import opening_for
from robofollow_ros.robot.kinematics import top_down_grasp_tcp_z

GRIPPER_TRAVEL_M = 0.04
FINGER_INNER_M = 0.002
FINGER_THICKNESS_M = 0.010
FINGER_HALF_ACROSS_M = 0.012
FINGER_BELOW_TCP_M = 0.04
PALM_HALF_ALONG_M = 0.05
PALM_HALF_ACROSS_M = 0.02


def inner_face(opening: float) -> float:
    """Distance from the TCP to each finger's inner face at gripper value ``opening`` (0 closed, 1 open)."""
    return FINGER_INNER_M + GRIPPER_TRAVEL_M * opening


def opening_with_inner_face(distance: float) -> float:
    """The gripper value that puts each finger's inner face ``distance`` from the TCP (clipped to 0..1)."""
    return min(1.0, max(0.0, (distance - FINGER_INNER_M) / GRIPPER_TRAVEL_M))


def grasp_opening(half_width: float) -> float:
    """How far the oracle opens before a top-down grasp of an object ``half_width`` wide across the fingers."""
    return opening_for(half_width)


def grasp_tcp_height(top: float) -> float:
    """TCP height above the table for a top-down grasp of an object whose top is ``top`` above the table."""
    return top_down_grasp_tcp_z(top, table_z=0.0)
