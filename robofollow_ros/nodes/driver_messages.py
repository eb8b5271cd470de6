"""The arm drivers' messages, both ways, for every command interface of ``config/rig/arm_drivers.yaml``.

The arm bridge writes commands and reads states; the sim and mock nodes, which play the drivers,
read commands and write states. One module for both sides keeps them talking about the same
joint names, gripper units and message fields (a JointTrajectory's last point, a
Float64MultiArray's ``[joint1..joint6, gripper]``, a JointState's names).

An Interbotix xs_sdk (``type: interbotix``) takes one command on two topics: the six joints as a
``JointGroupCommand`` and the gripper as a ``JointSingleCommand`` (``rig/driver_config.py`` cites the
sources). Both carry float32: each value is rounded toward zero, so a target within limits that contain
zero (every arm joint's, and the gripper servo's turn) stays within them on the wire. Who plays the driver
gets each message's part (``command_part``); ``CommandPairs`` joins the parts into whole targets where a
whole row is needed (the lock-step sim).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robofollow_ros.nodes.conversions import MessageError
from robofollow_ros.rig.driver_config import ArmDriver

#: Message type of each command interface with one command topic.
COMMAND_TYPES: dict[str, Any] = {"joint_trajectory": JointTrajectory, "forward_command": Float64MultiArray,
                                 "joint_state": JointState}

#: One arm's position: six joints (rad) and the normalised gripper (1 open, 0 closed).
ArmPosition = tuple[np.ndarray, float]
#: What one command message says of an arm: its six joints, its normalised gripper, or both (None: not said).
CommandPart = tuple[np.ndarray | None, float | None]


def driver_names(driver: ArmDriver) -> list[str]:
    return [*driver.joints, driver.gripper.joint]


def _interbotix_types(driver: ArmDriver) -> tuple[Any, Any]:
    """``JointGroupCommand`` and ``JointSingleCommand``, imported for an xs_sdk's map only: a rig without Trossen's
    arms needs no interbotix_xs_msgs (``make setup`` builds it into the venv; a ROS workspace that runs an
    xs_sdk has it, from Interbotix/interbotix_ros_core)."""
    try:
        from interbotix_xs_msgs.msg import JointGroupCommand, JointSingleCommand
    except ImportError as exc:
        raise ValueError(f"{driver.arm} arm: a driver of type interbotix needs the interbotix_xs_msgs package ({exc}); "
                         "make setup builds it into the venv (tools/build_ros_msgs.sh), a ROS workspace gets it "
                         "with Interbotix's interbotix_ros_core") from None
    return JointGroupCommand, JointSingleCommand


def command_channels(driver: ArmDriver) -> list[tuple[str, Any]]:
    """``(topic, message type)`` of each topic ``driver``'s commands go out on, in ``command_messages``' order."""
    if driver.kind == "interbotix":
        group, single = _interbotix_types(driver)
        return [(driver.command_topic, group), (driver.single_topic, single)]
    return [(driver.command_topic, COMMAND_TYPES[driver.kind])]


def _float32_toward_zero(value: float) -> float:
    """``value`` as the float32 a message carries, rounded toward zero (never further from zero than it)."""
    rounded = np.float32(value)
    if abs(float(rounded)) > abs(value):
        rounded = np.nextafter(rounded, np.float32(0.0))
    return float(rounded)


def command_messages(driver: ArmDriver, joints: Iterable[float], gripper: float, stamp: Time) -> list[Any]:
    """The command(s) that move ``driver``'s arm to ``joints`` and the normalised ``gripper``, one per channel."""
    positions = [float(v) for v in joints] + [driver.gripper.to_driver(float(gripper))]
    if driver.kind == "interbotix":
        group, single = _interbotix_types(driver)
        values = [_float32_toward_zero(v) for v in positions]
        return [group(name=driver.group, cmd=values[:6]), single(name=driver.gripper.joint, cmd=values[6])]
    if driver.kind == "joint_trajectory":
        secs = driver.time_from_start
        point = JointTrajectoryPoint(positions=positions,
                                     time_from_start=Duration(sec=int(secs), nanosec=round(secs % 1 * 1e9)))
        return [JointTrajectory(joint_names=driver_names(driver), points=[point])]  # zero stamp: start now
    if driver.kind == "forward_command":
        return [Float64MultiArray(data=positions)]
    msg = JointState(name=driver_names(driver), position=positions)
    msg.header.stamp = stamp
    return [msg]


def command_message(driver: ArmDriver, joints: Iterable[float], gripper: float, stamp: Time) -> Any:
    """The one command of a driver with one command topic (not ``interbotix``: ``command_messages``)."""
    messages = command_messages(driver, joints, gripper, stamp)
    if len(messages) != 1:
        raise ValueError(f"{driver.arm} arm: a {driver.kind} driver takes {len(messages)} messages a command")
    return messages[0]


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
    if driver.kind == "interbotix":
        raise MessageError(f"{what}: an interbotix command comes in two messages (command_part)")
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


def command_part(driver: ArmDriver, msg: Any) -> CommandPart:
    """What one command message on one of ``driver``'s channels asks for: the whole target, or for an xs_sdk
    the six joints (a JointGroupCommand of its group) or the gripper (a JointSingleCommand of its joint)."""
    if driver.kind != "interbotix":
        return arm_from_command(driver, msg)
    group, _ = _interbotix_types(driver)
    if isinstance(msg, group):
        what = f"{driver.arm} command on {driver.command_topic}"
        if msg.name != driver.group:
            raise MessageError(f"{what}: group {msg.name!r}; this arm's six joints are group {driver.group!r}")
        joints = np.asarray(list(msg.cmd), dtype=np.float64)
        if joints.shape != (6,) or not np.all(np.isfinite(joints)):
            raise MessageError(f"{what}: expected six finite joint commands, got {list(msg.cmd)}")
        return joints, None
    what = f"{driver.arm} command on {driver.single_topic}"
    if msg.name != driver.gripper.joint:
        raise MessageError(f"{what}: joint {msg.name!r}; this arm's gripper is {driver.gripper.joint!r}")
    if not np.isfinite(msg.cmd):
        raise MessageError(f"{what}: non-finite gripper command {msg.cmd}")
    return None, driver.gripper.to_normalised(float(msg.cmd))


class CommandPairs:
    """Whole targets from one arm's command parts: a whole command passes at once; an xs_sdk's group and
    gripper commands are paired in the order they came (the k-th of each: one bridge command). At most
    ``limit`` unpaired parts of a kind are kept, the oldest dropped first."""

    def __init__(self, limit: int = 100) -> None:
        self._joints: deque[np.ndarray] = deque(maxlen=limit)
        self._grippers: deque[float] = deque(maxlen=limit)

    def add(self, part: CommandPart) -> ArmPosition | None:
        joints, gripper = part
        if joints is not None and gripper is not None:
            return joints, gripper
        if joints is not None:
            self._joints.append(joints)
        if gripper is not None:
            self._grippers.append(gripper)
        if self._joints and self._grippers:
            return self._joints.popleft(), self._grippers.popleft()
        return None


def state_message(drivers: Iterable[ArmDriver], positions: Mapping[str, ArmPosition], stamp: Time) -> JointState:
    """One driver joint-state message carrying the given arms (arms sharing a state topic share it); an xs_sdk's
    also carries the fingers its gripper servo drives, when the map names them (``fingers``)."""
    msg = JointState()
    msg.header.stamp = stamp
    for driver in drivers:
        joints, gripper = positions[driver.arm]
        servo = driver.gripper.to_driver(float(gripper))
        msg.name.extend(driver_names(driver))
        msg.position.extend([*(float(v) for v in joints), servo])
        if driver.fingers is not None:
            finger = driver.fingers.finger(servo)
            msg.name.extend([driver.fingers.left, driver.fingers.right])
            msg.position.extend([finger, -finger])
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
