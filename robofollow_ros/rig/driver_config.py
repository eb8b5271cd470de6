"""How the contract's 14 joints map onto a rig's arm drivers, read from YAML.

A rig's controllers speak in their own joint names, units and message types. This file describes,
per arm, which command interface to use (ros2_control joint_trajectory_controller, a
forward_command_controller, a JointState command topic or an Interbotix xs_sdk), the driver's joint names, the topic
its joint states arrive on, and how the normalised gripper (1 = open, 0 = closed) maps to driver units.

**Gripper ranges.** A gripper's ``closed`` and ``open`` are driver positions, and the bridge commands
every value between them. So they must lie within the URDF's finger joint (``<arm>_gripper``, one
finger's travel in metres, [0, 0.04] on this rig): ``check_gripper_ranges`` refuses a map that would
command a finger beyond it, with one line naming the file, the field and the value. Refusing at load
time rather than clamping each command keeps the map honest both ways: a clamped ``open`` would make
"fully open" quietly mean less than the YAML says, and the measured reading (``to_normalised``) would no
longer be the inverse of the command. ``measures`` says what the driver's gripper value is: ``finger``
(default; one finger's travel, the URDF joint itself) or ``opening`` (the distance between the jaws, both
fingers' travel: twice the URDF joint — AgileX's Piper driver reports it so) or ``motor`` (below). Anything
else cannot be checked and is refused.

**Motor grippers** (``measures: motor``). Trossen's ALOHA followers command the gripper servo itself: a
``JointSingleCommand`` named ``gripper`` whose value is the servo's angle in radians (the follower runs the gripper
in ``current_based_position`` mode; Interbotix/aloha ``aloha/robot_utils.py`` ``setup_follower_bot``, and
``aloha/constants.py`` ``FOLLOWER_GRIPPER_JOINT_CLOSE = 0.6197``, ``FOLLOWER_GRIPPER_JOINT_OPEN = 1.6214``, commit
4fa6b2c4428f5334441a7bee5ab2b2e8071cff93). No URDF joint measures that angle: the fingers are slides in metres,
moved by a swing-arm linkage whose geometry lives in the driver's motor config, not in the URDF. So a ``motor``
gripper is not compared with the rig's finger joint; what is checked instead is that ``closed`` and ``open`` lie
within one turn of the servo, [−π, π] rad, which is the position range Interbotix configures the gripper servo
to (``Min_Position_Limit: 0``, ``Max_Position_Limit: 4095`` ticks of 4096 a turn, tick 2048 = 0 rad; Interbotix/
interbotix_ros_manipulators ``interbotix_xsarm_control/config/aloha_vx300s.yaml``, commit
022f49edb4f87a270165c6c9d8561b70ca468bff). The angle is read back from the same joint (``gripper`` in the
driver's joint states), so the reading stays the exact inverse of the command and a hold holds the gripper
where it is. (ALOHA's own recordings normalise the *finger* position, 0.0440..0.0579 m, for observations and
the servo angle for actions; the linkage is not linear, so the two normalisations differ mid-way. This map uses
the servo angle both ways.)

**Interbotix X-Series drivers** (``type: interbotix``): one ``xs_sdk`` node per arm under its robot name (e.g.
``/follower_left``) takes ``interbotix_xs_msgs/JointGroupCommand`` (``name`` = the group, ``arm``; ``cmd`` = the
six joints in the group's order) on ``<ns>/commands/joint_group`` and ``JointSingleCommand`` (``name``,
``cmd``) on ``<ns>/commands/joint_single``, and publishes ``sensor_msgs/JointState`` on ``<ns>/joint_states``:
the joints by name (radians), the gripper servo (``gripper``, radians) and the two fingers it drives
(``left_finger`` = d, ``right_finger`` = −d, metres). Sources: Interbotix/interbotix_ros_core
``interbotix_ros_xseries/interbotix_xs_sdk/src/xs_sdk_obj.cpp`` (branch jazzy, commit
bf127b474e0554b93ef18b51becba38da9cbc255: ``robot_init_subscribers``, ``robot_update_joint_states``) and
Interbotix/aloha ``aloha/robot_utils.py`` (``Recorder``: ``/follower_{side}/commands/joint_group`` ...).
``fingers`` (optional) gives the finger joints' names and the linkage, for those who play the driver (the mock
hardware publishes the fingers as the xs_sdk does); the bridge reads only the six joints and ``gripper``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from robofollow_ros.contract import ARMS
from robofollow_ros.paths import share_path
from robofollow_ros.robot.urdf_limits import JointLimit
from robofollow_ros.yamlio import read_yaml_mapping

CommandKind = Literal["joint_trajectory", "forward_command", "joint_state", "interbotix"]
COMMAND_KINDS: tuple[str, ...] = ("joint_trajectory", "forward_command", "joint_state", "interbotix")

#: What a driver's gripper value measures, and how many URDF finger joints' travel make one unit of it.
GRIPPER_MEASURES: dict[str, float] = {"finger": 1.0, "opening": 2.0}
#: A gripper servo's angle (rad), which no URDF joint measures: checked against the servo's turn instead.
MOTOR = "motor"
MEASURES: tuple[str, ...] = (*GRIPPER_MEASURES, MOTOR)
#: The range a ``motor`` gripper's closed/open must lie in: one turn of an Interbotix servo (module docstring).
SERVO_RANGE_RAD = (-math.pi, math.pi)

#: Each kind's fields besides ``type``, ``joints`` and ``gripper`` (the rest are refused, naming them).
_FIELDS: dict[str, tuple[str, ...]] = {
    "ros": ("command_topic", "state_topic", "time_from_start"),
    "interbotix": ("namespace", "group", "group_topic", "single_topic", "state_topic", "fingers"),
}

#: Shipped presets under ``config/rig/`` known by a shorter name (``--driver-config aloha``).
PRESET_ALIASES: dict[str, str] = {"aloha": "aloha_interbotix"}


@dataclass(frozen=True)
class GripperMapping:
    """Driver gripper position = closed + g · (open − closed), for g in [0, 1]."""

    joint: str
    closed: float
    open: float
    #: ``finger`` (one finger's travel, the URDF joint), ``opening`` (between the jaws: twice it) or ``motor``
    #: (the gripper servo's angle, rad; no URDF joint measures it).
    measures: str = "finger"

    def to_driver(self, normalised: float) -> float:
        """The driver position for ``normalised``, never outside [closed, open] (whatever the rounding)."""
        value = self.closed + normalised * (self.open - self.closed)
        low, high = min(self.closed, self.open), max(self.closed, self.open)
        return min(high, max(low, value))

    def to_finger(self, driver_value: float) -> float:
        """A driver position as the URDF finger joint's position (not for ``motor``: no URDF joint measures it)."""
        if self.measures not in GRIPPER_MEASURES:
            raise ValueError(f"gripper {self.joint!r} measures {self.measures}: no URDF finger position for it")
        return driver_value / GRIPPER_MEASURES[self.measures]

    def to_normalised(self, driver_value: float) -> float:
        span = self.open - self.closed
        return min(1.0, max(0.0, (driver_value - self.closed) / span))


@dataclass(frozen=True)
class FingerLinkage:
    """An Interbotix swing-arm gripper: the finger joints its xs_sdk reports and the linkage that moves them.

    The servo horn (radius r) swings a rod (length L) that slides each finger; at servo angle θ one finger sits
    at d = r·sin θ + √(L² − r²·cos² θ) metres (the xs_sdk reports ``left`` = d, ``right`` = −d). This is the
    geometry of Interbotix/interbotix_xs_driver ``src/xs_driver.cpp`` ``convert_angular_position_to_linear``
    (branch ros2-devel, commit 68e3fda69452fcac22c4fb0ff68793cfcb35af58); r and L are the motor config's
    ``horn_radius`` and ``arm_length`` (0.022 and 0.036 m in ``aloha_vx300s.yaml``: 0.6197 rad → 0.0440 m and
    1.6214 rad → 0.0580 m, where ALOHA's FOLLOWER_GRIPPER_POSITION_CLOSE/OPEN say 0.0440 and 0.0579).
    """

    left: str
    right: str
    horn_radius: float
    arm_length: float

    def finger(self, angle: float) -> float:
        r, length = self.horn_radius, self.arm_length
        return r * math.sin(angle) + math.sqrt(length * length - (r * math.cos(angle)) ** 2)


@dataclass(frozen=True)
class ArmDriver:
    """One arm's driver: its command topic and type, joint names in contract order, state topic."""

    arm: str
    kind: CommandKind
    #: The command topic; for ``interbotix`` the JointGroupCommand topic of the six arm joints.
    command_topic: str
    state_topic: str
    joints: tuple[str, ...]  # six driver joint names, in contract order joint1..joint6
    gripper: GripperMapping
    #: joint_trajectory only: time_from_start of the single point, seconds.
    time_from_start: float = 0.05
    #: interbotix only: the gripper's JointSingleCommand topic.
    single_topic: str = ""
    #: interbotix only: the JointGroupCommand's ``name``, the xs_sdk's group of the six joints.
    group: str = ""
    #: interbotix only, optional: the finger joints the xs_sdk adds to its joint states, and their linkage.
    fingers: FingerLinkage | None = None

    @property
    def command_topics(self) -> tuple[str, ...]:
        """Every topic the arm's commands go out on (two for ``interbotix``: the group's and the gripper's)."""
        return (self.command_topic, self.single_topic) if self.kind == "interbotix" else (self.command_topic,)


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


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: {value!r} is not a name")
    return value


def _number(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{where}: {value!r} is not a finite number")
    return number


def _gripper(spec: dict[str, Any], where: str) -> GripperMapping:
    g = _field(spec, "gripper", where)
    if not isinstance(g, dict):
        raise ValueError(f"{where}.gripper: need a mapping with joint, closed, open")
    measures = g.get("measures", "finger")
    if not isinstance(measures, str) or measures not in MEASURES:
        raise ValueError(f"{where}.gripper.measures: {measures!r} is not one of {', '.join(MEASURES)}")
    gripper = GripperMapping(
        str(_field(g, "joint", f"{where}.gripper")),
        _number(_field(g, "closed", f"{where}.gripper"), f"{where}.gripper.closed"),
        _number(_field(g, "open", f"{where}.gripper"), f"{where}.gripper.open"),
        measures,
    )
    if gripper.open == gripper.closed:
        raise ValueError(f"{where}.gripper: open and closed are both {gripper.open}")
    if measures == MOTOR:  # no URDF joint to bound it: the servo's own turn does (module docstring)
        low, high = SERVO_RANGE_RAD
        for name in ("closed", "open"):
            value = getattr(gripper, name)
            if not low <= value <= high:
                raise ValueError(f"{where}.gripper.{name}: {value!r} lies outside the gripper servo's turn "
                                 f"[{low:.5f}, {high:.5f}] rad (measures: motor)")
    return gripper


def _fingers(value: Any, where: str) -> FingerLinkage:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: need a mapping with left, right, horn_radius, arm_length")
    linkage = FingerLinkage(
        _name(_field(value, "left", where), f"{where}.left"),
        _name(_field(value, "right", where), f"{where}.right"),
        _number(_field(value, "horn_radius", where), f"{where}.horn_radius"),
        _number(_field(value, "arm_length", where), f"{where}.arm_length"),
    )
    if not linkage.horn_radius > 0:
        raise ValueError(f"{where}.horn_radius: must be > 0, got {linkage.horn_radius}")
    if not linkage.arm_length > linkage.horn_radius:
        raise ValueError(f"{where}.arm_length: must be longer than horn_radius ({linkage.horn_radius}), "
                         f"got {linkage.arm_length}")
    return linkage


def _arm(arm: str, spec: dict[str, Any], where: str) -> ArmDriver:
    kind = _field(spec, "type", where)
    if kind not in COMMAND_KINDS:
        raise ValueError(f"{where}.type: {kind!r} is not one of {', '.join(COMMAND_KINDS)}")
    fields = _FIELDS["interbotix" if kind == "interbotix" else "ros"]
    for key in spec:
        if key not in ("type", "joints", "gripper", *fields):
            raise ValueError(f"{where}.{key}: not a field of a driver of type {kind} (its fields: type, joints, "
                             f"gripper, {', '.join(fields)})")
    joints = _field(spec, "joints", where)
    if not (isinstance(joints, list) and len(joints) == 6 and all(isinstance(j, str) for j in joints)):
        raise ValueError(f"{where}.joints: need six driver joint names, got {joints!r}")
    gripper = _gripper(spec, where)
    if kind != "interbotix":
        tfs = float(spec.get("time_from_start", 0.05))
        if not tfs > 0:
            raise ValueError(f"{where}.time_from_start: must be > 0, got {tfs}")
        driver = ArmDriver(arm=arm, kind=kind,
                           command_topic=_topic(_field(spec, "command_topic", where), f"{where}.command_topic"),
                           state_topic=_topic(_field(spec, "state_topic", where), f"{where}.state_topic"),
                           joints=tuple(joints), gripper=gripper, time_from_start=tfs)
    else:
        driver = _interbotix(arm, spec, where, tuple(joints), gripper)
    names = [*driver.joints, driver.gripper.joint]
    if driver.fingers is not None:
        names += [driver.fingers.left, driver.fingers.right]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{where}: driver joint names {repeated} repeat (joints, gripper.joint and fingers "
                         "each name one joint)")
    return driver


def _interbotix(arm: str, spec: dict[str, Any], where: str, joints: tuple[str, ...],
                gripper: GripperMapping) -> ArmDriver:
    """An xs_sdk's topics: ``namespace`` (its robot name) gives the three; ``group_topic`` etc. override one."""
    namespace = spec.get("namespace")
    if namespace is not None:
        namespace = _topic(namespace, f"{where}.namespace")
        if namespace.endswith("/") or "//" in namespace:
            raise ValueError(f"{where}.namespace: {namespace!r} is not a namespace like /follower_left")

    def topic(key: str, suffix: str) -> str:
        if key in spec:
            return _topic(spec[key], f"{where}.{key}")
        if namespace is None:
            raise ValueError(f"{where}.{key}: missing (give namespace, e.g. /follower_left, or {key} itself)")
        return f"{namespace}/{suffix}"

    return ArmDriver(
        arm=arm, kind="interbotix",
        command_topic=topic("group_topic", "commands/joint_group"),
        single_topic=topic("single_topic", "commands/joint_single"),
        state_topic=topic("state_topic", "joint_states"),
        joints=joints, gripper=gripper,
        group=_name(spec.get("group", "arm"), f"{where}.group"),
        fingers=_fingers(spec["fingers"], f"{where}.fingers") if "fingers" in spec else None,
    )


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
        arms[arm] = _arm(arm, spec, where)
    seen: dict[str, str] = {}
    for arm, driver in arms.items():
        fields = ("group_topic", "single_topic") if driver.kind == "interbotix" else ("command_topic",)
        for field, topic in zip(fields, driver.command_topics, strict=True):
            if topic in seen:
                raise ValueError(f"{source}: arms.{arm}.{field}: {topic!r} is also {seen[topic]}; each arm needs "
                                 "its own command topics (state topics may be shared)")
            seen[topic] = f"arms.{arm}.{field}"
    return DriverConfig(arms)


def finger_joint_limit(arm: str, joint_limits: Mapping[str, JointLimit]) -> tuple[str, JointLimit] | None:
    """The rig's finger joint of ``arm`` (one finger's travel, m) and its URDF limits; None when it has none.

    The one place that says which URDF joint bounds a gripper: the contract's ``<arm>_gripper`` of the limits
    ``robot.urdf_limits.rig_joint_limits`` reads, which is the travel of the rig's first finger joint of that arm
    (the ALOHA twin's ``vx300s_left/left_finger``, 0.021…0.057 m)."""
    joint = f"{arm}_gripper"
    limit = joint_limits.get(joint)
    return None if limit is None else (joint, limit)


def check_gripper_ranges(config: DriverConfig, joint_limits: Mapping[str, JointLimit],
                         source: str = "<config>") -> None:
    """Refuse a map whose gripper ``closed`` or ``open`` lies outside the rig's finger joint (``finger_joint_limit``).

    A ``motor`` gripper is not compared with it (no URDF joint measures a servo angle); its servo range was
    checked when the map was read."""
    for arm, driver in config.arms.items():
        g = driver.gripper
        if g.measures == MOTOR:
            continue
        found = finger_joint_limit(arm, joint_limits)
        if found is None:
            raise ValueError(f"{source}: arms.{arm}.gripper: the URDF has no joint {arm + '_gripper'!r} to bound it")
        joint, limit = found
        for name in ("closed", "open"):
            value = getattr(g, name)
            finger = g.to_finger(value)
            if not limit.lower <= finger <= limit.upper:
                scale = GRIPPER_MEASURES[g.measures]
                unit = f"the {g.measures} between the jaws" if g.measures == "opening" else "one finger's travel"
                raise ValueError(
                    f"{source}: arms.{arm}.gripper.{name}: {value!r} lies outside the URDF's {joint} range "
                    f"[{limit.lower * scale:g}, {limit.upper * scale:g}] ({unit}, measures: {g.measures})")


def driver_presets() -> list[str]:
    """The driver-map presets shipped under ``config/rig/`` (files with ``arms``), and their aliases."""
    names = []
    for path in sorted(share_path("config", "rig").glob("*.yaml")):
        try:
            if "arms" in read_yaml_mapping(path, "driver_config"):
                names.append(path.stem)
        except ValueError:
            continue
    return sorted(names + [alias for alias, stem in PRESET_ALIASES.items() if stem in names])


def rig_driver_config() -> str:
    """The driver map of the active rig (its YAML's ``driver_config``), else ``config/rig/arm_drivers.yaml``: what
    the nodes' ``driver_config`` parameter means when empty."""
    from robofollow_ros.robot.rig_config import load_rig_config

    return load_rig_config().driver_config or str(share_path("config", "rig", "arm_drivers.yaml"))


def driver_config_file(name: str) -> Path:
    """A driver map: a preset under ``config/rig/`` by name (``.yaml`` optional; ``aloha`` for
    ``aloha_interbotix``) or a path. A bare name that is neither a file here nor a preset is an error naming
    the presets."""
    path = Path(name)
    if len(path.parts) != 1 or path.is_file():
        return path
    stem = name[:-len(".yaml")] if name.endswith(".yaml") else name
    preset = share_path("config", "rig", f"{PRESET_ALIASES.get(stem, stem)}.yaml")
    if not preset.is_file():
        raise ValueError(f"{name!r} is neither a driver map file nor a preset under config/rig/ "
                         f"(presets: {', '.join(driver_presets())})")
    return preset


def load_driver_config(path: str | Path, joint_limits: Mapping[str, JointLimit] | None = None) -> DriverConfig:
    """Read a driver map (a path, or a preset's name: ``driver_config_file``); with ``joint_limits`` (the URDF's),
    its gripper ranges are checked against them."""
    path = driver_config_file(str(path))
    config = parse_driver_config(read_yaml_mapping(path, "driver_config"), str(path))
    if joint_limits is not None:
        check_gripper_ranges(config, joint_limits, str(path))
    return config
