"""``robofollow bringup sim|rig``: start a bringup profile's ROS graph without ``launch`` installed.

Reads the same ``config/profiles/<rig>.yaml`` as the launch files, runs the trials, stops cleanly on
Ctrl-C / SIGTERM or when the trials end, and prints the score table. Run from a terminal with the
Foxglove node in the profile, the graph (and so the live view) stays up after the trials until Ctrl-C,
so the final state can be inspected; ``--exit-when-done`` (scripts, CI, ``make demo``) exits at once.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bringup", help="run the ROS 2 graph of a bringup profile (sim or rig) without ros2 launch",
        description="Start the nodes of config/profiles/<rig>.yaml over DDS, run the trials and print the scores.",
    )
    p.add_argument("rig", choices=("sim", "rig"), help="which profile: sim (SAPIEN) or rig (the physical arms)")
    p.add_argument("--profile", type=Path, metavar="FILE", help="a profile YAML instead of config/profiles/<rig>.yaml")
    p.add_argument("--trials", metavar="SPEC", help="trials SPEC, e.g. 'scene=scene1 levels=L0 limit=2 rounds=1'")
    p.add_argument("--policy", metavar="SPEC", help="policy SPEC for policy_node (hold, oracle, tcp://HOST:PORT, ...)")
    p.add_argument("--max-steps", type=int, metavar="N", help="policy calls per trial (the step budget)")
    p.add_argument("--no-render", action="store_true", help="sim: physics only, no camera images")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="new or empty run directory (default runs/ros-<UTC time>)")
    p.add_argument("--processes", action="store_true", help="one OS process per node instead of one process")
    p.add_argument("--foxglove-port", type=int, metavar="PORT",
                   help="port of the live Foxglove server (default 8765; 0 picks a free one)")
    p.add_argument("--no-foxglove", action="store_true",
                   help="leave out foxglove_node (no live view on ws://127.0.0.1:8765, no MCAP per trial)")
    p.add_argument("--exit-when-done", action="store_true",
                   help="exit when the trials end (default from a terminal: keep the Foxglove view up until Ctrl-C)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_bringup)


def _linger(args: argparse.Namespace, executables: set[str]) -> bool:
    """Keep the graph up after the trials: a person at a terminal is watching the live view."""
    return not args.exit_when_done and "foxglove_node" in executables and sys.stdin.isatty() and sys.stdout.isatty()


def _extra(args: argparse.Namespace, nodes: set[str]) -> dict[str, dict[str, Any]]:
    extra: dict[str, dict[str, Any]] = {}
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise CliError(f"--max-steps: must be >= 1, got {args.max_steps}")
        extra["trial_manager_node"] = {"max_steps": args.max_steps}
    if args.no_render:
        if "sim_node" not in nodes:
            raise CliError("--no-render: this profile has no sim_node")
        extra["sim_node"] = {"render": False}
    if args.foxglove_port is not None and not args.no_foxglove:
        if not 0 <= args.foxglove_port <= 65535:
            raise CliError(f"--foxglove-port: {args.foxglove_port} is outside 0..65535")
        extra["foxglove_node"] = {"port": args.foxglove_port}
    return extra


def _failed_trials(run_dir: Path | None) -> list[str]:
    """``<task> r<round>: <error>`` for every recorded trial the policy (or the graph) failed."""
    from robofollow_ros.evaluation.jsonio import read_json

    path = run_dir / "results.json" if run_dir is not None else None
    if path is None or not path.is_file():
        return []
    return [f"{r['task']} r{r['round']}: {str(r['policy_error']).splitlines()[0]}"
            for r in read_json(path) if r.get("policy_error")]


def _bringup(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.bringup import (
        BringupOutcome,
        ProfileError,
        load_profile,
        run_as_processes,
        run_in_process,
        with_overrides,
        without_nodes,
    )
    from robofollow_ros.evaluation.report import format_table, run_table
    from robofollow_ros.nodes.trial_plan import TrialSpecError, parse_trials
    from robofollow_ros.policy.spec import PolicySpecError, load_policy

    output = args.output or Path("results") / time.strftime("ros-%Y%m%dT%H%M%SZ", time.gmtime())
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CliError(f"--output: {output} exists and is not an empty directory")
    try:
        profile = load_profile(args.profile or args.rig)
        if args.no_foxglove:
            profile = without_nodes(profile, {"foxglove_node"})
        profile = with_overrides(profile, trials=args.trials, policy=args.policy, output=str(output),
                                 extra=_extra(args, {n.executable for n in profile.nodes}))
        manager = profile.node("trial_manager_node")
        parse_trials(str(manager.parameters.get("trials", "")), default_registry())
        if args.policy:
            from robofollow_ros.policy.interface import close_policy

            close_policy(load_policy(args.policy))  # a bad SPEC fails here, not inside a node
    except (ProfileError, TrialSpecError, PolicySpecError) as exc:
        raise CliError(str(exc)) from None

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    reported: list[bool] = []

    def report(outcome: BringupOutcome) -> None:
        reported.append(True)
        summary = outcome.summary
        if args.json:
            print(json.dumps(summary, indent=2))
        elif summary is not None:
            label = args.policy or profile.node("policy_node").parameters.get("policy", "?")
            print(format_table(run_table(summary), title=f"{label} over ROS — {outcome.run_dir}"))
        for trial in _failed_trials(outcome.run_dir):
            print(f"failed trial {trial}")

    def linger(outcome: BringupOutcome) -> None:
        report(outcome)
        fox = profile.node("foxglove_node").parameters
        port = fox.get("port", 8765)
        where = f"ws://{fox.get('host', '127.0.0.1')}:{port}" if port else "the address foxglove_node logged"
        print(f"trials done; the Foxglove view stays up at {where} to inspect the final state. "
              "Ctrl-C to exit (--exit-when-done exits at once).", flush=True)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        hold = linger if _linger(args, {n.executable for n in profile.nodes}) else None
        if args.processes:
            outcome = run_as_processes(profile, stop, on_finished=hold)
        else:
            outcome = run_in_process(profile, stop, on_finished=hold)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not reported:
        report(outcome)
    if received and reported and outcome.finished and hold is not None:
        return 0  # Ctrl-C after the trials ended is how a lingering run is meant to end
    if received:
        print(f"stopped by signal {received[0]}; results so far in {outcome.run_dir}")
        return 128 + received[0]
    if not outcome.finished:
        print("the graph stopped before all trials ran")
        return 1
    return 0
