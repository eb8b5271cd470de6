"""``robofollow bringup sim|rig|mock``: start a bringup profile's ROS graph without ``launch`` installed.

Reads the same ``config/profiles/<rig>.yaml`` as the launch files and applies the same choices
(``bringup.apply_choices``); trials are picked with ``robofollow eval``'s flags. Before anything
starts it checks the profile's parameters, the trial selection, the policy (connect + reset) and
the Foxglove port, each failing with one line and its own exit status; then it runs the trials,
stops cleanly on Ctrl-C / SIGTERM or when the trials end, and prints the score table. Run from a
terminal with the Foxglove node in the profile, the graph (and so the live view) stays up after the
trials until Ctrl-C, so the final state can be inspected; ``--exit-when-done`` (scripts, CI,
``make demo``) exits at once. ``--rig`` (checked before anything starts) is this process's
``ROBOFOLLOW_RIG``: the nodes, in this process or each in its own (which inherits the environment),
load that rig, and the trial manager's run.json records it.

With one process per node, a node that dies on its own is named in one line with its signal or exit
status, and the command exits with a documented status (``EXIT_TRIALS_FAILED``, never a raw signal
number); a killed trial manager's run is closed by bringup (``running.run_as_processes``).
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

from robofollow_ros.cli._common import (
    MAX_ACTIONS_PER_STEP,
    MAX_LIMIT,
    PORT,
    STEPS,
    CliError,
    add_rig_option,
    integer,
    number,
    seconds,
)
from robofollow_ros.exit_status import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_POLICY_UNREACHABLE,
    EXIT_PORT_IN_USE,
    EXIT_STATUSES,
    EXIT_TRIALS_FAILED,
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bringup", help="run the ROS 2 graph of a bringup profile (sim, rig or mock) without ros2 launch",
        description="Start the nodes of config/profiles/<rig>.yaml over DDS, run the trials and print the scores.",
    )
    p.add_argument("rig", choices=("sim", "rig", "mock"),
                   help="which profile: sim (SAPIEN), rig (the physical arms) or mock (mock hardware, no physics)")
    p.add_argument("--profile", type=Path, metavar="FILE", help="a profile YAML instead of config/profiles/<rig>.yaml")
    add_rig_option(p)
    p.add_argument("--policy", metavar="SPEC", help="policy SPEC for policy_node (hold, oracle, tcp://HOST:PORT, ...)")
    p.add_argument("--kwargs", metavar="JSON", help="JSON keyword arguments for the policy factory or client")
    p.add_argument("--privileged", action="store_true",
                   help="as robofollow eval --privileged: policy_node hands any policy the privileged state (task id, "
                        "true object poses), also over tcp://; recorded in run.json; not comparable with published "
                        "results")
    p.add_argument("--scene", help="as robofollow eval: all, or a comma list of scene1..scene4")
    p.add_argument("--levels", help="as robofollow eval: comma list of L0..L3")
    p.add_argument("--limit", type=integer(1, MAX_LIMIT),
                   help="as robofollow eval: keep the first K selected tasks of each scene and level")
    p.add_argument("--tasks", help="as robofollow eval: comma list of evaluation task ids")
    p.add_argument("--rounds", type=integer(1, 10),
                   help="as robofollow eval: rounds per task, 1..10 (default: the profile's)")
    p.add_argument("--controls", metavar="LIST",
                   help="as robofollow eval --controls (blank, shuffled, swap, paraphrase): control trials on each "
                        "trial's seed, interleaved in a seeded random order and blinded: the terminal, the live view "
                        "and the prompts do not say which instruction a trial got until the run ends "
                        "(docs/controls.md)")
    p.add_argument("--unblind", action="store_true",
                   help="with --controls: show each trial's instruction and control (debugging; recorded in run.json)")
    p.add_argument("--max-steps", type=STEPS, metavar="N", help="policy calls per trial (the step budget)")
    p.add_argument("--actions-per-step", type=integer(1, MAX_ACTIONS_PER_STEP), metavar="N",
                   help="rows executed per policy call")
    p.add_argument("--policy-timeout", type=seconds(), metavar="S",
                   help="as robofollow eval: longest policy call (in-process or remote) before its trial fails, "
                        "seconds (default: the profile's, 300)")
    p.add_argument("--execution", choices=("lockstep", "rate", "realtime"),
                   help="lockstep: the sim world waits for the policy (scoring parity with eval); rate: the sim "
                        "steps on a wall-clock timer at --control-hz and policy_node sends rows at that rate; "
                        "realtime: rate with the real-time chunk executor (the next chunk requested while rows "
                        "run); recorded in run.json (default: the profile's)")
    p.add_argument("--merge", choices=("latest", "weighted", "average", "ensemble"),
                   help="--execution realtime: how overlapping chunks merge (default latest)")
    p.add_argument("--control-hz", type=number(0, 1000, low_open=True, unit="Hz"), metavar="HZ",
                   help="--execution rate|realtime: control ticks per second (sim: a divisor of 250; default 25)")
    p.add_argument("--no-render", action="store_true", help="sim: physics only, no camera images")
    p.add_argument("--output", type=Path, metavar="DIR",
                   help="new or empty run directory (default results/ros-<UTC time>)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--processes", action="store_true",
                       help="one OS process per node, as ros2 launch runs them (default for rate-mode profiles: "
                            "mock, rig)")
    where.add_argument("--in-process", action="store_true",
                       help="every node in this one process and executor (default for lockstep profiles: sim)")
    p.add_argument("--foxglove-host", metavar="HOST", help="address the live Foxglove server binds (default 127.0.0.1)")
    p.add_argument("--foxglove-port", type=PORT, metavar="PORT",
                   help="port of the live Foxglove server (default 8765; 0 picks a free one)")
    p.add_argument("--foxglove-control", action="store_true",
                   help="with --foxglove-host beyond loopback: offer the operator's services there (trial controls, "
                        "take over / hand back, which move an arm; no authentication); default read-only there. "
                        "Recorded in run.json")
    p.add_argument("--no-foxglove", action="store_true",
                   help="leave out foxglove_node (no live view on ws://127.0.0.1:8765, no MCAP per trial)")
    p.add_argument("--exit-when-done", action="store_true",
                   help="exit when the trials end (default from a terminal: keep the Foxglove view up until Ctrl-C)")
    p.add_argument("--calibration-dir", metavar="DIR", help="rig: perception_node's camera calibration directory")
    p.add_argument("--driver-config", metavar="FILE",
                   help="arm driver map: a preset under config/rig/ (piper_ros2, cobot_magic, ...) or a path")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO", help="remap a topic for every node")
    p.add_argument("--remap-file", action="append", default=[], metavar="FILE",
                   help="remap preset under config/rig/ (e.g. realsense2_camera) or a path")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_bringup)


def _linger(args: argparse.Namespace, executables: set[str]) -> bool:
    """Keep the graph up after the trials: a person at a terminal is watching the live view."""
    return not args.exit_when_done and "foxglove_node" in executables and sys.stdin.isatty() and sys.stdout.isatty()


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _choices(args: argparse.Namespace, output: Path) -> Any:
    from robofollow_ros.bringup import Choices

    return Choices(policy=args.policy, policy_kwargs=args.kwargs, privileged=True if args.privileged else None,
                   scene=args.scene, levels=args.levels, controls=args.controls,
                   unblind=True if args.unblind else None,
                   limit=args.limit, tasks=args.tasks, rounds=args.rounds, max_steps=args.max_steps,
                   actions_per_step=args.actions_per_step, policy_timeout=args.policy_timeout, output=str(output),
                   execution=args.execution, merge=args.merge, control_hz=args.control_hz,
                   render=False if args.no_render else None, foxglove=not args.no_foxglove,
                   foxglove_host=args.foxglove_host, foxglove_port=args.foxglove_port,
                   foxglove_control=True if args.foxglove_control else None,
                   calibration_dir=args.calibration_dir, driver_config=args.driver_config, remaps=list(args.remap),
                   remap_files=list(args.remap_file))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-").replace("policy-kwargs", "kwargs")


def prepare(args: argparse.Namespace, output: Path) -> Any:
    """The profile to run, after every check that can fail before a node starts."""
    from robofollow_ros.bringup import (
        ProfileError,
        apply_choices,
        foxglove_address,
        load_profile,
        policy_of,
        privileged_of,
    )
    from robofollow_ros.evaluation.selection import parse_task_list
    from robofollow_ros.policy.spec import PolicySpecError
    from robofollow_ros.preflight import PolicyUnreachable, PortInUse, port_free, reach_policy

    try:
        parse_task_list(args.tasks)  # an id given twice is refused, as by eval
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        profile = apply_choices(load_profile(args.profile or args.rig), _choices(args, output), _flag)
        if profile.has("trial_manager_node"):
            profile = _quiet_manager(profile)
    except ProfileError as exc:
        raise CliError(_one_line(exc)) from None
    address = foxglove_address(profile)
    if address is not None:
        try:
            port_free(*address, what="the live Foxglove view", flag="--foxglove-port")
        except PortInUse as exc:
            raise CliError(str(exc), EXIT_PORT_IN_USE) from None
    if profile.has("policy_node"):
        spec, kwargs = policy_of(profile)
        try:
            reach_policy(spec, kwargs, privileged=privileged_of(profile))
        except PolicySpecError as exc:
            raise CliError(_one_line(exc)) from None
        except PolicyUnreachable as exc:
            raise CliError(str(exc), EXIT_POLICY_UNREACHABLE) from None
    return profile


def _quiet_manager(profile: Any) -> Any:
    """This command prints the table itself; the trial manager need not log it too."""
    from robofollow_ros.bringup import with_overrides

    return with_overrides(profile, extra={"trial_manager_node": {"print_summary": False}})


def _closing_table(run_dir: Path | None, summary: dict[str, Any], title: str) -> str:
    """The trials' Table 1 with n and intervals (as ``eval`` prints it), from the run's results.json (its
    instruction controls apart: ``report --controls``)."""
    from robofollow_ros.evaluation.report import format_table, run_table
    from robofollow_ros.evaluation.report_views import format_run_summary
    from robofollow_ros.rundir.atomic import read_json
    from robofollow_ros.rundir.layout import RESULTS_FILE

    path = run_dir / RESULTS_FILE if run_dir is not None else None
    if path is None or not path.is_file():  # no trials file to take n and intervals from: the means alone
        return format_table(run_table(summary), title=f"{title} (no results.json: no n, no intervals)")
    trials = read_json(path)  # true trials only, as eval's: a control is not a trial of the protocol
    return format_run_summary([t for t in trials if not t.get("control")], title)


def _failed_trials(run_dir: Path | None) -> list[str]:
    """``<task> r<round>: <why>`` for every recorded trial that could not be executed: its policy failed
    (``policy_error``) or a fault ended it (``fault: fault_reason``)."""
    from robofollow_ros.nodes.trial_faults import could_not_execute
    from robofollow_ros.rundir.atomic import read_json
    from robofollow_ros.rundir.layout import RESULTS_FILE

    path = run_dir / RESULTS_FILE if run_dir is not None else None
    if path is None or not path.is_file():
        return []
    return [f"{r['task']} r{r['round']}: {why.splitlines()[0]}"
            for r in read_json(path) if (why := could_not_execute(r))]


def _per_process(args: argparse.Namespace, profile: Any) -> bool:
    """One process per node unless told otherwise, except for lockstep profiles.

    A rate-mode graph (mock, rig) runs on the wall clock: the drivers' 100 Hz joint states fan out to
    five subscribers, and the policy holds when they are 0.2 s late. In one process every callback
    shares one interpreter lock and rclpy's executor spends more time building wait sets than the
    callbacks take, so on two cores the states arrived up to 1.1 s apart and every trial was held;
    one process per node (what ros2 launch does) kept them on time. A lockstep graph (sim) waits for
    each state, so one process costs it nothing and starts faster."""
    if args.processes or args.in_process:
        return bool(args.processes)
    mode = profile.node("policy_node").parameters.get("mode", "lockstep") if profile.has("policy_node") else ""
    return mode != "lockstep"


def _bringup(args: argparse.Namespace) -> int:
    from robofollow_ros.bringup import BringupOutcome, NodeExit, NodeStartError, run_as_processes, run_in_process
    output = args.output or Path("results") / time.strftime("ros-%Y%m%dT%H%M%SZ", time.gmtime())
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CliError(f"--output: {output} exists and is not an empty directory")
    # Seconds before the first node starts (the profile's parameters checked against the nodes' code, the policy
    # reached): told if it lasts, so that a refusal here stays one line.
    from robofollow_ros.evaluation.progress import Heartbeat, waited

    policy, since = f"the policy {args.policy}" if args.policy else "the profile's policy", time.monotonic()
    with Heartbeat(lambda: f"… checking the {args.rig} profile and reaching {policy} (connect + reset) before any "
                           f"node starts, {waited(since)}", sys.stderr):
        profile = prepare(args, output)

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
            label = profile.node("policy_node").parameters.get("policy", "?") if profile.has("policy_node") else "?"
            print(_closing_table(outcome.run_dir, summary, f"{label} over ROS — {outcome.run_dir}"))
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
    hold = linger if _linger(args, {n.executable for n in profile.nodes}) else None
    def died(node: NodeExit) -> None:
        print(f"robofollow bringup: {node.describe()}", file=sys.stderr, flush=True)

    per_process = _per_process(args, profile)
    # The nodes' own lines follow (the first can be seconds away: imports, the simulator); say what starts.
    print(f"robofollow bringup: starting {len(profile.nodes)} nodes "
          f"{'as processes' if per_process else 'in one process'} "
          f"({', '.join(n.executable for n in profile.nodes)}); results in {output}", file=sys.stderr, flush=True)
    try:
        if per_process:
            outcome = run_as_processes(profile, stop, on_finished=hold, on_node_exit=died)
        else:
            outcome = run_in_process(profile, stop, on_finished=hold)
    except NodeStartError as exc:
        in_use = "address already in use" in str(exc.cause).lower() or "address in use" in str(exc.cause).lower()
        if in_use:
            raise CliError(f"{exc}; choose another port with --foxglove-port (0 picks a free one)",
                           EXIT_PORT_IN_USE) from None
        raise CliError(f"node {_one_line(exc)}", EXIT_BAD_INPUT) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not reported:
        report(outcome)
    lingered = received and reported and outcome.finished and hold is not None
    if received and not lingered:  # Ctrl-C after the trials ended is how a lingering run is meant to end
        print(f"stopped by signal {received[0]}; results so far in {outcome.run_dir}")
        return 128 + received[0]
    if outcome.closed_run:
        print(f"robofollow bringup: the run in {outcome.run_dir} was marked failed (its writer, the trial manager, "
              "died); the trials recorded are kept", file=sys.stderr)
    if outcome.node_exits:  # trials could not be executed: the trial manager's own status, or that one
        return outcome.exit_code if outcome.exit_code in (EXIT_INTERNAL, EXIT_POLICY_UNREACHABLE) else \
            EXIT_TRIALS_FAILED
    if outcome.exit_code not in (None, EXIT_OK):
        return int(outcome.exit_code) if outcome.exit_code in EXIT_STATUSES else EXIT_INTERNAL
    if not outcome.finished:
        print("the graph stopped before all trials ran")
        return EXIT_INTERNAL
    return EXIT_OK
