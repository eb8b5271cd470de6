"""Running a profile without ``launch``: all nodes in one process, or one process per node.

Both end when the trial manager ends (or on ``stop``) and report its exit status, so
``robofollow bringup`` exits as the launch files' graph does.

One process per node, a node may die on its own (killed, crashed). Each such end is reported
(:class:`NodeExit`, named with its signal or exit status). When another node dies, the trial manager
learns it over DDS (``graph_peers.AliveWatch``), records the trial under way as a ``node-died`` fault and
ends the run itself; it is given :data:`RECORD_GRACE_S` for that before the graph is stopped. When the
trial manager itself dies, the run directory it wrote is left ``running`` with its lock gone: the
supervisor, the only one that knows how it died, then closes that run (``results.close_abandoned_run``:
under the lock, only a ``running`` run, ``failed`` with the node and the signal as its error).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from robofollow_ros.bringup.profiles import TRIAL_MANAGER, Profile, ros_params_file
from robofollow_ros.child_process import child_command, child_env
from robofollow_ros.evaluation.progress import Heartbeat, waited
from robofollow_ros.rig.keys import KeyReader

#: Popen's arguments for a child in a process group of its own: ``process_group=0`` from Python 3.11 on, and on
#: 3.10 ``setpgrp()`` between fork and exec, the same call.
OWN_PROCESS_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp})

#: After a node other than the trial manager died: how long the trial manager gets to notice (its alive
#: watch's lease, 3 s), record the trial under way as a fault and end the run itself (seconds).
RECORD_GRACE_S = 20.0
#: A node process stopped with SIGTERM gets this long before SIGKILL (seconds), as ``ros2 launch`` gives.
STOP_GRACE_S = 10.0


class NodeStartError(RuntimeError):
    """A node refused to start (a bad file it reads, a port in use ...); the message names the node."""

    def __init__(self, executable: str, cause: BaseException) -> None:
        super().__init__(f"{executable}: {str(cause).splitlines()[0] if str(cause) else type(cause).__name__}")
        self.executable = executable
        self.cause = cause


def describe_exit(returncode: int) -> str:
    """How a process ended, in words: ``was killed by SIGKILL (signal 9)``, ``exited with status 1``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by {name} (signal {-returncode})"
    return f"exited with status {returncode}"


@dataclass(frozen=True)
class NodeExit:
    """A node process that ended on its own during the run (not stopped by the supervisor)."""

    executable: str
    returncode: int

    def describe(self) -> str:
        return f"{self.executable} {describe_exit(self.returncode)}"


@dataclass
class BringupOutcome:
    finished: bool  # every trial ran (False: interrupted, or a node died)
    run_dir: Path | None
    summary: dict[str, Any] | None
    #: The trial manager's exit status (cli._common's table); None when it did not exit on its own
    #: or was killed by a signal (see ``node_exits``).
    exit_code: int | None = None
    #: Nodes that died during the run, in the order seen (one process per node only).
    node_exits: tuple[NodeExit, ...] = ()
    #: The trial manager died and its ``running`` run was marked failed by the supervisor.
    closed_run: bool = False


def build_nodes(profile: Profile, context: Any) -> list[Any]:
    """Instantiate every node of the profile in ``context`` (parameters as overrides, remappings as
    the node's own ``--ros-args -r``); a node that raises is reported as :class:`NodeStartError`."""
    from rclpy.parameter import Parameter

    nodes: list[Any] = []
    remaps = profile.remap_arguments()
    for spec in profile.nodes:
        cls = getattr(importlib.import_module(spec.module), spec.class_name)
        overrides = [Parameter(k, value=v) for k, v in spec.parameters.items()]
        try:
            nodes.append(cls(context=context, parameter_overrides=overrides, cli_args=remaps or None))
        except Exception as exc:
            for node in reversed(nodes):
                node.destroy_node()
            raise NodeStartError(spec.executable, exc) from exc
    return nodes


def run_in_process(profile: Profile, stop: threading.Event,
                   on_finished: Callable[[BringupOutcome], None] | None = None) -> BringupOutcome:
    """All nodes in one process and one executor (still over DDS); returns when the trials end or ``stop``.

    With ``on_finished``, the trials' end calls it and the graph keeps running until ``stop`` (the live
    Foxglove view stays up to inspect the final state). The profile's ``environment`` (a chosen rig) becomes
    this process's, as the nodes read it here."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    os.environ.update(dict(profile.environment))
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
        outcome = BringupOutcome(finished, run_dir, summary,
                                 manager.exit_code if manager is not None and finished else None)
        if on_finished is not None and finished and not stop.is_set():
            on_finished(outcome)
            while not stop.is_set():
                executor.spin_once(timeout_sec=0.1)
        return outcome
    finally:
        # Let callbacks already handed to the thread pool finish before their nodes go away.
        from robofollow_ros.nodes._main import shutdown_executor

        for node in nodes:
            executor.remove_node(node)
        since = time.monotonic()
        with Heartbeat(lambda: f"… stopping the nodes: the callbacks under way finish first, {waited(since)}",
                       sys.stderr):
            shutdown_executor(executor, timeout_sec=30.0)
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.shutdown(context=context)


def node_arguments(profile: Profile, params_file: Path) -> dict[str, list[str]]:
    """Each node's arguments after ``python -m <module>``: ``--ros-args --params-file FILE`` (the profile as
    :func:`ros_params_file` writes it) and the profile's remappings. One process per node here, and the
    multi-host test bed (test/test_testbed_ros.py) that starts the same nodes on different hosts."""
    remaps = [arg for arg in profile.remap_arguments() if arg != "--ros-args"]
    return {spec.executable: ["--ros-args", "--params-file", str(params_file), *remaps] for spec in profile.nodes}


def run_as_processes(profile: Profile, stop: threading.Event, log_dir: Path | None = None,
                     on_finished: Callable[[BringupOutcome], None] | None = None,
                     on_node_exit: Callable[[NodeExit], None] | None = None) -> BringupOutcome:
    """One process per node (``python -m <module> --ros-args --params-file``); ends with the trial manager,
    or with ``on_finished``, calls it then and keeps the other nodes running until ``stop``.

    A node that dies meanwhile is reported to ``on_node_exit`` at once and in the outcome's ``node_exits``
    (the trial manager only when a signal ended it: its exit statuses are its own report); see the module
    docstring for what happens to the run then."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as params:
        yaml.safe_dump(ros_params_file(profile), params)
    arguments = node_arguments(profile, Path(params.name))
    procs: dict[str, subprocess.Popen[bytes]] = {}
    exits: list[NodeExit] = []
    code: int | None = None
    finished = False
    keys = _takes_terminal_keys(profile)
    reader = None
    env = child_env({**os.environ, **dict(profile.environment)})  # this process's (--rig's), the profile's
    try:
        for spec in profile.nodes:
            out = open(log_dir / f"{spec.executable}.log", "wb") if log_dir else None  # noqa: SIM115
            # A process group of its own: Ctrl-C at the terminal reaches bringup alone, which stops the nodes
            # below with SIGTERM. Were they in the terminal's group, a node still importing (the first
            # seconds) would print a KeyboardInterrupt traceback from inside the import.
            procs[spec.executable] = subprocess.Popen(
                child_command(spec.module, arguments[spec.executable]),
                stdout=out or None, stderr=subprocess.STDOUT if out else None, env=env, **OWN_PROCESS_GROUP,
                stdin=subprocess.PIPE if keys and spec.executable == TRIAL_MANAGER else None)
        manager = procs.get(TRIAL_MANAGER)
        if keys and manager is not None:
            reader = _forward_keys(manager)
        deadline: float | None = None
        while not stop.is_set():
            for name, proc in procs.items():
                returncode = proc.poll()
                if returncode is None or any(e.executable == name for e in exits):
                    continue
                if name != TRIAL_MANAGER or returncode < 0:
                    exits.append(NodeExit(name, returncode))
                    if on_node_exit is not None:
                        on_node_exit(exits[-1])
            if manager is None or manager.poll() is not None:
                if manager is not None or exits:
                    break
            elif exits and deadline is None:  # the trial manager records the trial under way and ends the run
                deadline = time.monotonic() + RECORD_GRACE_S
            if deadline is not None and time.monotonic() > deadline:
                break
            stop.wait(0.2)
        returncode = manager.poll() if manager is not None and not stop.is_set() else None
        code = returncode if returncode is not None and returncode >= 0 else None
        finished = code is not None and not exits and _outcome_run_complete(profile)
        if on_finished is not None and finished:
            on_finished(_outcome_from_files(profile, finished, code))
            while not stop.is_set() and all(p.poll() is None for n, p in procs.items() if n != TRIAL_MANAGER):
                stop.wait(0.2)
    finally:
        if reader is not None:
            reader.close()  # the terminal's own settings back
        # The trial manager first, so that it marks the run before its peers leave the graph under it. A node
        # busy in one long call (sim_node's first picture) exits only at the SIGKILL, 10 s on: told meanwhile.
        since = time.monotonic()
        with Heartbeat(lambda: f"… stopping the nodes: waiting for {_alive(procs)} to exit, {waited(since)} "
                               f"(SIGKILL after {STOP_GRACE_S:g} s)", sys.stderr):
            _stop_processes([p for n, p in procs.items() if n == TRIAL_MANAGER])
            _stop_processes([p for n, p in procs.items() if n != TRIAL_MANAGER])
        os.unlink(params.name)
    closed = False
    killed = next((e for e in exits if e.executable == TRIAL_MANAGER), None)
    run_dir = _run_dir(profile)
    if killed is not None and run_dir is not None:
        from robofollow_ros.evaluation.results import close_abandoned_run

        closed = close_abandoned_run(
            run_dir, f"{killed.describe()} before all trials ran; the trial under way was not recorded")
    outcome = _outcome_from_files(profile, finished, code)
    outcome.node_exits, outcome.closed_run = tuple(exits), closed
    return outcome


def _takes_terminal_keys(profile: Profile) -> bool:
    """The trial manager takes the operator's keys (``confirm_with_key``) and bringup runs at a terminal."""
    wants = profile.has(TRIAL_MANAGER) and bool(profile.node(TRIAL_MANAGER).parameters.get("confirm_with_key"))
    return wants and sys.stdin is not None and sys.stdin.isatty()


def _forward_keys(manager: subprocess.Popen[bytes]) -> KeyReader:
    """Bringup reads the operator's keys (single keys, ``rig.keys``) and hands them to the trial manager's
    process one per line: in a process group of its own, it may not read the terminal (a read would stop it
    with SIGTTIN)."""
    def forward(key: str) -> None:
        if manager.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):  # the trial manager has gone
            manager.stdin.write(key.encode() + b"\n")
            manager.stdin.flush()

    return KeyReader(sys.stdin, forward).start()


def _alive(procs: dict[str, subprocess.Popen[bytes]]) -> str:
    return ", ".join(name for name, proc in procs.items() if proc.poll() is None) or "the nodes"


def _stop_processes(group: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL after STOP_GRACE_S, as ``ros2 launch`` escalates.

    A node turns SIGTERM into a clean stop like SIGINT (``nodes._main.stop_on_signals``), and one still
    starting, before its handler is set, ends quietly instead of printing a KeyboardInterrupt traceback."""
    for proc in group:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in group:
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run_dir(profile: Profile) -> Path | None:
    output = profile.node(TRIAL_MANAGER).parameters.get("output") if profile.has(TRIAL_MANAGER) else None
    return Path(output) if output else None


def _outcome_run_complete(profile: Profile) -> bool:
    from robofollow_ros.rundir.atomic import read_json
    from robofollow_ros.rundir.layout import RUN_FILE

    run_dir = _run_dir(profile)
    run_file = run_dir / RUN_FILE if run_dir else None
    return bool(run_file and run_file.is_file() and read_json(run_file).get("status") == "complete")


def _outcome_from_files(profile: Profile, finished: bool, code: int | None) -> BringupOutcome:
    from robofollow_ros.rundir.atomic import read_json
    from robofollow_ros.rundir.layout import SUMMARY_FILE

    run_dir = _run_dir(profile)
    if run_dir is None:
        return BringupOutcome(finished, None, None, code)
    summary_file = run_dir / SUMMARY_FILE
    return BringupOutcome(finished, run_dir, read_json(summary_file) if summary_file.is_file() else None, code)
