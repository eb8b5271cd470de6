"""Generator of ``urdf/robofollow_rig.urdf``: two 6-DoF arms with parallel-jaw grippers.

The rig is modelled on an ALOHA AgileX-style bench (two ~0.6 m reach arms, public figures) but uses
its own primitive geometry. Writing the URDF from one table of figures keeps link lengths, limits
and mounts in one place; ``test_sim_urdf`` checks the committed file equals this output, so an edit
here without regenerating fails loudly. A rig with other arms ships its own URDF and points
``config/robot/rig.yaml`` at it; nothing else reads these figures.

Frames: each arm's ``<arm>_base`` has +x pointing away from the robot (world +y) and +z up. At zero
joint angles the upper arm points up and the forearm and tool point along base +x. The TCP frame
``<arm>_tcp`` has +x along the approach (wrist → fingertips) and +y along finger opening, so
RoboTwin's top-down grasp quaternion (w,x,y,z) = (−0.5, 0.5, −0.5, −0.5) applies unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from robofollow_ros.paths import share_path

#: Where each arm base sits in the world frame (x, y, z); both bases yaw +90° (base +x = world +y).
BASE_MOUNTS = {"left": (-0.20, -0.30, 0.74), "right": (0.20, -0.30, 0.74)}
BASE_YAW = math.pi / 2

#: (joint, parent offset xyz in the parent link frame, axis, lower, upper, velocity limit rad/s).
ARM_JOINT_TABLE = (
    ("joint1", (0.0, 0.0, 0.06), (0, 0, 1), -2.6, 2.6, 3.0),
    ("joint2", (0.0, 0.0, 0.06), (0, 1, 0), -1.2, 2.0, 3.0),
    ("joint3", (0.0, 0.0, 0.32), (0, 1, 0), -1.2, 2.9, 3.0),
    ("joint4", (0.12, 0.0, 0.0), (1, 0, 0), -2.0, 2.0, 3.0),
    ("joint5", (0.18, 0.0, 0.0), (0, 1, 0), -1.8, 2.0, 3.0),
    ("joint6", (0.06, 0.0, 0.0), (1, 0, 0), -3.0, 3.0, 3.0),
)
#: TCP offset from link6 along its +x: the wrist centre (joint5) to TCP distance is 0.06 + 0.07 = 0.13 m.
TCP_OFFSET_X = 0.07
#: Fingertips lie this far beyond the TCP along +x (the spec's Scene 1 fingertip proxy offset).
FINGERTIP_OFFSET = 0.04
#: Finger travel per finger (m); fully open = 0.08 m between the pads, closed = 0.004 m.
FINGER_TRAVEL = 0.04
FINGER_CLOSED_GAP_HALF = 0.002
PAD_HALF = (0.025, 0.005, 0.012)  # pad box half extents (x along approach, y opening, z width)

_LINK_SHAPES = {
    # link: (box half extents, box centre in the link frame, mass kg)
    "link1": ((0.04, 0.04, 0.03), (0.0, 0.0, 0.03), 0.6),
    "link2": ((0.03, 0.03, 0.16), (0.0, 0.0, 0.16), 0.8),
    "link3": ((0.09, 0.025, 0.025), (0.075, 0.0, 0.0), 0.5),
    "link4": ((0.08, 0.022, 0.022), (0.09, 0.0, 0.0), 0.3),
    "link5": ((0.03, 0.02, 0.02), (0.03, 0.0, 0.0), 0.2),
    "link6": ((0.02, 0.04, 0.02), (0.02, 0.0, 0.0), 0.2),
}


@dataclass(frozen=True)
class _Box:
    half: tuple[float, float, float]
    centre: tuple[float, float, float]


def _fmt(values: tuple[float, ...] | list[float]) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def _inertial(mass: float, half: tuple[float, float, float], centre: tuple[float, float, float]) -> str:
    sx, sy, sz = (2 * h for h in half)
    ixx = mass * (sy * sy + sz * sz) / 12
    iyy = mass * (sx * sx + sz * sz) / 12
    izz = mass * (sx * sx + sy * sy) / 12
    return (
        f'    <inertial><origin xyz="{_fmt(centre)}"/><mass value="{mass:.6g}"/>'
        f'<inertia ixx="{ixx:.6g}" iyy="{iyy:.6g}" izz="{izz:.6g}" ixy="0" ixz="0" iyz="0"/></inertial>\n'
    )


def _box_link(name: str, box: _Box | None, mass: float, colour: str, collide: bool = True) -> str:
    if box is None:
        return f'  <link name="{name}">\n{_inertial(0.01, (0.005, 0.005, 0.005), (0, 0, 0))}  </link>\n'
    size = _fmt(tuple(2 * h for h in box.half))
    geometry = f'<origin xyz="{_fmt(box.centre)}"/><geometry><box size="{size}"/></geometry>'
    text = f'  <link name="{name}">\n{_inertial(mass, box.half, box.centre)}'
    text += f'    <visual>{geometry}<material name="{colour}"/></visual>\n'
    if collide:
        text += f"    <collision>{geometry}</collision>\n"
    return text + "  </link>\n"


def _joint(name: str, kind: str, parent: str, child: str, xyz: tuple[float, ...], rpy: tuple[float, ...] = (0, 0, 0),
           axis: tuple[int, ...] | None = None, limits: tuple[float, float, float] | None = None) -> str:
    text = f'  <joint name="{name}" type="{kind}">\n    <parent link="{parent}"/><child link="{child}"/>\n'
    text += f'    <origin xyz="{_fmt(xyz)}" rpy="{_fmt(rpy)}"/>\n'
    if axis is not None:
        text += f'    <axis xyz="{_fmt(axis)}"/>\n'
    if limits is not None:
        lower, upper, velocity = limits
        text += f'    <limit lower="{lower:.6g}" upper="{upper:.6g}" effort="100" velocity="{velocity:.6g}"/>\n'
    return text + "  </joint>\n"


def _arm(arm: str) -> str:
    base = f"{arm}_base"
    text = _box_link(base, _Box((0.05, 0.05, 0.03), (0.0, 0.0, 0.03)), 2.0, "dark", collide=False)
    text += _joint(f"{arm}_mount", "fixed", "world", base, BASE_MOUNTS[arm], (0, 0, BASE_YAW))
    parent = base
    for name, xyz, axis, lower, upper, velocity in ARM_JOINT_TABLE:
        link = f"{arm}_{name.replace('joint', 'link')}"
        half, centre, mass = _LINK_SHAPES[link.split("_", 1)[1]]
        text += _box_link(link, _Box(half, centre), mass, "grey")
        text += _joint(f"{arm}_{name}", "revolute", parent, link, xyz, axis=axis, limits=(lower, upper, velocity))
        parent = link
    palm = f"{arm}_palm"
    text += _box_link(palm, _Box((0.015, 0.05, 0.02), (0.0, 0.0, 0.0)), 0.2, "dark")
    text += _joint(f"{arm}_palm_joint", "fixed", parent, palm, (0.055, 0.0, 0.0))
    pad_x = TCP_OFFSET_X + FINGERTIP_OFFSET - PAD_HALF[0]  # pad spans TCP−0.01 .. TCP+0.04 along +x
    for finger, sign, joint_name in ((f"{arm}_finger_a", 1, f"{arm}_gripper"), (f"{arm}_finger_b", -1,
                                                                                 f"{arm}_gripper_mirror")):
        pad_y = sign * (FINGER_CLOSED_GAP_HALF + PAD_HALF[1])
        text += _box_link(finger, _Box(PAD_HALF, (pad_x, pad_y, 0.0)), 0.05, "pad")
        text += _joint(joint_name, "prismatic", parent, finger, (0.0, 0.0, 0.0), axis=(0, sign, 0),
                       limits=(0.0, FINGER_TRAVEL, 0.2))
    tcp = f"{arm}_tcp"
    text += _box_link(tcp, None, 0.0, "dark")
    text += _joint(f"{arm}_tcp_joint", "fixed", parent, tcp, (TCP_OFFSET_X, 0.0, 0.0))
    camera = f"{arm}_wrist_camera"
    text += _box_link(camera, None, 0.0, "dark")
    # Wrist camera: just ahead of the palm, 0.045 m off the tool axis (link6 +z side), looking along the
    # approach, pitched 0.25 rad towards the fingers (SAPIEN camera frame: +x forward, +y left, +z up).
    text += _joint(f"{arm}_wrist_camera_joint", "fixed", parent, camera, (0.075, 0.0, 0.045), (0.0, 0.25, 0.0))
    return text


def rig_urdf_text() -> str:
    """The full rig URDF as text (deterministic, so it can be compared with the committed file)."""
    text = '<?xml version="1.0"?>\n<!-- Generated by robofollow_ros/robot/rig_urdf.py; edit the figures there. -->\n'
    text += '<robot name="robofollow_rig">\n'
    for name, rgba in (("grey", "0.6 0.6 0.62 1"), ("dark", "0.15 0.15 0.17 1"), ("pad", "0.05 0.05 0.05 1")):
        text += f'  <material name="{name}"><color rgba="{rgba}"/></material>\n'
    text += _box_link("world", None, 0.0, "dark")
    text += _arm("left") + _arm("right")
    text += _box_link("head_camera", None, 0.0, "dark")
    # Head camera behind the robot, above the table, looking at the operation area (see docs/sim.md).
    text += _joint("head_camera_joint", "fixed", "world", "head_camera", (0.0, -0.45, 1.45), (0.0, 1.1, math.pi / 2))
    return text + "</robot>\n"


def write_rig_urdf(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rig_urdf_text(), encoding="utf-8")
    return path


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    print(write_rig_urdf(share_path("urdf", "robofollow_rig.urdf")))
