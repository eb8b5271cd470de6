"""Joint limits read from the rig's URDF, so the safety filter and the simulator share one source.

A limit the safety filter would silently weaken (NaN, infinite, missing, lower above upper) is an
error naming the joint: the arm bridge refuses to start rather than guard a joint it cannot bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robofollow_ros.robot.urdf_model import UrdfError, UrdfModel

__all__ = ["JointLimit", "UrdfError", "read_joint_limits"]


@dataclass(frozen=True)
class JointLimit:
    lower: float
    upper: float
    velocity: float  # rad/s (or m/s for prismatic joints); inf when the URDF gives none


def read_joint_limits(urdf: str | Path) -> dict[str, JointLimit]:
    """Limits of every revolute/prismatic joint of ``urdf`` (a path or the XML text)."""
    if isinstance(urdf, Path) or not str(urdf).lstrip().startswith("<"):
        model = UrdfModel.from_file(urdf)
    else:
        model = UrdfModel.from_text(str(urdf))
    limits = {}
    for name in model.moving_joints:
        joint = model.joints[name]
        if joint.kind == "continuous":
            raise UrdfError(f"{model.source}: joint {name!r} is continuous; the safety filter needs a "
                            "revolute joint with finite lower and upper limits")
        limits[name] = JointLimit(joint.lower, joint.upper, joint.velocity)
    return limits
