"""How the contract's 14 joints map onto a rig's arm drivers, read from YAML.

A rig's controllers speak in their own joint names, units and message types. This file describes,
per arm, which command interface to use (ros2_control joint_trajectory_controller, a
forward_command_controller or a JointState command topic), the driver's joint names, the topic
its joint states arrive on, and how the normalised gripper (1 = open, 0 = closed) maps to driver units.

**Gripper ranges.** A gripper's ``closed`` and ``open`` are driver positions, and the bridge commands
every value between them. So they must lie within the URDF's finger joint (``<arm>_gripper``, one
finger's travel in metres, [0, 0.04] on this rig): ``check_gripper_ranges`` refuses a map that would
command a finger beyond it, with one line naming the file, the field and the value. Refusing at load
time rather than clamping each command keeps the map honest both ways: a clamped ``open`` would make
"fully open" quietly mean less than the YAML says, and the measured reading (``to_normalised``) would no
longer be the inverse of the command. ``measures`` says what the driver's gripper value is: ``finger``
(default; one finger's travel, the URDF joint itself) or ``opening`` (the distance between the jaws, both
fingers' travel: twice the URDF joint — AgileX's Piper driver reports it so). Anything else cannot be
checked against the URDF and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from robofollow_ros.contract import ARMS
from robofollow_ros.robot.urdf_limits import JointLimit
from robofollow_ros.yamlio import read_yaml_mapping

CommandKind = Literal["joint_trajectory", "forward_command", "joint_state"]
COMMAND_KINDS: tuple[str, ...] = ("joint_trajectory", "forward_command", "joint_state")

#: What a driver's gripper value measures, and how many URDF finger joints' travel make one unit of it.
GRIPPER_MEASURES: dict[str, float] = {"finger": 1.0, "opening": 2.0}


@dataclass(frozen=True)
class GripperMapping:
    """Driver gripper position = closed + g · (open − closed), for g in [0, 1]."""

    joint: str
    closed: float
    open: float
    #: ``finger`` (one finger's travel, the URDF joint) or ``opening`` (between the jaws: twice it).
    measures: str = "finger"

    def to_driver(self, normalised: float) -> float:
        """The driver position for ``normalised``, never outside [closed, open] (whatever the rounding)."""
        value = self.closed + normalised * (self.open - self.closed)
        low, high = min(self.closed, self.open), max(self.closed, self.open)
        return min(high, max(low, value))

    def to_finger(self, driver_value: float) -> float:
        """A driver position as the URDF finger joint's position."""
        return driver_value / GRIPPER_MEASURES[self.measures]

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


def _number(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{where}: {value!r} is not a finite number")
    return number


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
        measures = g.get("measures", "finger")
        if not isinstance(measures, str) or measures not in GRIPPER_MEASURES:
            raise ValueError(f"{where}.gripper.measures: {measures!r} is not one of {', '.join(GRIPPER_MEASURES)}")
        gripper = GripperMapping(
            str(_field(g, "joint", f"{where}.gripper")),
            _number(_field(g, "closed", f"{where}.gripper"), f"{where}.gripper.closed"),
            _number(_field(g, "open", f"{where}.gripper"), f"{where}.gripper.open"),
            measures,
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


def check_gripper_ranges(config: DriverConfig, joint_limits: Mapping[str, JointLimit],
                         source: str = "<config>") -> None:
    """Refuse a map whose gripper ``closed`` or ``open`` lies outside the URDF's finger joint ``<arm>_gripper``."""
    for arm, driver in config.arms.items():
        joint = f"{arm}_gripper"
        limit = joint_limits.get(joint)
        if limit is None:
            raise ValueError(f"{source}: arms.{arm}.gripper: the URDF has no joint {joint!r} to bound it")
        g = driver.gripper
        for name in ("closed", "open"):
            value = getattr(g, name)
            finger = g.to_finger(value)
            if not limit.lower <= finger <= limit.upper:
                scale = GRIPPER_MEASURES[g.measures]
                unit = f"the {g.measures} between the jaws" if g.measures == "opening" else "one finger's travel"
                raise ValueError(
                    f"{source}: arms.{arm}.gripper.{name}: {value!r} lies outside the URDF's {joint} range "
                    f"[{limit.lower * scale:g}, {limit.upper * scale:g}] ({unit}, measures: {g.measures})")


def load_driver_config(path: str | Path, joint_limits: Mapping[str, JointLimit] | None = None) -> DriverConfig:
    """Read a driver map; with ``joint_limits`` (the URDF's), its gripper ranges are checked against them."""
    path = Path(path)
    config = parse_driver_config(read_yaml_mapping(path, "driver_config"), str(path))
    if joint_limits is not None:
        check_gripper_ranges(config, joint_limits, str(path))
    return config
