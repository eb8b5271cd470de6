"""``robofollow eval``: run the RoboFollow protocol headless in SAPIEN against any policy SPEC."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import EXIT_OK, EXIT_TRIALS_FAILED, CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate a policy on the RoboFollow protocol in SAPIEN (no ROS middleware)",
        description="Run trials (tasks x rounds) headless and write run.json, results.json, summary.json and SQLite.",
    )
    p.add_argument("--policy", required=True, help="hold | oracle | blind | memorizer | module:function | "
                                                   "tcp://HOST:PORT | openpi://HOST:PORT")
    p.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the policy factory or client")
    p.add_argument("--scene", default="all", help="all, or a comma list of scene1..scene4 (default all)")
    p.add_argument("--levels", default="L0,L1,L2,L3", help="comma list of L0..L3 (default all)")
    p.add_argument("--rounds", type=int, default=10, help="rounds per task, 1..10 (default 10)")
    p.add_argument("--limit", type=int, help="keep the first K selected tasks per scene")
    p.add_argument("--tasks", help="comma list of evaluation task ids")
    p.add_argument("--max-steps", type=int, default=10, help="policy calls per trial (default 10)")
    p.add_argument("--actions-per-step", type=int, default=50, help="rows executed per call (default 50)")
    render = p.add_mutually_exclusive_group()
    render.add_argument("--render", dest="render", action="store_true", help="render the three cameras (default)")
    render.add_argument("--no-render", dest="render", action="store_false", help="physics only, no images")
    p.set_defaults(render=True)
    p.add_argument("--stepper", choices=("topp", "direct"), default="topp", help="how each row is executed")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--output", required=True, type=Path, help="new or empty run directory")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --output")
    p.add_argument("--json", action="store_true", help="print the summary as JSON at the end")
    p.add_argument("--record", action="store_true",
                   help="record every trial to OUTPUT/mcap/<trial>.mcap (Foxglove; `robofollow replay` re-scores)")
    p.set_defaults(func=_eval)


def build_config(args: argparse.Namespace) -> Any:
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.runner import EvalConfig
    from robofollow_ros.evaluation.selection import parse_levels, parse_scenes

    try:
        kwargs = json.loads(args.kwargs)
    except json.JSONDecodeError as exc:
        raise CliError(f"--kwargs: not valid JSON ({exc})") from None
    if not isinstance(kwargs, dict):
        raise CliError(f"--kwargs: expected a JSON object, got {args.kwargs!r}")
    try:
        return EvalConfig(
            policy=args.policy, policy_kwargs=kwargs, output=args.output,
            scenes=tuple(parse_scenes(args.scene)), levels=tuple(parse_levels(args.levels)),
            rounds=args.rounds, limit=args.limit,
            tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()) if args.tasks else (),
            settings=EpisodeSettings(args.max_steps, args.actions_per_step), render=args.render,
            stepper=args.stepper, workers=args.workers, resume=args.resume, record=args.record,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _eval(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError
    from robofollow_ros.evaluation.report import format_table, run_table
    from robofollow_ros.evaluation.results import RunDirError
    from robofollow_ros.evaluation.runner import run_evaluation
    from robofollow_ros.policy.spec import PolicySpecError

    config = build_config(args)
    try:
        outcome = run_evaluation(config, stream=sys.stderr)
    except RunDirError as exc:
        hint = "" if args.resume else " (add --resume to continue a killed run there)"
        raise CliError(f"{exc}{hint}") from None
    except (UnknownTaskError, PolicySpecError, ValueError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(outcome.summary, indent=2))
    else:
        print(format_table(run_table(outcome.summary), title=args.policy))
        if outcome.skipped:
            print(f"resumed: {outcome.skipped} trials were already recorded, {outcome.recorded} ran now")
        for trial, reason in outcome.failed_trials:
            print(f"failed trial {trial}: {reason}")
    # Trials that could not be executed (policy errors) are not "ran and scored low": a status of their own.
    return EXIT_TRIALS_FAILED if outcome.failed_trials else EXIT_OK
