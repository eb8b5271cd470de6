"""The robot as data for a headless recording: ``/robot_description``, ``/tf_static`` and link ``/tf``.

On the ROS graph the robot state publisher side of the graph publishes these; the headless evaluator
has no graph, so its recordings compute them the same way: the URDF text from the rig's file, each
fixed joint (and each camera's optical frame) once as a static transform, and every moving joint's
child link relative to its parent from the measured joint vector (``RigKinematics.link_pose``).
Frame ids are the URDF link names, as robot_state_publisher names them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.monitoring import rosmsg


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # fixed, revolute, prismatic, continuous, ...
    parent: str
    child: str


def urdf_joints(urdf: str) -> list[UrdfJoint]:
    """The joints of a URDF document (our own rig file), in file order."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise ValueError(f"robot description: not a URDF document ({exc})") from None
    joints = []
    for joint in root.iter("joint"):
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            raise ValueError(f"robot description: joint {joint.get('name')!r} lacks a parent or child link")
        joints.append(UrdfJoint(str(joint.get("name")), str(joint.get("type")), str(parent.get("link")),
                                str(child.get("link"))))
    return joints


class RobotModel:
    """URDF text and the transforms of the rig's links, from ``robot.kinematics.RigKinematics``."""

    def __init__(self, rig: Any = None, kinematics: Any = None) -> None:
        from robofollow_ros.robot.kinematics import RigKinematics
        from robofollow_ros.robot.rig_config import load_rig_config

        self.rig = rig or load_rig_config()
        self.urdf = self.rig.robot_description()
        self.kinematics = kinematics or RigKinematics(self.rig)
        joints = urdf_joints(self.urdf)
        self.fixed = [(j.parent, j.child) for j in joints if j.kind == "fixed"]
        self.moving = [(j.parent, j.child) for j in joints if j.kind != "fixed"]

    def _relative(self, vector: np.ndarray, parent: str, child: str) -> tuple[np.ndarray, np.ndarray]:
        from robofollow_ros.robot.transforms import matrix_to_quat

        p, c = self.kinematics.link_pose(vector, parent), self.kinematics.link_pose(vector, child)
        rotation = p.rotation.T @ c.rotation
        return p.rotation.T @ (c.position - p.position), matrix_to_quat(rotation)

    def static_transforms(self, time_ns: int = 0) -> list[Any]:
        """Fixed joints (arm mounts, palms, TCPs, camera links) and each camera's optical frame."""
        from robofollow_ros.robot.cameras import optical_mounts

        home = self.kinematics.home_vector()
        out = [rosmsg.transform(time_ns, parent, child, *self._relative(home, parent, child))
               for parent, child in self.fixed]
        out += [rosmsg.transform(time_ns, parent, child, position, quat)
                for parent, child, position, quat in optical_mounts(self.rig.camera_links)]
        return out

    def link_transforms(self, vector: np.ndarray, time_ns: int) -> list[Any]:
        """Every moving joint's child link in its parent link, for the 14-value joint vector."""
        return [rosmsg.transform(time_ns, parent, child, *self._relative(vector, parent, child))
                for parent, child in self.moving]

    def camera_intrinsics(self, camera: str, width: int, height: int) -> np.ndarray:
        """K of a camera rendering ``width`` x ``height`` with the rig's vertical field of view."""
        from robofollow_ros.robot.cameras import intrinsic_matrix

        return intrinsic_matrix(width, height, self.rig.camera_fovy[camera])
