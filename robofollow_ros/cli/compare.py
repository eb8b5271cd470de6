"""``robofollow compare``: a sequential A/B test of two policies on paired trials (evaluation.sequential_run)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import MAX_ACTIONS_PER_STEP, MAX_LIMIT, SEED, STEPS, CliError, integer, number, seconds
from robofollow_ros.exit_status import EXIT_INTERNAL, EXIT_OK, EXIT_OUTPUT_UNUSABLE, EXIT_TRIALS_FAILED


def register(subparsers: Any) -> None:
    from robofollow_ros.policy.spec import spec_forms

    p = subparsers.add_parser(
        "compare", help="sequential A/B test of two policies on paired trials; stops as soon as it decides",
        description="Run paired trials (same task and seed for A and B, in random order) and stop as soon as an "
                    "anytime-valid test decides at --alpha, or at --budget pairs. A's and B's trials are written "
                    "to OUTPUT/A and OUTPUT/B (ordinary run directories), the test to OUTPUT/compare.json.",
    )
    p.add_argument("--policy-a", required=True, metavar="SPEC", help=f"policy A, one of: {spec_forms()}")
    p.add_argument("--policy-b", required=True, metavar="SPEC", help="policy B (differences are B - A)")
    p.add_argument("--kwargs-a", default="{}", help="JSON keyword arguments for policy A")
    p.add_argument("--kwargs-b", default="{}", help="JSON keyword arguments for policy B")
    p.add_argument("--scene", default="all", help="all, or a comma list of scene1..scene4 (default all)")
    p.add_argument("--levels", default="L0,L1,L2,L3", help="comma list of L0..L3 (default all)")
    p.add_argument("--limit", type=integer(1, MAX_LIMIT), metavar="K",
                   help="keep the first K selected tasks of each scene and level (--levels L0,L1 --limit 2: "
                        "2 L0 and 2 L1 tasks per scene; RoboFollow's own --limit counts per scene)")
    p.add_argument("--tasks", help="comma list of evaluation task ids")
    p.add_argument("--alpha", type=number(0.0, 0.5, low_open=True), default=0.05,
                   help="type-I error of the test, at any stopping time (default 0.05)")
    p.add_argument("--budget", type=integer(1, 1_000_000), metavar="PAIRS",
                   help="most pairs to run (default: the whole pool, tasks x 10 seeded rounds)")
    p.add_argument("--metric", choices=("completion", "is", "es"), default="completion",
                   help="completion: paired success (discordant pairs); is/es: paired partial credit (default "
                        "completion)")
    p.add_argument("--bet", choices=("mixture", "agrapa"), default="mixture",
                   help="betting strategy of the e-process: mixture of constant bets (default) or aGRAPA")
    p.add_argument("--seed", type=SEED, default=0, help="order of the pairs and of A/B within a pair (default 0)")
    p.add_argument("--max-steps", type=STEPS, default=10, help="policy calls per trial (default 10)")
    p.add_argument("--actions-per-step", type=integer(1, MAX_ACTIONS_PER_STEP), default=50,
                   help="rows executed per call (default 50)")
    render = p.add_mutually_exclusive_group()
    render.add_argument("--render", dest="render", action="store_true", help="render the three cameras (default)")
    render.add_argument("--no-render", dest="render", action="store_false", help="physics only, no images")
    p.set_defaults(render=True)
    p.add_argument("--backend", choices=("local", "inline"), default="local",
                   help="local: one supervised worker process per policy (default); inline: both in this process")
    p.add_argument("--policy-timeout", type=seconds(), default=300.0, metavar="S",
                   help="bound of every policy call (default 300)")
    p.add_argument("--privileged", action="store_true",
                   help="hand both policies the privileged state (not comparable with published results)")
    p.add_argument("--output", required=True, type=Path, help="new or empty directory (A/, B/, compare.json)")
    p.add_argument("--json", action="store_true", help="print compare.json's decision as JSON at the end")
    p.set_defaults(func=_compare)


def _kwargs(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{flag}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CliError(f"{flag}: expected a JSON object, got {text!r}")
    return value


def build_compare_config(args: argparse.Namespace) -> Any:
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.runner import EvalConfig
    from robofollow_ros.evaluation.selection import parse_levels, parse_scenes, parse_task_list
    from robofollow_ros.evaluation.sequential_run import CompareConfig

    try:
        base = EvalConfig(
            policy=args.policy_a, output=args.output, scenes=tuple(parse_scenes(args.scene)),
            levels=tuple(parse_levels(args.levels)), limit=args.limit,
            tasks=parse_task_list(args.tasks),
            settings=EpisodeSettings(args.max_steps, args.actions_per_step), render=args.render,
            backend=args.backend, policy_timeout_s=args.policy_timeout, privileged=args.privileged)
        config = CompareConfig(base=base, policy_a=args.policy_a, policy_b=args.policy_b,
                               kwargs_a=_kwargs(args.kwargs_a, "--kwargs-a"),
                               kwargs_b=_kwargs(args.kwargs_b, "--kwargs-b"), output=args.output,
                               alpha=args.alpha, budget=args.budget, metric=args.metric, seed=args.seed,
                               bet=args.bet)
        config.side("B")  # B's SPEC and --privileged checked now, before anything starts
        return config
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _compare(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError
    from robofollow_ros.cli.eval import START_EXIT, reach
    from robofollow_ros.evaluation.sequential_run import run_compare, saving_line
    from robofollow_ros.evaluation.worker_errors import WorkerStartError
    from robofollow_ros.policy.spec import PolicySpecError
    from robofollow_ros.rundir import OutputUnusableError, RunDirError

    config = build_compare_config(args)
    for spec in (args.policy_a, args.policy_b):
        reach(config.base, spec)
    try:
        outcome = run_compare(config)
    except OutputUnusableError as exc:
        raise CliError(str(exc), EXIT_OUTPUT_UNUSABLE) from None
    except WorkerStartError as exc:
        raise CliError(str(exc), START_EXIT.get(exc.kind, EXIT_INTERNAL)) from None
    except (RunDirError, UnknownTaskError, PolicySpecError, ValueError) as exc:
        raise CliError(str(exc)) from None
    d = outcome.decision
    if d.verdict == "undecided":
        print(f"undecided after {d.pairs} pairs ({outcome.stop_reason}): e-value {d.e_value:.3f} < "
              f"{1 / args.alpha:g}; no difference shown at alpha {args.alpha}")
    else:
        better = args.policy_b if d.verdict == "B better" else args.policy_a
        print(f"decision: {d.verdict} ({better}) after {d.pairs} pairs, e-value {d.e_value:.3f} >= "
              f"{1 / args.alpha:g}; mean {args.metric} difference B - A {d.mean_diff:+.3f}")
    for line in completion_lines(args.output, (args.policy_a, args.policy_b)):
        print(line)
    print(saving_line(outcome, args.alpha))
    for trial, reason in outcome.failed_trials:
        print(f"failed trial {trial}: {reason}")
    if args.json:
        print(json.dumps({"verdict": d.verdict, "pairs": d.pairs, "e_value": d.e_value,
                          "stop_reason": outcome.stop_reason, "fixed_design_pairs": outcome.fixed_pairs}))
    return EXIT_TRIALS_FAILED if outcome.failed_trials else EXIT_OK


def completion_lines(output: Path, specs: tuple[str, str]) -> list[str]:
    """Each side's completion with n and its Wilson 95 % interval (the runs DIR/A, DIR/B as recorded); the full
    tables: ``robofollow report --compare-runs DIR/A DIR/B``."""
    from robofollow_ros.evaluation.intervals import wilson
    from robofollow_ros.rundir.atomic import read_json

    lines = []
    for side, spec in zip(("A", "B"), specs, strict=True):
        try:
            trials = [t for t in read_json(output / side / "results.json") if not t.get("control")]
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        n, k = len(trials), sum(1 for t in trials if t.get("completion_ok"))
        if n:
            ci = wilson(k, n)
            lines.append(f"{side} = {spec}: completed {k}/{n} = {100 * k / n:.1f} % [{100 * ci.lo:.1f}, "
                         f"{100 * ci.hi:.1f}] (Wilson 95 %)")
    if lines:
        lines.append(f"tables with n and intervals: robofollow report --compare-runs {output / 'A'} {output / 'B'}")
    return lines
