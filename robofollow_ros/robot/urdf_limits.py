"""Joint limits read from the rig's URDF, so the safety filter and the simulator share one source.

A limit the safety filter would silently weaken (NaN, infinite, missing, lower above upper) is an
error naming the joint: the arm bridge refuses to start rather than guard a joint it cannot bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robofollow_ros.contract import ARMS
from robofollow_ros.robot.rig_config import RigConfig
from robofollow_ros.robot.urdf_model import UrdfError, UrdfModel

__all__ = ["JointLimit", "UrdfError", "read_joint_limits", "rig_joint_limits"]


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


def rig_joint_limits(rig: RigConfig) -> dict[str, JointLimit]:
    """Limits under the contract's joint names: each arm joint in contract units (the rig YAML's sign and
    offset applied), and ``<arm>_gripper`` as the travel of the arm's first finger joint (its closed..open span),
    which is what a driver map's gripper range is checked against."""
    model = UrdfModel.from_file(rig.urdf_path)
    limits: dict[str, JointLimit] = {}
    for arm in ARMS:
        for k, joint in enumerate(rig.arm_joints[arm], start=1):
            lab = model.joints[joint.name]
            if lab.kind == "continuous":
                raise UrdfError(f"{model.source}: joint {joint.name!r} is continuous; the safety filter needs a "
                                "revolute joint with finite lower and upper limits")
            ends = sorted(((lab.lower - joint.offset) * joint.sign, (lab.upper - joint.offset) * joint.sign))
            limits[f"{arm}_joint{k}"] = JointLimit(ends[0], ends[1], lab.velocity)
        finger = rig.fingers[arm][0]
        speed = model.joints[finger.name].velocity
        limits[f"{arm}_gripper"] = JointLimit(min(finger.closed, finger.open), max(finger.closed, finger.open), speed)
    return limits
