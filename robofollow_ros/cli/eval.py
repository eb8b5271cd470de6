"""``robofollow eval``: run the RoboFollow protocol headless in SAPIEN against any policy SPEC."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import (
    MAX_ACTIONS_PER_STEP,
    MAX_LIMIT,
    STEPS,
    WORKERS,
    CliError,
    add_rig_option,
    integer,
    seconds,
)
from robofollow_ros.exit_status import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT_UNUSABLE,
    EXIT_POLICY_UNREACHABLE,
    EXIT_TRIALS_FAILED,
)


def register(subparsers: Any) -> None:
    from robofollow_ros.monitoring.rates import CONTROL_HZ
    from robofollow_ros.policy.execution.merge import MERGE_RULES
    from robofollow_ros.policy.spec import spec_forms

    p = subparsers.add_parser(
        "eval", help="evaluate a policy on the RoboFollow protocol in SAPIEN (no ROS middleware)",
        description="Run trials (tasks x rounds) headless and write run.json, results.json, summary.json and SQLite.",
    )
    p.add_argument("--policy", required=True, metavar="SPEC", help=f"one of: {spec_forms()}")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the policy factory or client")
    p.add_argument("--scene", default="all", help="all, or a comma list of scene1..scene4 (default all)")
    p.add_argument("--levels", default="L0,L1,L2,L3", help="comma list of L0..L3 (default all)")
    p.add_argument("--rounds", type=integer(1, 10), default=10, help="rounds per task, 1..10 (default 10)")
    p.add_argument("--limit", type=integer(1, MAX_LIMIT), metavar="K",
                   help="keep the first K selected tasks of each scene and level (--levels L0,L1 --limit 2: "
                        "2 L0 and 2 L1 tasks per scene; RoboFollow's own --limit counts per scene)")
    p.add_argument("--tasks", help="comma list of evaluation task ids")
    p.add_argument("--max-steps", type=STEPS, default=10, help="policy calls per trial (default 10)")
    p.add_argument("--actions-per-step", type=integer(1, MAX_ACTIONS_PER_STEP), default=50,
                   help="rows executed per call (default 50)")
    p.add_argument("--budget", choices=("calls", "rows"), default="calls",
                   help="what a trial's budget counts: calls = --max-steps policy calls (default; the official "
                        "evaluator's, comparable with published numbers); rows = --max-steps x --actions-per-step "
                        "executed rows, whatever each call returns (servers answering one action per call, e.g. "
                        "vla-eval's chunked model servers); run.json records the unit, results.json calls and rows")
    render = p.add_mutually_exclusive_group()
    render.add_argument("--render", dest="render", action="store_true", help="render the three cameras (default)")
    render.add_argument("--no-render", dest="render", action="store_false", help="physics only, no images")
    p.set_defaults(render=True)
    p.add_argument("--stepper", choices=("topp", "direct"), help="how each row is executed (default topp; "
                                                                 "--execution realtime: direct, one row per tick)")
    p.add_argument("--execution", choices=("lockstep", "realtime"), default="lockstep",
                   help="lockstep: the world waits for every predict (default; the official evaluator's loop, "
                        "comparable scores); realtime: the arms move at --control-hz while the policy thinks, "
                        "latency costs ticks (not comparable with published results; docs/benchmarks.md)")
    p.add_argument("--merge", choices=MERGE_RULES, help="realtime: how overlapping chunks merge (default latest)")
    p.add_argument("--control-hz", type=integer(min(CONTROL_HZ), max(CONTROL_HZ)), choices=CONTROL_HZ,
                   help="realtime: control ticks per second of simulated time (default 25)")
    p.add_argument("--threshold", type=integer(0, MAX_ACTIONS_PER_STEP), metavar="ROWS",
                   help="realtime: request the next chunk when at most ROWS are queued (default half a chunk)")
    p.add_argument("--fixed-threshold", action="store_true",
                   help="realtime: never raise --threshold to the measured delay (with --threshold 0: the arm "
                        "holds while each chunk is computed)")
    p.add_argument("--workers", type=WORKERS, help="parallel workers: processes (local, default 1) or Ray actors "
                                                "(ray, default one per CPU of the cluster)")
    p.add_argument("--backend", choices=("local", "ray", "inline"), default="local",
                   help="local: supervised worker processes (default); ray: Ray actors on a cluster; "
                        "inline: in this process (debuggers)")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="Ray cluster to join: auto, HOST:6379 or ray://HOST:10001 (default: start Ray here)")
    p.add_argument("--policy-timeout", type=seconds(), default=300.0, metavar="S",
                   help="bound of every policy call, in-process or remote; an overrun fails the trial (default 300)")
    p.add_argument("--privileged", action="store_true",
                   help="hand every policy the privileged state (task id, true object poses), also over tcp://; "
                        "recorded in run.json; such a run is not comparable with published results (without it "
                        "only the oracle and blind get it, in process)")
    add_rig_option(p)
    p.add_argument("--controls", metavar="LIST",
                   help="instruction controls run beside every trial on its seed, a comma list of blank, shuffled, "
                        "swap, paraphrase (docs/controls.md; robofollow report RUN --controls)")
    p.add_argument("--output", required=True, type=Path, help="new or empty run directory")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --output (on the same rig)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON at the end")
    p.add_argument("--record", action="store_true",
                   help="record every trial to OUTPUT/mcap/<trial>.mcap (Foxglove; `robofollow replay` re-scores)")
    p.add_argument("--record-rate", default=None, metavar="RATE",
                   help="policy: cameras when the policy gets them (the default without --video); control, 5, 10, "
                        "25 or 50: joint states, set-points and the three cameras every 1/N s of robot time "
                        "(control = 10, the default with --video), what `robofollow export-lerobot` needs; with "
                        "--record")
    p.add_argument("--video", action="store_true",
                   help="with --record: after the trials, OUTPUT/videos/<trial>.mp4 (cameras, instruction, stage "
                        "states, IS/ES burned in) and a contact sheet <trial>.png per trial (`robofollow video`)")
    p.set_defaults(func=_eval)


def build_config(args: argparse.Namespace) -> Any:
    from robofollow_ros.evaluation.controls import parse_controls
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.runner import EvalConfig
    from robofollow_ros.evaluation.selection import parse_levels, parse_scenes, parse_task_list
    from robofollow_ros.monitoring.rates import parse_record_rate

    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as exc:
        raise CliError(f"--kwargs: not valid JSON ({exc})") from None
    if not isinstance(kwargs, dict):
        raise CliError(f"--kwargs: expected a JSON object, got {args.kwargs!r}")
    try:
        record_hz = parse_record_rate(args.record_rate or ("control" if args.video else "policy"))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        return EvalConfig(
            policy=args.policy, policy_kwargs=kwargs, output=args.output,
            scenes=tuple(parse_scenes(args.scene)), levels=tuple(parse_levels(args.levels)),
            rounds=args.rounds, limit=args.limit,
            tasks=parse_task_list(args.tasks),
            settings=EpisodeSettings(args.max_steps, args.actions_per_step, _execution(args)), render=args.render,
            stepper=args.stepper or ("direct" if args.execution == "realtime" else "topp"),
            workers=_workers(args), resume=args.resume, record=args.record, record_hz=record_hz, video=args.video,
            backend=args.backend, ray_address=args.ray_address, policy_timeout_s=args.policy_timeout,
            privileged=args.privileged, controls=parse_controls(args.controls),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _execution(args: argparse.Namespace) -> Any:
    """``--execution`` and its options; the realtime options are refused in lock-step (one line)."""
    from robofollow_ros.evaluation.execution_mode import DEFAULT_CONTROL_HZ, ExecutionSettings

    given = {name: value for name, value in (("merge", args.merge), ("control_hz", args.control_hz),
                                             ("threshold", args.threshold)) if value is not None}
    if args.fixed_threshold:
        given["adapt_threshold"] = False
    if args.execution == "lockstep" and given:
        flags = ", ".join("--" + ("fixed-threshold" if k == "adapt_threshold" else k.replace("_", "-")) for k in given)
        raise CliError(f"{flags}: only with --execution realtime")
    budget = getattr(args, "budget", "calls")
    if args.execution == "realtime":
        if budget != "calls":
            raise CliError("--budget rows: --execution realtime already counts control ticks "
                           "(--max-steps x --actions-per-step); leave --budget out")
        given.setdefault("control_hz", DEFAULT_CONTROL_HZ)
        return ExecutionSettings(mode=args.execution, **given)
    return ExecutionSettings(budget=budget)


def _workers(args: argparse.Namespace) -> int:
    if args.workers is not None:
        return int(args.workers)
    return 0 if args.backend == "ray" else 1


#: Exit status of each way a worker can fail to start (evaluation.worker_errors kinds).
START_EXIT = {"bad_spec": EXIT_BAD_INPUT, "unreachable": EXIT_POLICY_UNREACHABLE, "died": EXIT_POLICY_UNREACHABLE,
              "other": EXIT_INTERNAL}


def reach(config: Any, spec: str) -> None:
    """A remote policy's server must accept a connection now, as bringup checks it: one line naming the address
    in seconds (exit 4), not a worker's minute of reconnects. Not on a Ray cluster named by --ray-address,
    whose workers may reach addresses this machine cannot."""
    from robofollow_ros.preflight import PolicyUnreachable, reach_address

    if config.backend == "ray" and config.ray_address is not None:
        return
    try:
        reach_address(spec)
    except PolicyUnreachable as exc:
        raise CliError(str(exc), EXIT_POLICY_UNREACHABLE) from None


def resume_command(args: argparse.Namespace) -> str:
    """The command line that continues this run: as typed (``args.argv``), with ``--resume`` once."""
    argv = list(getattr(args, "argv", None) or [])
    if "--resume" not in argv:
        argv.append("--resume")
    return shlex.join(["robofollow", *argv])


def _eval(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError
    from robofollow_ros.evaluation.ray_pool import RayHeadLost
    from robofollow_ros.evaluation.report_views import format_run_summary
    from robofollow_ros.evaluation.runner import run_evaluation
    from robofollow_ros.evaluation.worker_errors import WorkerStartError
    from robofollow_ros.policy.spec import PolicySpecError
    from robofollow_ros.rundir import OutputUnusableError, RunDirError
    from robofollow_ros.rundir.atomic import read_json

    config = build_config(args)
    reach(config, config.policy)
    try:
        outcome = run_evaluation(config, stream=sys.stderr)
    except KeyboardInterrupt:
        if not (config.output / "run.json").is_file():
            raise  # nothing was written yet: `interrupted`, and the same command starts afresh
        # The trials recorded so far are kept (each is written when it ends); the run continues where it
        # stopped with the same command and --resume (any other setting is refused, docs/scale-out.md).
        if sys.stderr.isatty():
            sys.stderr.write("\n")  # past the progress line drawn in place
        print(f"interrupted; the trials recorded so far are kept in {config.output}. Continue the run with:\n"
              f"  {resume_command(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OutputUnusableError as exc:
        raise CliError(str(exc), EXIT_OUTPUT_UNUSABLE) from None
    except RunDirError as exc:
        hint = "" if args.resume else " (add --resume to continue a killed run there)"
        raise CliError(f"{exc}{hint}") from None
    except WorkerStartError as exc:
        raise CliError(str(exc), START_EXIT.get(exc.kind, EXIT_INTERNAL)) from None
    except RayHeadLost as exc:
        # A cluster's head gone mid-run. The run directory is closed (what was recorded stays, --resume
        # finishes), but Ray's exit handler would wait minutes on the head that is gone: leave now.
        print(f"robofollow eval: error: {exc}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(EXIT_TRIALS_FAILED)
    except (UnknownTaskError, PolicySpecError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(outcome.summary, indent=2))
    else:
        trials = read_json(outcome.run_dir / "results.json")
        print(format_run_summary([t for t in trials if not t.get("control")], title=args.policy))
        if len(trials) > (true := sum(1 for t in trials if not t.get("control"))):
            print(f"controls: {len(trials) - true} control trials beside {true} true ones (not in the table above); "
                  f"robofollow report {shlex.quote(str(outcome.run_dir))} --controls")
        if outcome.skipped:
            print(f"resumed: {outcome.skipped} trials were already recorded, {outcome.recorded} ran now")
        if outcome.requeued_trials:
            print(f"{outcome.requeued_trials} trial(s) ran again after their Ray node was lost")
        for trial, reason in outcome.failed_trials:
            print(f"failed trial {trial}: {reason}")
    # Trials that could not be executed (policy errors, timeouts, dead workers) are recorded as such;
    # the exit status tells them apart from a run whose every trial ran and was scored.
    return EXIT_TRIALS_FAILED if outcome.failed_trials else EXIT_OK
