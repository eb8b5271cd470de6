"""The arm drivers' messages, both ways, for every command interface of ``config/rig/arm_drivers.yaml``.

The arm bridge writes commands and reads states; the sim and mock nodes, which play the drivers,
read commands and write states. One module for both sides keeps them talking about the same
joint names, gripper units and message fields (a JointTrajectory's last point, a
Float64MultiArray's ``[joint1..joint6, gripper]``, a JointState's names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robofollow_ros.nodes.conversions import MessageError
from robofollow_ros.rig.driver_config import ArmDriver

#: Message type of each command interface.
COMMAND_TYPES: dict[str, Any] = {"joint_trajectory": JointTrajectory, "forward_command": Float64MultiArray,
                                 "joint_state": JointState}

#: One arm's position: six joints (rad) and the normalised gripper (1 open, 0 closed).
ArmPosition = tuple[np.ndarray, float]


def driver_names(driver: ArmDriver) -> list[str]:
    return [*driver.joints, driver.gripper.joint]


def command_message(driver: ArmDriver, joints: Iterable[float], gripper: float, stamp: Time) -> Any:
    """The command that moves ``driver``'s arm to ``joints`` and the normalised ``gripper``."""
    positions = [float(v) for v in joints] + [driver.gripper.to_driver(float(gripper))]
    if driver.kind == "joint_trajectory":
        secs = driver.time_from_start
        point = JointTrajectoryPoint(positions=positions,
                                     time_from_start=Duration(sec=int(secs), nanosec=round(secs % 1 * 1e9)))
        return JointTrajectory(joint_names=driver_names(driver), points=[point])  # zero stamp: start now
    if driver.kind == "forward_command":
        return Float64MultiArray(data=positions)
    msg = JointState(name=driver_names(driver), position=positions)
    msg.header.stamp = stamp
    return msg


def _by_name(names: list[str], values: list[float], driver: ArmDriver, what: str) -> list[float]:
    if len(names) != len(values):
        raise MessageError(f"{what}: {len(names)} names but {len(values)} positions")
    index = dict(zip(names, values, strict=True))
    missing = [n for n in driver_names(driver) if n not in index]
    if missing:
        raise MessageError(f"{what}: lacks the {driver.arm} arm's joints {missing}")
    return [float(index[n]) for n in driver_names(driver)]


def _position(driver: ArmDriver, values: list[float]) -> ArmPosition:
    joints = np.asarray(values[:6], dtype=np.float64)
    gripper = driver.gripper.to_normalised(values[6])
    if not (np.all(np.isfinite(joints)) and np.isfinite(gripper)):
        raise MessageError(f"{driver.arm} arm: non-finite positions {values}")
    return joints, float(gripper)


def arm_from_command(driver: ArmDriver, msg: Any) -> ArmPosition:
    """The target a driver command asks for (a trajectory's last point: where the motion ends)."""
    what = f"{driver.arm} command on {driver.command_topic}"
    if driver.kind == "joint_trajectory":
        if not msg.points:
            raise MessageError(f"{what}: a trajectory without points")
        values = _by_name(list(msg.joint_names), list(msg.points[-1].positions), driver, what)
    elif driver.kind == "forward_command":
        values = [float(v) for v in msg.data]
        if len(values) != 7:
            raise MessageError(f"{what}: {len(values)} values; expected joint1..joint6 and the gripper")
    else:
        values = _by_name(list(msg.name), list(msg.position), driver, what)
    return _position(driver, values)


def state_message(drivers: Iterable[ArmDriver], positions: Mapping[str, ArmPosition], stamp: Time) -> JointState:
    """One driver joint-state message carrying the given arms (arms sharing a state topic share it)."""
    msg = JointState()
    msg.header.stamp = stamp
    for driver in drivers:
        joints, gripper = positions[driver.arm]
        msg.name.extend(driver_names(driver))
        msg.position.extend([*(float(v) for v in joints), driver.gripper.to_driver(float(gripper))])
    return msg


def arm_from_state(driver: ArmDriver, msg: JointState) -> ArmPosition:
    """``driver``'s arm position in a driver joint-state message."""
    return _position(driver, _by_name(list(msg.name), list(msg.position), driver,
                                      f"{driver.arm} state on {driver.state_topic}"))


def group_by_topic(drivers: Iterable[ArmDriver], topic: str) -> dict[str, list[ArmDriver]]:
    """Drivers grouped by their ``state_topic`` or ``command_topic`` (one publisher/subscription per topic)."""
    groups: dict[str, list[ArmDriver]] = {}
    for driver in drivers:
        groups.setdefault(getattr(driver, topic), []).append(driver)
    return groups
