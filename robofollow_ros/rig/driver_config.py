"""How the contract's 14 joints map onto a rig's arm drivers, read from YAML.

A rig's controllers speak in their own joint names, units and message types. This file describes,
per arm, which command interface to use (ros2_control joint_trajectory_controller, a
forward_command_controller or a JointState command topic), the driver's joint names, the topic
its joint states arrive on, and how the normalised gripper (1 = open, 0 = closed) maps to driver units.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from robofollow_ros.contract import ARMS
from robofollow_ros.yamlio import read_yaml_mapping

CommandKind = Literal["joint_trajectory", "forward_command", "joint_state"]
COMMAND_KINDS: tuple[str, ...] = ("joint_trajectory", "forward_command", "joint_state")


@dataclass(frozen=True)
class GripperMapping:
    """Driver gripper position = closed + g · (open − closed), for g in [0, 1]."""

    joint: str
    closed: float
    open: float

    def to_driver(self, normalised: float) -> float:
        return self.closed + normalised * (self.open - self.closed)

    def to_normalised(self, driver_value: float) -> float:
        span = self.open - self.closed
        return min(1.0, max(0.0, (driver_value - self.closed) / span))


@dataclass(frozen=True)
class ArmDriver:
    """One arm's driver: its command topic and type, joint names in contract order, state topic."""

    arm: str
    kind: CommandKind
    command_topic: str
    state_topic: str
    joints: tuple[str, ...]  # six driver joint names, in contract order joint1..joint6
    gripper: GripperMapping
    #: joint_trajectory only: time_from_start of the single point, seconds.
    time_from_start: float = 0.05


@dataclass(frozen=True)
class DriverConfig:
    arms: dict[str, ArmDriver]


def _field(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise ValueError(f"{where}.{key}: missing")
    return data[key]


def _topic(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(f"{where}: {value!r} is not an absolute topic name")
    return value


def parse_driver_config(data: dict[str, Any], source: str = "<config>") -> DriverConfig:
    """Validate a parsed YAML mapping; every error names the file and the dotted field."""
    if not isinstance(data, dict) or "arms" not in data:
        raise ValueError(f"{source}: top-level key 'arms' is missing")
    arms: dict[str, ArmDriver] = {}
    for arm in ARMS:
        where = f"{source}: arms.{arm}"
        spec = data["arms"].get(arm) if isinstance(data["arms"], dict) else None
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: missing")
        kind = _field(spec, "type", where)
        if kind not in COMMAND_KINDS:
            raise ValueError(f"{where}.type: {kind!r} is not one of {', '.join(COMMAND_KINDS)}")
        joints = _field(spec, "joints", where)
        if not (isinstance(joints, list) and len(joints) == 6 and all(isinstance(j, str) for j in joints)):
            raise ValueError(f"{where}.joints: need six driver joint names, got {joints!r}")
        g = _field(spec, "gripper", where)
        if not isinstance(g, dict):
            raise ValueError(f"{where}.gripper: need a mapping with joint, closed, open")
        gripper = GripperMapping(
            str(_field(g, "joint", f"{where}.gripper")),
            float(_field(g, "closed", f"{where}.gripper")),
            float(_field(g, "open", f"{where}.gripper")),
        )
        if gripper.open == gripper.closed:
            raise ValueError(f"{where}.gripper: open and closed are both {gripper.open}")
        tfs = float(spec.get("time_from_start", 0.05))
        if not tfs > 0:
            raise ValueError(f"{where}.time_from_start: must be > 0, got {tfs}")
        arms[arm] = ArmDriver(
            arm=arm,
            kind=kind,
            command_topic=_topic(_field(spec, "command_topic", where), f"{where}.command_topic"),
            state_topic=_topic(_field(spec, "state_topic", where), f"{where}.state_topic"),
            joints=tuple(joints),
            gripper=gripper,
            time_from_start=tfs,
        )
    if arms["left"].command_topic == arms["right"].command_topic:
        raise ValueError(f"{source}: arms.right.command_topic: {arms['right'].command_topic!r} is also the left "
                         "arm's; each arm needs its own command topic (state topics may be shared)")
    return DriverConfig(arms)


def load_driver_config(path: str | Path) -> DriverConfig:
    path = Path(path)
    return parse_driver_config(read_yaml_mapping(path, "driver_config"), str(path))
