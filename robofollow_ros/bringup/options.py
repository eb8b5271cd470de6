"""The choices a user makes on top of a profile — the same for ``robofollow bringup`` and ``ros2 launch``.

Each choice lands on node parameters or remappings in one place, so the CLI's flags
(``--scene``, ``--policy``, ``--foxglove-port`` ...) and the launch arguments (``scene:=``,
``policy:=``, ``foxglove_port:=`` ...) mean the same thing; only how an error names the choice
differs (``--foxglove-port`` vs ``foxglove_port:=``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from robofollow_ros.bringup.profiles import (
    TRIAL_MANAGER,
    Profile,
    ProfileError,
    check_parameters,
    load_profile,
    load_remap_file,
    parse_remappings,
    with_overrides,
    without_nodes,
)
from robofollow_ros.policy.spec import PolicySpecError, check_privileged

#: Nodes that play or drive the arms: all of them must read the same driver map.
DRIVER_NODES = ("arm_bridge_node", "sim_node", "mock_hardware_node")

#: Launch arguments (name -> (default, description)); the launch files declare exactly these.
LAUNCH_ARGUMENTS: dict[str, tuple[str, str]] = {
    "use_sim": ("false", "true: the SAPIEN simulation (profile sim); false: the physical rig (profile rig)"),
    "use_mock_hardware": ("false", "true: mock drivers and still cameras, no physics and no SAPIEN (profile mock)"),
    "profile": ("", "a profile YAML to use instead of the one use_sim / use_mock_hardware pick"),
    "rig": ("", "rig: a name (robofollow, aloha, …: config/rigs/) or a rig YAML / folder, set as ROBOFOLLOW_RIG "
                "for every node; empty: $ROBOFOLLOW_RIG or the built-in rig"),
    "scene": ("", "as robofollow eval --scene: all or a comma list of scene1..scene4"),
    "levels": ("", "as robofollow eval --levels: a comma list of L0..L3"),
    "limit": ("", "as robofollow eval --limit: the first K selected tasks of each scene and level"),
    "tasks": ("", "as robofollow eval --tasks: a comma list of evaluation task ids"),
    "rounds": ("", "as robofollow eval --rounds: rounds per task, 1..10"),
    "max_steps": ("", "policy calls per trial (the step budget)"),
    "controls": ("", "as robofollow eval --controls: instruction controls (blank, shuffled, swap, paraphrase) run "
                     "beside every trial on its seed, interleaved in a seeded random order and blinded: the operator "
                     "is not told which instruction a trial got until the run ends (docs/controls.md)"),
    "unblind": ("", "true: with controls, tell the operator each trial's instruction and control (debugging); "
                    "recorded in run.json"),
    "policy_timeout": ("", "as robofollow eval --policy-timeout: longest policy call before its trial fails, s "
                           "(empty: the profile's, 300)"),
    "policy": ("", "policy SPEC for policy_node: hold | oracle | module:function | tcp://HOST:PORT | openpi://..."),
    "policy_kwargs": ("", "JSON object of keyword arguments for the policy (as robofollow eval --kwargs)"),
    "privileged": ("", "as robofollow eval --privileged: true hands any policy the privileged state (task id, "
                       "true object poses), also over tcp://; recorded in run.json (empty: the profile's, false)"),
    "execution": ("", "lockstep (the sim world waits for the policy; scoring parity) | rate (sim: the world "
                      "steps on a wall-clock timer at control_hz, policy_node sends rows at that rate, synchronous "
                      "chunks) | realtime (rate, with the real-time chunk executor); empty: the profile's; "
                      "recorded in run.json"),
    "merge": ("", "execution:=realtime: how overlapping chunks merge: latest | weighted | average | ensemble"),
    "control_hz": ("", "execution:=rate|realtime: control ticks per second (sim: a divisor of 250; default 25)"),
    "output": ("", "run directory for the results (empty: runs/ros-<UTC time>)"),
    "foxglove_host": ("", "address the live Foxglove server binds (empty: the profile's, 127.0.0.1)"),
    "foxglove_port": ("", "port of the live Foxglove server (empty: the profile's, 8765; 0 picks a free one)"),
    "foxglove_control": ("", "true: a live Foxglove server bound beyond loopback offers the operator's services "
                             "(trial controls, take over / hand back) with no authentication; false or empty: "
                             "read-only there (on loopback they are always offered); recorded in run.json"),
    "calibration_dir": ("", "perception_node: the rig's camera calibration directory"),
    "driver_config": ("", "arm driver map: a preset under config/rig/ (e.g. piper_ros2, aloha) or a path"),
    "remap": ("", "topic remappings 'FROM:=TO FROM:=TO' for every node"),
    "remap_file": ("", "a remap preset under config/rig/ (e.g. realsense2_camera) or a path"),
}


@dataclass
class Choices:
    """What a user picked; None (or empty) leaves the profile's value."""

    policy: str | None = None
    policy_kwargs: str | None = None
    scene: str | None = None
    levels: str | None = None
    limit: int | None = None
    tasks: str | None = None
    rounds: int | None = None
    max_steps: int | None = None
    actions_per_step: int | None = None
    policy_timeout: float | None = None
    privileged: bool | None = None
    #: ``--controls``: instruction controls interleaved with the trials, blinded unless ``unblind``.
    controls: str | None = None
    unblind: bool | None = None
    output: str | None = None
    execution: str | None = None  # lockstep | rate | realtime
    merge: str | None = None
    control_hz: float | None = None
    render: bool | None = None
    foxglove: bool = True
    foxglove_host: str | None = None
    foxglove_port: int | None = None
    #: Offer the operator's services on a live view bound beyond loopback (``--foxglove-control``).
    foxglove_control: bool | None = None
    calibration_dir: str | None = None
    driver_config: str | None = None
    remaps: list[str] = field(default_factory=list)  # "FROM:=TO"
    remap_files: list[str] = field(default_factory=list)
    #: A rig (name, YAML or folder): loaded and checked here, and every node's ``ROBOFOLLOW_RIG``.
    rig: str | None = None


def driver_config_path(name: str) -> Path:
    """A driver map: a preset under ``config/rig/`` by name (``.yaml`` optional; ``aloha`` for
    ``aloha_interbotix``) or a path; ``ValueError`` naming the presets for a bare name that is neither."""
    from robofollow_ros.rig.driver_config import driver_config_file

    return driver_config_file(name)


def apply_choices(profile: Profile, choices: Choices, flag: Any) -> Profile:
    """``profile`` with ``choices`` applied and checked; ``flag(name)`` names a choice in errors."""
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.nodes.trial_plan import TrialSpecError, compose_trials, parse_trials

    if not choices.foxglove and profile.has("foxglove_node"):
        profile = without_nodes(profile, {"foxglove_node"})
    extra: dict[str, dict[str, Any]] = {}

    def put(node: str, name: str, value: Any, option: str) -> None:
        if value is None:
            return
        if not profile.has(node):
            raise ProfileError(f"{flag(option)}: profile {profile.name} has no {node}")
        extra.setdefault(node, {})[name] = value

    for option, value in (("max_steps", choices.max_steps), ("actions_per_step", choices.actions_per_step),
                          ("limit", choices.limit), ("rounds", choices.rounds)):
        if value is not None and value < 1:
            raise ProfileError(f"{flag(option)}: must be >= 1, got {value}")
    if choices.policy_kwargs is not None:
        try:
            kwargs = json.loads(choices.policy_kwargs)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{flag('policy_kwargs')}: not valid JSON ({exc})") from None
        if not isinstance(kwargs, dict):
            raise ProfileError(f"{flag('policy_kwargs')}: expected a JSON object, got {choices.policy_kwargs!r}")
    if choices.policy_timeout is not None and not 0 < choices.policy_timeout < math.inf:
        raise ProfileError(f"{flag('policy_timeout')}: must be a positive number of seconds, "
                           f"got {choices.policy_timeout:g}")
    if choices.foxglove_port is not None and not 0 <= choices.foxglove_port <= 65535:
        raise ProfileError(f"{flag('foxglove_port')}: {choices.foxglove_port} is outside 0..65535")
    _put_controls(profile, choices, flag, put)
    put("policy_node", "policy_kwargs", choices.policy_kwargs, "policy_kwargs")
    put("policy_node", "privileged", choices.privileged, "privileged")
    put(TRIAL_MANAGER, "max_steps", choices.max_steps, "max_steps")
    put(TRIAL_MANAGER, "actions_per_step", choices.actions_per_step, "actions_per_step")
    # the policy node bounds each call; the trial manager derives its bound on `running` from it
    put("policy_node", "policy_timeout_s", _float(choices.policy_timeout), "policy_timeout")
    put(TRIAL_MANAGER, "policy_timeout_s", _float(choices.policy_timeout), "policy_timeout")
    put("sim_node", "render", choices.render, "no_render")
    _put_execution(profile, choices, flag, put)
    if choices.foxglove:
        put("foxglove_node", "host", choices.foxglove_host, "foxglove_host")
        put("foxglove_node", "port", choices.foxglove_port, "foxglove_port")
        put("foxglove_node", "remote_control", choices.foxglove_control, "foxglove_control")
    put("perception_node", "calibration_dir", choices.calibration_dir, "calibration_dir")
    if choices.calibration_dir is not None and profile.has(TRIAL_MANAGER):  # its health check reads the same
        extra.setdefault(TRIAL_MANAGER, {})["calibration_dir"] = choices.calibration_dir
    if choices.driver_config is not None:
        try:
            path = driver_config_path(choices.driver_config)
        except ValueError as exc:
            raise ProfileError(f"{flag('driver_config')}: {exc}") from None
        if not path.is_file():
            raise ProfileError(f"{flag('driver_config')}: no driver map {str(path)!r}")
        for node in (n for n in DRIVER_NODES if profile.has(n)):
            extra.setdefault(node, {})["driver_config"] = str(path)
    trials = None
    if profile.has(TRIAL_MANAGER):
        base = str(profile.node(TRIAL_MANAGER).parameters.get("trials", "scene=scene1 levels=L0 limit=1 rounds=1"))
        try:
            trials = compose_trials(base, choices.scene, choices.levels, choices.limit, choices.tasks, choices.rounds)
            parse_trials(trials, default_registry())
        except TrialSpecError as exc:
            raise ProfileError(str(exc)) from None
    remaps: tuple[tuple[str, str], ...] = ()
    for name in choices.remap_files:
        remaps += load_remap_file(name)
    for text in choices.remaps:
        source, sep, target = text.partition(":=")
        if not sep:
            raise ProfileError(f"{flag('remap')}: {text!r} is not FROM:=TO")
        remaps += parse_remappings({source: target}, flag("remap"))
    chosen = with_overrides(profile, trials=trials, policy=choices.policy, output=choices.output, extra=extra,
                            remappings=remaps)
    if choices.rig is not None:
        chosen = replace(chosen, environment=(*chosen.environment, *rig_environment(choices.rig, flag).items()))
    check_parameters(chosen, f"profile {profile.path} with the options given")
    check_node_files(chosen, choices, flag)
    if chosen.has("policy_node"):
        spec, _ = policy_of(chosen)
        try:
            check_privileged(spec, privileged_of(chosen))
        except PolicySpecError as exc:
            raise ProfileError(str(exc).replace("--privileged", flag("privileged"), 1)) from None
    return chosen


def _put_controls(profile: Profile, choices: Choices, flag: Any, put: Any) -> None:
    """``--controls`` to the trial manager, blinded (its ``blind``, and foxglove_node's for the live view)
    unless ``--unblind``."""
    from robofollow_ros.evaluation.controls import parse_controls

    if not choices.controls:
        if choices.unblind:
            raise ProfileError(f"{flag('unblind')}: only with {flag('controls')} (a run without controls has "
                               "nothing blinded)")
        return
    try:
        controls = parse_controls(choices.controls)
    except ValueError as exc:
        raise ProfileError(str(exc).replace("--controls", flag("controls"), 1)) from None
    blind = not choices.unblind
    put(TRIAL_MANAGER, "controls", ",".join(controls), "controls")
    put(TRIAL_MANAGER, "blind", blind, "unblind")
    if profile.has("foxglove_node") and choices.foxglove:
        put("foxglove_node", "blind", blind, "unblind")


#: The choices ``execution`` offers, and the policy_node settings each one stands for.
EXECUTIONS = ("lockstep", "rate", "realtime")
#: A wall-clock sim's joint states arrive every tick, but rendering can stall a tick or two.
SIM_RATE_STALE_S = 2.0


def _put_execution(profile: Profile, choices: Choices, flag: Any, put: Any) -> None:
    """``execution`` / ``merge`` / ``control_hz`` on policy_node (and, in a sim, on sim_node: step on a
    wall-clock timer at the control rate, so the world moves while the policy thinks)."""
    from robofollow_ros.policy.execution import MERGE_RULES

    execution = choices.execution
    if execution is not None and execution not in EXECUTIONS:
        raise ProfileError(f"{flag('execution')}: {execution!r} is not one of {', '.join(EXECUTIONS)}")
    current = profile.node("policy_node").parameters if profile.has("policy_node") else {}
    realtime = execution == "realtime" or (execution is None and current.get("execution") == "realtime")
    if choices.merge is not None:
        if choices.merge not in MERGE_RULES:
            raise ProfileError(f"{flag('merge')}: {choices.merge!r} is not one of {', '.join(MERGE_RULES)}")
        if not realtime:
            raise ProfileError(f"{flag('merge')}: needs {flag('execution')} realtime")
    hz = choices.control_hz
    if hz is not None:
        if not 0 < hz < math.inf:
            raise ProfileError(f"{flag('control_hz')}: must be a positive number, got {hz:g}")
        if execution == "lockstep" or (execution is None and current.get("mode", "lockstep") == "lockstep"):
            raise ProfileError(f"{flag('control_hz')}: needs {flag('execution')} rate or realtime")
    if execution in ("rate", "realtime"):
        sim = profile.has("sim_node")
        hz = hz if hz is not None else 25.0 if sim else None
        # sim_node itself refuses a step_hz that does not divide its physics rate (the rig side never imports
        # the simulator: test_house)
        put("policy_node", "mode", "rate", "execution")
        put("policy_node", "execution", "realtime" if execution == "realtime" else "sync", "execution")
        if sim:
            put("policy_node", "request_images", False, "execution")  # the cameras' own timer feeds it
            put("policy_node", "stale_s", SIM_RATE_STALE_S, "execution")
            put("sim_node", "step_mode", "timer", "execution")
            put("sim_node", "step_hz", _float(hz), "control_hz")
    elif execution == "lockstep":
        put("policy_node", "mode", "lockstep", "execution")
        if profile.has("sim_node"):
            put("sim_node", "step_mode", "command", "execution")
    put("policy_node", "control_hz", _float(hz), "control_hz")
    put("policy_node", "merge", choices.merge, "merge")


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def check_node_files(profile: Profile, choices: Choices, flag: Any) -> None:
    """Read the files the nodes will read -- the driver map, the camera calibration and colour model -- the way
    the nodes read them, so that a missing or broken one is one line naming the option (or the profile's
    parameter) and the file before any node starts, not a node dying with a traceback in the graph."""
    for node in (n for n in DRIVER_NODES if profile.has(n)):
        driver_file = profile.node(node).parameters.get("driver_config")
        if driver_file:
            where = flag("driver_config") if choices.driver_config is not None else \
                f"profile {profile.path}: node {node}: parameter 'driver_config'"
            _check_driver_config(Path(str(driver_file)), where)
    if profile.has("perception_node"):
        from robofollow_ros.robot.calibration import rig_calibration_dir

        params = profile.node("perception_node").parameters
        calibration = Path(str(params.get("calibration_dir") or rig_calibration_dir()))
        where = flag("calibration_dir") if choices.calibration_dir is not None else \
            f"profile {profile.path}: node perception_node: parameter 'calibration_dir'"
        if not calibration.is_dir():
            raise ProfileError(f"{where}: {calibration} is not a directory (it holds head.yaml and extrinsics.yaml)")
        colour_model = Path(str(params["colour_model"])) if params.get("colour_model") else None
        _check_calibration(calibration, colour_model, where, f"profile {profile.path}: node perception_node: "
                                                             "parameter 'colour_model'")


def _check_driver_config(path: Path, where: str) -> None:
    from robofollow_ros.rig.driver_config import load_driver_config

    try:
        load_driver_config(path)
    except (ValueError, TypeError, AttributeError) as exc:
        text = _one_line(exc)
        raise ProfileError(f"{where}: {text if str(path) in text else f'{path}: {text}'}") from None


def _check_calibration(calibration: Path, colour_model: Path | None, where: str, colour_where: str) -> None:
    from robofollow_ros.perception.camera_model import CalibrationError
    from robofollow_ros.perception.colour_model import ColourModel
    from robofollow_ros.perception.tracker import perception_from_calibration

    if colour_model is not None:
        try:
            ColourModel.load(colour_model)
        except (CalibrationError, ValueError) as exc:
            raise ProfileError(f"{colour_where}: {_one_line(exc)}") from None
    try:
        perception_from_calibration(calibration, colour_model)
    except (CalibrationError, ValueError) as exc:
        raise ProfileError(f"{where}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def rig_environment(spec: str, flag: Any) -> dict[str, str]:
    """``{ROBOFOLLOW_RIG: the rig YAML}`` of the rig ``spec`` names (a name, a YAML or a folder), after loading
    it: one line naming ``flag('rig')`` and the value where it cannot be. The nodes load it themselves
    (``robot.rig_config.load_rig_config()``), as every process does from that variable."""
    from robofollow_ros.robot.rig_config import RigConfigError
    from robofollow_ros.robot.rig_description import ENV_RIG, load_rig

    try:
        rig = load_rig(spec)
    except (RigConfigError, OSError) as exc:
        raise ProfileError(f"{flag('rig')}: {_one_line(exc)}") from None
    return {ENV_RIG: str(rig.source)}


def _launch_flag(name: str) -> str:
    return f"{name}:="


def _int_argument(values: dict[str, str], name: str) -> int | None:
    text = values.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ProfileError(f"{name}:={text}: not an integer") from None


def _float_argument(values: dict[str, str], name: str) -> float | None:
    text = values.get(name, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ProfileError(f"{name}:={text}: not a number") from None


def _bool_argument(values: dict[str, str], name: str) -> bool | None:
    return _true(values, name) if values.get(name, "").strip() else None


def _true(values: dict[str, str], name: str) -> bool:
    text = values.get(name, LAUNCH_ARGUMENTS[name][0]).strip().lower()
    if text not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        raise ProfileError(f"{name}: {text!r} is not true or false")
    return text in ("true", "1", "yes", "on")


def launch_profile(**values: str) -> Profile:
    """What the launch files start: the profile ``use_sim`` / ``use_mock_hardware`` (or ``profile``) pick,
    with the launch arguments applied; empty arguments leave the profile's values."""
    unknown = sorted(set(values) - set(LAUNCH_ARGUMENTS))
    if unknown:
        raise ProfileError(f"launch argument {unknown[0]!r} is unknown ({', '.join(LAUNCH_ARGUMENTS)})")
    sim, mock = _true(values, "use_sim"), _true(values, "use_mock_hardware")
    if sim and mock:
        raise ProfileError("use_sim:=true and use_mock_hardware:=true: pick one")
    chosen = load_profile(values.get("profile") or ("mock" if mock else "sim" if sim else "rig"))

    def text(name: str) -> str | None:
        return values.get(name, "").strip() or None

    choices = Choices(policy=text("policy"), policy_kwargs=text("policy_kwargs"), scene=text("scene"),
                      levels=text("levels"), limit=_int_argument(values, "limit"), tasks=text("tasks"),
                      rounds=_int_argument(values, "rounds"), max_steps=_int_argument(values, "max_steps"),
                      policy_timeout=_float_argument(values, "policy_timeout"),
                      privileged=_bool_argument(values, "privileged"), controls=text("controls"),
                      unblind=_bool_argument(values, "unblind"),
                      output=text("output"), execution=text("execution"), merge=text("merge"),
                      control_hz=_float_argument(values, "control_hz"), foxglove_host=text("foxglove_host"),
                      foxglove_port=_int_argument(values, "foxglove_port"),
                      foxglove_control=_bool_argument(values, "foxglove_control"),
                      calibration_dir=text("calibration_dir"),
                      driver_config=text("driver_config"), remaps=(text("remap") or "").split(),
                      remap_files=(text("remap_file") or "").split(), rig=text("rig"))
    return apply_choices(chosen, choices, _launch_flag)


def foxglove_address(profile: Profile) -> tuple[str, int] | None:
    """(host, port) the live Foxglove server of ``profile`` will bind, or None when it serves none."""
    if not profile.has("foxglove_node"):
        return None
    params = profile.node("foxglove_node").parameters
    if not params.get("serve", True):
        return None
    return str(params.get("host", "127.0.0.1")), int(params.get("port", 8765))


def policy_of(profile: Profile) -> tuple[str, dict[str, Any]]:
    params = profile.node("policy_node").parameters
    return str(params.get("policy", "hold")), json.loads(str(params.get("policy_kwargs", "{}")))


def privileged_of(profile: Profile) -> bool:
    """policy_node's ``privileged``: every policy is handed privileged state (``--privileged``)."""
    return bool(profile.node("policy_node").parameters.get("privileged", False))
