"""The rig's URDF as a kinematic tree, in NumPy: parsing, forward kinematics, link Jacobians.

The rig needs kinematics (the safety filter's workspace box, the stage monitor's EE points, TF of
every link for Foxglove and RViz, the oracle's IK) on machines that have no simulator, so this
reads the very URDF the simulator loads and computes with it alone. Joint types: fixed, revolute,
continuous and prismatic; ``<origin rpy>`` is URDF's fixed-axis roll-pitch-yaw (R = Rz·Ry·Rx).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MOVING_TYPES = ("revolute", "continuous", "prismatic")


class UrdfError(ValueError):
    """A URDF that cannot be used; the message names the file, the element and the value."""


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # fixed | revolute | continuous | prismatic
    parent: str
    child: str
    origin_rotation: np.ndarray  # (3, 3) parent <- joint frame at zero
    origin_position: np.ndarray  # (3,)
    axis: np.ndarray  # (3,) unit, in the joint frame
    lower: float
    upper: float
    velocity: float

    @property
    def moving(self) -> bool:
        return self.kind in MOVING_TYPES


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's ``rpy``: rotate about fixed x by roll, then fixed y by pitch, then fixed z by yaw."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    c, s = math.cos(angle), math.sin(angle)
    t = 1.0 - c
    return np.array([
        [c + x * x * t, x * y * t - z * s, x * z * t + y * s],
        [y * x * t + z * s, c + y * y * t, y * z * t - x * s],
        [z * x * t - y * s, z * y * t + x * s, c + z * z * t],
    ])


def _floats(text: str | None, count: int, default: tuple[float, ...], where: str) -> tuple[float, ...]:
    if text is None:
        return default
    try:
        values = tuple(float(v) for v in text.split())
    except ValueError:
        raise UrdfError(f"{where}: {text!r} is not {count} numbers") from None
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise UrdfError(f"{where}: {text!r} is not {count} finite numbers")
    return values


def _limit(element: ET.Element | None, kind: str, name: str, where: str) -> tuple[float, float, float]:
    """(lower, upper, velocity); a revolute or prismatic joint must bound its travel."""
    if kind == "continuous":
        text = element.get("velocity") if element is not None else None
        return -math.inf, math.inf, float(text) if text else math.inf
    if element is None:
        raise UrdfError(f"{where}: joint {name!r} ({kind}) has no <limit>")
    values = []
    for key in ("lower", "upper"):
        text = element.get(key)
        if text is None:
            raise UrdfError(f"{where}: joint {name!r} <limit> has no {key}")
        try:
            value = float(text)
        except ValueError:
            raise UrdfError(f"{where}: joint {name!r} <limit {key}={text!r}> is not a number") from None
        if not math.isfinite(value):
            raise UrdfError(f"{where}: joint {name!r} <limit {key}={text!r}> is not finite")
        values.append(value)
    if values[0] > values[1]:
        raise UrdfError(f"{where}: joint {name!r} has lower {values[0]} > upper {values[1]}")
    speed_text = element.get("velocity")
    speed = float(speed_text) if speed_text else math.inf
    return values[0], values[1], speed if speed > 0 else math.inf


class UrdfModel:
    """Links and joints of one URDF tree, with FK over any subset of moving joints."""

    def __init__(self, joints: list[UrdfJoint], links: list[str], source: str) -> None:
        self.source = source
        self.links = tuple(links)
        self.joints = {j.name: j for j in joints}
        self._parent_joint = {j.child: j for j in joints}
        roots = [link for link in links if link not in self._parent_joint]
        if len(roots) != 1:
            raise UrdfError(f"{source}: expected one root link, found {roots}")
        self.root = roots[0]
        #: Moving joints in document order: the model's ``q`` vector.
        self.moving_joints = tuple(j.name for j in joints if j.moving)
        self.index = {name: i for i, name in enumerate(self.moving_joints)}
        self._chains = {link: self._chain(link) for link in links}
        #: Per link, its chain as (q index or -1, prismatic, origin R, origin p, axis in the parent frame).
        self._steps = {link: [(self.index.get(j.name, -1) if j.moving else -1, j.kind == "prismatic",
                               j.origin_rotation, j.origin_position, j.origin_rotation @ j.axis, j.axis)
                              for j in chain] for link, chain in self._chains.items()}

    @classmethod
    def from_text(cls, text: str, source: str = "<urdf>") -> UrdfModel:
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise UrdfError(f"{source}: not valid XML ({exc})") from None
        if root.tag != "robot":
            raise UrdfError(f"{source}: the top element is <{root.tag}>, expected <robot>")
        links = [str(link.get("name")) for link in root.findall("link")]
        joints = []
        for element in root.findall("joint"):
            name, kind = element.get("name"), element.get("type")
            where = f"{source}: joint {name!r}"
            if not name or kind not in ("fixed", *MOVING_TYPES):
                raise UrdfError(f"{where}: type {kind!r} is not fixed, revolute, continuous or prismatic")
            parent, child = element.find("parent"), element.find("child")
            if parent is None or child is None or parent.get("link") not in links or child.get("link") not in links:
                raise UrdfError(f"{where}: parent and child must name links of the file")
            origin = element.find("origin")
            xyz = _floats(origin.get("xyz") if origin is not None else None, 3, (0.0, 0.0, 0.0), f"{where} origin xyz")
            rpy = _floats(origin.get("rpy") if origin is not None else None, 3, (0.0, 0.0, 0.0), f"{where} origin rpy")
            axis_el = element.find("axis")
            axis = np.array(_floats(axis_el.get("xyz") if axis_el is not None else None, 3, (1.0, 0.0, 0.0),
                                    f"{where} axis"))
            if kind != "fixed":
                norm = float(np.linalg.norm(axis))
                if norm == 0.0:
                    raise UrdfError(f"{where}: axis is zero")
                axis = axis / norm
            lower, upper, velocity = (0.0, 0.0, 0.0) if kind == "fixed" else _limit(
                element.find("limit"), str(kind), name, source)
            joints.append(UrdfJoint(name, str(kind), str(parent.get("link")), str(child.get("link")),
                                    rpy_matrix(*rpy), np.array(xyz), axis, lower, upper, velocity))
        return cls(joints, links, source)

    @classmethod
    def from_file(cls, path: str | Path) -> UrdfModel:
        path = Path(path)
        if not path.is_file():
            raise UrdfError(f"urdf: no such file {str(path)!r}")
        return cls.from_text(path.read_text(encoding="utf-8"), str(path))

    # -- structure ---------------------------------------------------------------------------------
    def _chain(self, link: str) -> tuple[UrdfJoint, ...]:
        chain = []
        while link in self._parent_joint:
            joint = self._parent_joint[link]
            chain.append(joint)
            link = joint.parent
        return tuple(reversed(chain))

    def parent_link(self, link: str) -> str | None:
        self._require(link)
        joint = self._parent_joint.get(link)
        return None if joint is None else joint.parent

    def parent_joint(self, link: str) -> UrdfJoint | None:
        self._require(link)
        return self._parent_joint.get(link)

    def chain(self, link: str) -> tuple[UrdfJoint, ...]:
        """Joints from the root down to ``link``."""
        self._require(link)
        return self._chains[link]

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        lower = np.array([self.joints[n].lower for n in self.moving_joints])
        upper = np.array([self.joints[n].upper for n in self.moving_joints])
        return lower, upper

    def _require(self, link: str) -> None:
        if link not in self._chains:
            raise ValueError(f"link: unknown link {link!r}")

    # -- kinematics --------------------------------------------------------------------------------
    def joint_motion(self, joint: UrdfJoint, value: float) -> tuple[np.ndarray, np.ndarray]:
        """(rotation, translation) of ``joint``'s child in its parent for joint ``value``."""
        if joint.kind == "prismatic":
            return joint.origin_rotation, joint.origin_position + joint.origin_rotation @ (joint.axis * value)
        if joint.kind in ("revolute", "continuous"):
            return joint.origin_rotation @ axis_rotation(joint.axis, value), joint.origin_position
        return joint.origin_rotation, joint.origin_position

    def link_pose(self, q: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
        """(rotation, position) of ``link`` in the root frame for the moving-joint vector ``q``."""
        self._require(link)
        rotation, position = np.eye(3), np.zeros(3)
        for index, prismatic, r0, p0, axis_parent, axis in self._steps[link]:
            if index < 0:
                position = position + rotation @ p0
                rotation = rotation @ r0
            elif prismatic:
                position = position + rotation @ (p0 + axis_parent * float(q[index]))
                rotation = rotation @ r0
            else:
                position = position + rotation @ p0
                rotation = rotation @ (r0 @ axis_rotation(axis, float(q[index])))
        return rotation, position

    def all_link_poses(self, q: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every link's (rotation, position) in the root frame, each joint computed once."""
        poses: dict[str, tuple[np.ndarray, np.ndarray]] = {self.root: (np.eye(3), np.zeros(3))}
        for link in self.links:
            self._pose_into(poses, q, link)
        return poses

    def _pose_into(self, poses: dict[str, tuple[np.ndarray, np.ndarray]], q: np.ndarray, link: str) -> None:
        if link in poses:
            return
        joint = self._parent_joint[link]
        self._pose_into(poses, q, joint.parent)
        rotation, position = poses[joint.parent]
        r, p = self.joint_motion(joint, float(q[self.index[joint.name]]) if joint.moving else 0.0)
        poses[link] = (rotation @ r, position + rotation @ p)

    def jacobian(self, q: np.ndarray, link: str, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rotation, position, J) of ``link``: J is 6 × len(columns), linear rows first, world frame.

        ``columns`` are indices into ``q``; a joint not on the link's chain has a zero column. Called in
        every IK iteration, so it walks precomputed steps once and keeps NumPy's small-array helpers out.
        """
        self._require(link)
        rotation, position = np.eye(3), np.zeros(3)
        axes: dict[int, tuple[bool, np.ndarray, np.ndarray]] = {}
        for index, prismatic, r0, p0, axis_parent, axis in self._steps[link]:
            if index < 0:
                position = position + rotation @ p0
                rotation = rotation @ r0
                continue
            world_axis = rotation @ axis_parent
            if prismatic:
                position = position + rotation @ (p0 + axis_parent * float(q[index]))
                rotation = rotation @ r0
            else:
                position = position + rotation @ p0
                rotation = rotation @ (r0 @ axis_rotation(axis, float(q[index])))
            axes[index] = (prismatic, world_axis, position)
        jac = np.zeros((6, len(columns)))
        for k, column in enumerate(columns.tolist()):
            entry = axes.get(column)
            if entry is None:
                continue
            prismatic, world_axis, origin = entry
            ax, ay, az = world_axis.tolist()
            if prismatic:
                jac[:3, k] = ax, ay, az
            else:
                dx, dy, dz = (position - origin).tolist()
                jac[:, k] = ay * dz - az * dy, az * dx - ax * dz, ax * dy - ay * dx, ax, ay, az
        return rotation, position, jac
