"""Bringup profiles: one YAML per rig lists the nodes, their parameters and the topic remappings.

Profile format (``config/profiles/{sim,rig,mock}.yaml``)::

    name: sim
    use_sim_time: true              # every node follows /clock (the sim profile)
    remappings: {/cameras/head/image_raw: /camera/color/image_raw}   # FROM: TO, for every node
    remap_files: [realsense2_camera.yaml]                            # config/rig/ presets or paths
    nodes:
      - executable: sim_node        # a key of nodes/catalog.py
        parameters: {render: true, camera_hz: 30.0}

Every parameter is checked against what its node declares (``nodes.parameter_schema``): an
unknown name, a wrong type or a value out of range is one line naming the file, the node and the
parameter, before anything starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS
from robofollow_ros.paths import share_path
from robofollow_ros.yamlio import read_yaml_mapping

PROFILES = ("sim", "rig", "mock")
TRIAL_MANAGER = "trial_manager_node"
#: A fully qualified topic name (ROS: tokens of letters, digits and underscores, not starting with a digit).
_TOPIC = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


class ProfileError(ValueError):
    """A profile (or an option applied to it) is unusable; the message names the file and the field."""


@dataclass(frozen=True)
class NodeSpec:
    executable: str
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return NODE_ENTRY_POINTS[self.executable].split(":")[0]

    @property
    def class_name(self) -> str:
        """The node's class: ``sim_node`` → ``SimNode`` (one class per node module)."""
        return "".join(part.title() for part in self.executable.split("_"))


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    nodes: tuple[NodeSpec, ...]
    #: (from, to) topic remappings applied to every node, in order.
    remappings: tuple[tuple[str, str], ...] = ()
    #: (name, value) environment variables set for every node: ``ROBOFOLLOW_RIG`` where a rig was chosen
    #: (``rig:=``; ``robofollow bringup --rig`` sets it in its own environment, which the nodes inherit).
    environment: tuple[tuple[str, str], ...] = ()

    def node(self, executable: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.executable == executable:
                return spec
        raise ProfileError(f"profile {self.name}: has no {executable}")

    def has(self, executable: str) -> bool:
        return any(spec.executable == executable for spec in self.nodes)

    def remap_arguments(self) -> list[str]:
        """``--ros-args -r FROM:=TO ...`` for a node's command line (empty without remappings)."""
        if not self.remappings:
            return []
        return ["--ros-args", *(arg for a, b in self.remappings for arg in ("-r", f"{a}:={b}"))]


def profile_path(name_or_path: str | Path) -> Path:
    """``sim``/``rig``/``mock`` name the installed profiles; anything else is a file path."""
    if str(name_or_path) in PROFILES:
        return share_path("config", "profiles", f"{name_or_path}.yaml")
    return Path(name_or_path)


def _check_value(value: Any, where: str) -> None:
    scalars = (bool, int, float, str)
    if isinstance(value, scalars):
        return
    if isinstance(value, list) and value and all(isinstance(v, type(value[0])) for v in value) \
            and isinstance(value[0], scalars):
        return
    raise ProfileError(f"{where}: {value!r} is not a ROS parameter value (a scalar or a non-empty list of one type)")


def parse_remappings(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{FROM: TO}`` of absolute topic names, checked."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise ProfileError(f"{where}: expected a mapping FROM: TO of topic names")
    pairs = []
    for source, target in data.items():
        for name in (source, target):
            if not isinstance(name, str) or not _TOPIC.match(name):
                raise ProfileError(f"{where}: {name!r} is not an absolute topic name like /cameras/head/image_raw")
        pairs.append((str(source), str(target)))
    return tuple(pairs)


def remap_file_path(name: str) -> Path:
    """A remap preset: a name under ``config/rig/`` (``.yaml`` optional) or a path."""
    path = Path(name)
    if len(path.parts) == 1 and not path.is_file():
        return share_path("config", "rig", name if name.endswith(".yaml") else f"{name}.yaml")
    return path


def load_remap_file(name: str) -> tuple[tuple[str, str], ...]:
    path = remap_file_path(name)
    data = read_yaml_mapping(path, "remap file", ProfileError, hint="a YAML file with a 'remappings' mapping")
    if "remappings" not in data:
        raise ProfileError(f"remap file {path}: no 'remappings' mapping")
    return parse_remappings(data["remappings"], f"remap file {path}: remappings")


def load_profile(name_or_path: str | Path) -> Profile:
    path = profile_path(name_or_path)
    data = read_yaml_mapping(path, "profile", ProfileError, hint="expected sim, rig, mock or a YAML file")
    unknown = sorted(set(data) - {"name", "nodes", "use_sim_time", "remappings", "remap_files"})
    if unknown:
        raise ProfileError(f"profile {path}: unknown key {unknown[0]!r} (keys: name, use_sim_time, remappings, "
                           "remap_files, nodes)")
    if not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise ProfileError(f"profile {path}: expected a mapping with a non-empty 'nodes' list")
    sim_time = data.get("use_sim_time", False)
    if not isinstance(sim_time, bool):
        raise ProfileError(f"profile {path}: use_sim_time: {sim_time!r} is not true or false")
    nodes: list[NodeSpec] = []
    for i, entry in enumerate(data["nodes"]):
        where = f"profile {path}: nodes[{i}]"
        if not isinstance(entry, Mapping) or "executable" not in entry:
            raise ProfileError(f"{where}: expected a mapping with 'executable'")
        executable = entry["executable"]
        if executable not in NODE_ENTRY_POINTS:
            raise ProfileError(f"{where}.executable: {executable!r} is not a node of this package "
                               f"({', '.join(sorted(NODE_ENTRY_POINTS))})")
        if executable in {n.executable for n in nodes}:
            raise ProfileError(f"{where}.executable: {executable!r} is listed twice")
        params = entry.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise ProfileError(f"{where}.parameters: expected a mapping")
        for key, value in params.items():
            _check_value(value, f"{where}.parameters.{key}")
        nodes.append(NodeSpec(executable, {**({"use_sim_time": True} if sim_time else {}), **params}))
    files = data.get("remap_files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ProfileError(f"profile {path}: remap_files: expected a list of file names")
    remaps = parse_remappings(data.get("remappings"), f"profile {path}: remappings")
    for name in files:
        try:
            remaps += load_remap_file(name)
        except ProfileError as exc:
            raise ProfileError(f"profile {path}: remap_files: {exc}") from None
    profile = Profile(str(data.get("name", path.stem)), path, tuple(nodes), remaps)
    check_parameters(profile, f"profile {path}")
    check_awaited_nodes(profile, f"profile {path}")
    return profile


def check_awaited_nodes(profile: Profile, where: str) -> None:
    """The trial manager must not wait for one of this package's nodes that the profile leaves out.

    (A node from elsewhere -- a vendor driver -- may be awaited: it is started outside the profile.)
    """
    if not profile.has(TRIAL_MANAGER):
        return
    waits = profile.node(TRIAL_MANAGER).parameters.get("wait_for_nodes") or []
    present = {n.executable for n in profile.nodes}
    for name in waits:
        if name in NODE_ENTRY_POINTS and name not in present:
            raise ProfileError(f"{where}: node {TRIAL_MANAGER}: parameter 'wait_for_nodes': {name!r} is not in "
                               f"this profile; add the node or drop it from wait_for_nodes")


def check_parameters(profile: Profile, where: str) -> None:
    """Every parameter is one its node declares, of the declared type, within the declared range."""
    from robofollow_ros.nodes.parameter_schema import node_parameters

    for node in profile.nodes:
        declared = node_parameters(node.executable)
        for name, value in node.parameters.items():
            spec = declared.get(name)
            if spec is None:
                raise ProfileError(f"{where}: node {node.executable}: parameter {name!r} is unknown "
                                   f"(it declares {', '.join(sorted(declared))})")
            reason = spec.check(value)
            if reason is not None:
                raise ProfileError(f"{where}: node {node.executable}: parameter {name!r}: {reason}")


def with_overrides(profile: Profile, *, trials: str | None = None, policy: str | None = None,
                   output: str | None = None, extra: Mapping[str, Mapping[str, Any]] | None = None,
                   remappings: tuple[tuple[str, str], ...] = ()) -> Profile:
    """The profile with a command's choices applied (trials, policy, output, per-node parameters, remaps)."""
    changes: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (extra or {}).items()}
    if trials is not None:
        changes.setdefault(TRIAL_MANAGER, {})["trials"] = trials
    if output is not None:
        changes.setdefault(TRIAL_MANAGER, {})["output"] = str(output)
    if policy is not None:
        changes.setdefault("policy_node", {})["policy"] = policy
        changes.setdefault(TRIAL_MANAGER, {})["policy_label"] = policy
    known = {n.executable for n in profile.nodes}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ProfileError(f"profile {profile.name}: has no {', '.join(unknown)} to apply options to")
    nodes = tuple(replace(n, parameters={**n.parameters, **changes.get(n.executable, {})}) for n in profile.nodes)
    recorded = _record_live_view(_record_execution(_record_privileged(_record_policy_and_render(nodes))))
    return replace(profile, nodes=recorded,
                   remappings=profile.remappings + tuple(remappings))


def _record_live_view(nodes: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
    """The trial manager records the live view in run.json (``live_view``): where foxglove_node's server binds
    and whether it offers the operator's services there (``--foxglove-control``). Copied, never chosen apart."""
    from robofollow_ros.monitoring.access import offers_control

    by_name = {n.executable: n for n in nodes}
    if TRIAL_MANAGER not in by_name:
        return nodes
    record: dict[str, Any] = {"serve": False}
    fox = by_name.get("foxglove_node")
    if fox is not None and fox.parameters.get("serve", True):
        host, remote = str(fox.parameters.get("host", "127.0.0.1")), bool(fox.parameters.get("remote_control", False))
        record = {"serve": True, "host": host, "remote_control": remote, "control": offers_control(host, remote)}
    text = json.dumps(record, sort_keys=True)
    return tuple(replace(n, parameters={**n.parameters, "live_view": text}) if n.executable == TRIAL_MANAGER
                 else n for n in nodes)


def _record_privileged(nodes: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
    """The trial manager records policy_node's ``privileged`` in run.json: it is copied, never chosen apart."""
    by_name = {n.executable: n for n in nodes}
    if "policy_node" not in by_name or TRIAL_MANAGER not in by_name:
        return nodes
    privileged = bool(by_name["policy_node"].parameters.get("privileged", False))
    return tuple(replace(n, parameters={**n.parameters, "privileged": privileged}) if n.executable == TRIAL_MANAGER
                 else n for n in nodes)


def _record_policy_and_render(nodes: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
    """The trial manager records policy_node's kwargs and sim_node's ``render`` in run.json (as eval records its
    own): copied, never chosen apart. A graph without a sim (the rig) records render as not known."""
    by_name = {n.executable: n for n in nodes}
    if TRIAL_MANAGER not in by_name:
        return nodes
    added: dict[str, Any] = {}
    if "policy_node" in by_name:
        added["policy_kwargs"] = str(by_name["policy_node"].parameters.get("policy_kwargs", "{}") or "{}")
    if "sim_node" in by_name:
        added["render"] = "true" if bool(by_name["sim_node"].parameters.get("render", True)) else "false"
    return tuple(replace(n, parameters={**n.parameters, **added}) if n.executable == TRIAL_MANAGER else n
                 for n in nodes)


def _record_execution(nodes: tuple[NodeSpec, ...]) -> tuple[NodeSpec, ...]:
    """The trial manager records how rows were paced (run.json's ``execution``): policy_node's ``mode`` and,
    in rate mode, its executor settings, and how sim_node steps. Copied, never chosen apart."""
    by_name = {n.executable: n for n in nodes}
    if "policy_node" not in by_name or TRIAL_MANAGER not in by_name:
        return nodes
    policy = by_name["policy_node"].parameters
    record: dict[str, Any] = {"mode": str(policy.get("mode", "lockstep"))}
    if record["mode"] == "rate":
        record.update(execution=str(policy.get("execution", "sync")), control_hz=policy.get("control_hz", 50.0))
        added = _planner_rows(policy, float(record["control_hz"]))
        if added:
            record["planner"] = added  # what policy_node adds to a planner built-in's kwargs (dense rows, settle)
        if record["execution"] == "realtime":
            record.update({k: policy[k] for k in ("merge", "threshold", "max_step_rad", "weight", "ensemble_coeff",
                                                  "warmup") if k in policy})
    if "sim_node" in by_name:
        sim = by_name["sim_node"].parameters
        record["sim_step_mode"] = str(sim.get("step_mode", "command"))
        if record["sim_step_mode"] == "timer":
            record["sim_step_hz"] = sim.get("step_hz", 25.0)
    text = json.dumps(record, sort_keys=True)
    return tuple(replace(n, parameters={**n.parameters, "execution": text}) if n.executable == TRIAL_MANAGER
                 else n for n in nodes)


def _planner_rows(policy: dict[str, Any], control_hz: float) -> dict[str, Any]:
    """The kwargs a rate-mode policy_node adds to the profile's for a planner built-in (``rate_kwargs``)."""
    from robofollow_ros.policy.expert.dense import rate_kwargs

    try:
        given = json.loads(str(policy.get("policy_kwargs", "{}")) or "{}")
    except json.JSONDecodeError:
        return {}  # policy_node itself refuses it, naming the parameter
    if not isinstance(given, dict):
        return {}
    used = rate_kwargs(str(policy.get("policy", "hold")), given, "rate", control_hz)
    return {k: v for k, v in used.items() if k not in given}


def without_nodes(profile: Profile, executables: set[str]) -> Profile:
    """The profile minus some optional nodes (e.g. ``foxglove_node`` for ``--no-foxglove``)."""
    unknown = sorted(executables - {n.executable for n in profile.nodes})
    if unknown:
        raise ProfileError(f"profile {profile.name}: has no {', '.join(unknown)} to leave out")
    kept = []
    for node in profile.nodes:
        if node.executable in executables:
            continue
        waits = node.parameters.get("wait_for_nodes")
        if isinstance(waits, list):  # nobody may wait for a node that is no longer started
            node = replace(node, parameters={**node.parameters,
                                             "wait_for_nodes": [w for w in waits if w not in executables]})
        kept.append(node)
    return replace(profile, nodes=tuple(kept))


def ros_params_file(profile: Profile) -> dict[str, Any]:
    """The profile as a ROS 2 ``--params-file`` document."""
    return {n.executable: {"ros__parameters": dict(n.parameters)} for n in profile.nodes}
