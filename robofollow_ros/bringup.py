"""Bringup profiles: one YAML per rig lists the nodes and their parameters (``config/profiles/``).

Both ways of starting the graph read it: the launch files wrap :func:`load_profile`'s node list in
``launch_ros`` Node actions, and ``robofollow bringup`` (for machines without ``launch``) runs the
same list in one process (:func:`run_in_process`) or one process per node (:func:`run_as_processes`).
There is no second list of nodes anywhere.

Profile format::

    name: sim
    nodes:
      - executable: sim_node          # a key of nodes/catalog.py
        parameters: {render: true, camera_hz: 30.0}
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS
from robofollow_ros.paths import share_path
from robofollow_ros.yamlio import read_yaml_mapping

PROFILES = ("sim", "rig")
TRIAL_MANAGER = "trial_manager_node"


class ProfileError(ValueError):
    """A profile file is missing or malformed; the message names the file and the field."""


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

    def node(self, executable: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.executable == executable:
                return spec
        raise ProfileError(f"profile {self.name}: has no {executable}")


def profile_path(name_or_path: str | Path) -> Path:
    """``sim``/``rig`` name the installed profiles; anything else is a file path."""
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


def load_profile(name_or_path: str | Path) -> Profile:
    path = profile_path(name_or_path)
    data = read_yaml_mapping(path, "profile", ProfileError, hint="expected sim, rig or a YAML file")
    if not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise ProfileError(f"profile {path}: expected a mapping with a non-empty 'nodes' list")
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
        nodes.append(NodeSpec(executable, dict(params)))
    return Profile(str(data.get("name", path.stem)), path, tuple(nodes))


def with_overrides(profile: Profile, *, trials: str | None = None, policy: str | None = None,
                   output: str | None = None, extra: Mapping[str, Mapping[str, Any]] | None = None) -> Profile:
    """The profile with the CLI's choices applied (``--trials``, ``--policy``, ``--output``)."""
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
    return replace(profile, nodes=nodes)


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


# -- running -------------------------------------------------------------------------------------
@dataclass
class BringupOutcome:
    finished: bool  # every trial ran (False: interrupted)
    run_dir: Path | None
    summary: dict[str, Any] | None


def build_nodes(profile: Profile, context: Any) -> list[Any]:
    """Instantiate every node of the profile in ``context`` (parameters as overrides)."""
    from rclpy.parameter import Parameter

    nodes = []
    for spec in profile.nodes:
        cls = getattr(importlib.import_module(spec.module), spec.class_name)
        overrides = [Parameter(k, value=v) for k, v in spec.parameters.items()]
        nodes.append(cls(context=context, parameter_overrides=overrides))
    return nodes


def run_in_process(profile: Profile, stop: threading.Event,
                   on_finished: Callable[[BringupOutcome], None] | None = None) -> BringupOutcome:
    """All nodes in one process and one executor (still over DDS); returns when the trials end or ``stop``.

    With ``on_finished``, the trials' end calls it and the graph keeps running until ``stop`` (the live
    Foxglove view stays up to inspect the final state)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[Any] = []
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    try:
        nodes = build_nodes(profile, context)
        for node in nodes:
            executor.add_node(node)
        manager = next((n for n in nodes if n.get_name() == TRIAL_MANAGER), None)
        while not stop.is_set() and (manager is None or not manager.finished.is_set()):
            executor.spin_once(timeout_sec=0.1)
        finished = manager is not None and manager.finished.is_set()
        summary = manager.summary() if manager is not None else None
        run_dir = manager.run_dir if manager is not None else None
        outcome = BringupOutcome(finished, run_dir, summary)
        if on_finished is not None and finished and not stop.is_set():
            on_finished(outcome)
            while not stop.is_set():
                executor.spin_once(timeout_sec=0.1)
        return outcome
    finally:
        # Let callbacks already handed to the thread pool finish before their nodes go away.
        for node in nodes:
            executor.remove_node(node)
        executor.shutdown(timeout_sec=30.0)
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.shutdown(context=context)


def run_as_processes(profile: Profile, stop: threading.Event, log_dir: Path | None = None,
                     on_finished: Callable[[BringupOutcome], None] | None = None) -> BringupOutcome:
    """One process per node (``python -m <module> --ros-args --params-file``); ends with the trial manager,
    or with ``on_finished``, calls it then and keeps the other nodes running until ``stop``."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as params:
        yaml.safe_dump(ros_params_file(profile), params)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for spec in profile.nodes:
            out = open(log_dir / f"{spec.executable}.log", "wb") if log_dir else None  # noqa: SIM115
            procs[spec.executable] = subprocess.Popen(
                [sys.executable, "-m", spec.module, "--ros-args", "--params-file", params.name],
                stdout=out or None, stderr=subprocess.STDOUT if out else None, env=dict(os.environ))
        manager = procs.get(TRIAL_MANAGER)
        while not stop.is_set():
            if manager is not None and manager.poll() is not None:
                break
            if any(p.poll() is not None for p in procs.values()):
                break  # a node died: stop the rest
            stop.wait(0.2)
        finished = manager is not None and manager.poll() == 0 and not stop.is_set()
        if on_finished is not None and finished:
            on_finished(_outcome_from_files(profile, finished))
            while not stop.is_set() and all(p.poll() is None for n, p in procs.items() if n != TRIAL_MANAGER):
                stop.wait(0.2)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        os.unlink(params.name)
    return _outcome_from_files(profile, finished)


def _outcome_from_files(profile: Profile, finished: bool) -> BringupOutcome:
    from robofollow_ros.evaluation.jsonio import read_json

    output = profile.node(TRIAL_MANAGER).parameters.get("output") if any(
        n.executable == TRIAL_MANAGER for n in profile.nodes) else None
    if not output:
        return BringupOutcome(finished, None, None)
    run_dir = Path(output)
    summary_file = run_dir / "summary.json"
    return BringupOutcome(finished, run_dir, read_json(summary_file) if summary_file.is_file() else None)


def launch_profile(use_sim: str, profile: str = "", trials: str = "", policy: str = "", output: str = "") -> Profile:
    """What the launch files start: the profile chosen by ``use_sim`` (or named by ``profile``) with the
    launch arguments applied; empty arguments leave the profile's values."""
    sim = use_sim.strip().lower() in ("true", "1", "yes", "on")
    if use_sim.strip().lower() not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        raise ProfileError(f"use_sim: {use_sim!r} is not true or false")
    chosen = load_profile(profile or ("sim" if sim else "rig"))
    return with_overrides(chosen, trials=trials or None, policy=policy or None, output=output or None)
