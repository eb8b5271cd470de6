"""``robofollow perception eval``: perception in SAPIEN against the simulator's ground truth.

With ``--perturb SUITE`` the same frames are also perturbed the way real cameras differ from the
simulator (``perception/perturb_suite.py``) and every perturbation is scored on its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import STEPS, CliError, integer, output_file, print_json, writing

SCENES = ("all", "scene1", "scene2", "scene3", "scene4")


def register(subparsers: Any) -> None:
    perception = subparsers.add_parser("perception", help="object perception: evaluate it in simulation")
    sub = perception.add_subparsers(dest="perception_command", metavar="ACTION", required=True)
    ev = sub.add_parser("eval", help="render layouts in SAPIEN, run perception, compare with ground truth")
    ev.add_argument("--scene", default="all", help=f"one of {', '.join(SCENES)} (default all)")
    ev.add_argument("--rounds", type=integer(1, 10), default=1, metavar="N",
                    help="seeds per task, rounds 1..N (default 1)")
    ev.add_argument("--tasks-per-layout", type=integer(1, 1000), default=1, metavar="N",
                    help="evaluation tasks played per layout (default 1)")
    ev.add_argument("--policy", default="oracle", metavar="SPEC",
                    help="policy that plays each trial while perception watches (default oracle)")
    ev.add_argument("--static", action="store_true", help="no policy: only the settled layout is looked at")
    ev.add_argument("--oracle-agreement", action="store_true",
                    help="also score each trial from perception poses and compare with ground-truth scoring "
                         "(needs a policy; reported whenever one plays)")
    ev.add_argument("--trial-stride", type=integer(1, 1000), default=1, metavar="K",
                    help="every K-th trial only (a spread over the scenes in less time)")
    ev.add_argument("--max-trials", type=integer(1, 100_000), metavar="N", help="stop after N trials (a quick look)")
    ev.add_argument("--every", type=integer(1, 1000), default=2, metavar="K",
                    help="perceive after every K executed rows")
    ev.add_argument("--max-steps", type=STEPS, default=10, metavar="N", help="policy calls per trial (default 10)")
    ev.add_argument("--no-depth", action="store_true", help="table-plane mode: RGB only")
    ev.add_argument("--calibration", type=Path, metavar="DIR",
                    help="camera_info + extrinsics (+ colour.yaml) directory (default: the active rig's simulated "
                         "cameras, calibration/sim for the built-in rig)")
    ev.add_argument("--colour-model", type=Path, metavar="FILE",
                    help="colour model to use (default: <calibration>/colour.yaml, else the built-in one)")
    ev.add_argument("--perturb", metavar="SUITE",
                    help="score perception under a perturbation suite: standard | goals | pictures | clean, "
                         "or comma-separated item names (docs/perception.md)")
    ev.add_argument("--plot", type=Path, metavar="PNG", help="with --perturb: write the error/identity plot here")
    ev.add_argument("--markdown", type=Path, metavar="FILE", help="with --perturb: write the results table here")
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
    ev.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    if args.scene not in SCENES:
        raise CliError(f"--scene: expected one of {', '.join(SCENES)}, got {args.scene!r}")
    if args.static and args.oracle_agreement:
        raise CliError("--oracle-agreement: needs a policy to play the trials; drop --static")
    if args.perturb is None and (args.plot is not None or args.markdown is not None):
        raise CliError("--plot/--markdown: only with --perturb")
    if args.perturb is not None and (args.no_depth or args.oracle_agreement):
        raise CliError("--perturb: scores perception with depth; drop --no-depth and --oracle-agreement")
    if args.plot is not None:
        output_file(args.plot, "--plot")
    if args.markdown is not None:
        output_file(args.markdown, "--markdown", make_folder=True)
    policy = None if args.static else ("oracle" if args.oracle_agreement else args.policy)

    from robofollow_ros.perception.camera_model import CalibrationError, CameraModel
    from robofollow_ros.perception.colour_model import ColourModel
    from robofollow_ros.perception.perturb_suite import resolve_suite
    from robofollow_ros.perception.sim_eval import layouts_trials, run_perception_eval
    from robofollow_ros.perception.tracker import load_colour_model
    from robofollow_ros.policy.spec import PolicySpecError, load_policy
    from robofollow_ros.robot.calibration import rig_calibration_dir

    calibration = args.calibration or rig_calibration_dir()  # the cameras of the world it renders (ROBOFOLLOW_RIG)
    try:
        camera = CameraModel.from_calibration_dir(calibration, "head")
    except CalibrationError as exc:
        raise CliError(f"--calibration: {exc}") from None
    try:
        colour = ColourModel.load(args.colour_model) if args.colour_model else load_colour_model(calibration)[0]
    except CalibrationError as exc:
        raise CliError(f"--colour-model: {exc}") from None
    items = None
    if args.perturb is not None:
        try:
            items = resolve_suite(args.perturb)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    if policy is not None:
        try:
            load_policy(policy)
        except (PolicySpecError, ValueError) as exc:
            raise CliError(f"--policy: {exc}") from None
    trials = layouts_trials(None if args.scene == "all" else args.scene, args.rounds, args.tasks_per_layout)
    trials = trials[:: args.trial_stride]
    if args.max_trials is not None:
        trials = trials[: args.max_trials]

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if items is not None:
        return _perturbed(args, trials, camera, colour, items, policy, progress)
    report = run_perception_eval(trials, camera, policy=policy, every=args.every, max_steps=args.max_steps,
                                 use_depth=not args.no_depth, progress=None if args.json else progress,
                                 colour=colour)
    report["scene"] = args.scene
    report["rounds"] = args.rounds
    if args.json:
        print_json(report)
    else:
        for key, value in report.items():
            if key not in ("identity_errors", "disagreements"):
                print(f"{key}: {value}")
        for line in report.get("identity_errors", []):
            print(f"  identity error: {line}")
        for item in report.get("disagreements", []) or []:
            print(f"  disagreement: {item}")
    return 0


def _perturbed(args: argparse.Namespace, trials: list[Any], camera: Any, colour: Any, items: Any,
               policy: str | None, progress: Any) -> int:
    from robofollow_ros.perception.perturb_eval import run_perturbation_eval
    from robofollow_ros.perception.perturb_report import markdown_table, plot

    report = run_perturbation_eval(trials, camera, colour, items, policy=policy, every=args.every,
                                   max_steps=args.max_steps, progress=progress)
    report["scene"] = args.scene
    report["rounds"] = args.rounds
    table = markdown_table(report)
    if args.plot is not None:
        with writing(args.plot, "--plot"):
            plot(report, args.plot)
    if args.markdown is not None:
        with writing(args.markdown, "--markdown"):
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(table + "\n", encoding="utf-8")
    if args.json:
        print_json(report)
    else:
        print(table)
        missed = [i["name"] for i in report["items"] if i.get("goal_level") and not i.get("goals_met")]
        print(f"goal-level items: {sum(1 for i in report['items'] if i.get('goal_level'))}, "
              f"goals missed: {', '.join(missed) if missed else 'none'}")
    return 0
