"""``robofollow owda generate|validate|eval|report|capture|execute``: the One Word, Different Action benchmark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, print_json

#: `owda validate` exit status for a readable suite with an invalid task (2 stays "cannot read the input")
EXIT_INVALID_TASK = 1


def register(subparsers: Any) -> None:
    owda = subparsers.add_parser("owda", help="One Word, Different Action: decision anchors, tasks, evaluation")
    sub = owda.add_subparsers(dest="owda_command", metavar="ACTION", required=True)

    gen = sub.add_parser("generate",
                         help="build the default suite (85 anchors, 988 atomic + 102 compositional families)")
    gen.add_argument("--seed", type=int, default=0, help="suite seed (default 0); the same seed gives the same suite")
    gen.add_argument("--out", type=Path, required=True, metavar="DIR")
    gen.add_argument("--json", action="store_true", help="print the counts as JSON")
    gen.set_defaults(func=_generate)

    val = sub.add_parser("validate", help="check every task of a suite; exits 1 on the first invalid one")
    val.add_argument("suite", type=Path, metavar="DIR")
    val.add_argument("--json", action="store_true")
    val.set_defaults(func=_validate)

    ev = sub.add_parser("eval", help="run a decision model over a suite")
    ev.add_argument("--suite", type=Path, required=True, metavar="DIR")
    ev.add_argument("--model", required=True, metavar="SPEC",
                    help="reference | ignore:N|E|Q|T | openai:URL?model=NAME (OpenAI-compatible chat endpoint)")
    ev.add_argument("--output", type=Path, required=True, metavar="DIR")
    ev.add_argument("--timeout", type=float, default=120.0, help="seconds per model request (default 120)")
    ev.add_argument("--bootstrap-seed", type=int, default=0)
    ev.add_argument("--json", action="store_true", help="print metrics.json")
    ev.set_defaults(func=_eval)

    rep = sub.add_parser("report", help="print the metrics of an evaluation output directory")
    rep.add_argument("output", type=Path, metavar="DIR")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=_report)

    cap = sub.add_parser("capture", help="write an anchor from a physical state (sim ground truth or perception)")
    cap.add_argument("--scene", required=True)
    cap.add_argument("--layout", required=True, help="layout key, e.g. default or scene2.3")
    cap.add_argument("--seed", type=int, default=0, help="layout jitter seed")
    cap.add_argument("--kind", choices=("object_centric", "action_sequence"), default="object_centric")
    cap.add_argument("--source", choices=("sim", "perception"), default="sim",
                     help="sim: SAPIEN ground truth; perception: the perception pipeline's grounded objects "
                          "from a rendered head-camera frame (RGB + depth)")
    cap.add_argument("--id", dest="anchor_id", help="anchor id (default: captured_<scene>_<layout>_<seed>)")
    cap.add_argument("--out", type=Path, required=True, metavar="FILE")
    cap.set_defaults(func=_capture)

    exe = sub.add_parser("execute", help="decide an instruction on an anchor and run the decision in SAPIEN")
    exe.add_argument("--anchor", required=True, metavar="ID")
    exe.add_argument("--instruction", required=True, metavar="TEXT")
    exe.add_argument("--suite", type=Path, metavar="DIR", help="suite holding the anchor (default: generate seed 0)")
    exe.add_argument("--sim", action="store_true", required=True, help="run in SAPIEN (the only mode for now)")
    exe.add_argument("--json", action="store_true")
    exe.set_defaults(func=_execute)


def _owda_error(exc: Exception) -> CliError:
    return CliError(str(exc))


def _load(suite_dir: Path) -> Any:
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.suite_io import load_suite

    try:
        return load_suite(suite_dir)
    except OwdaError as exc:
        raise _owda_error(exc) from None


def _generate(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.generator import generate_suite
    from robofollow_ros.decisions.suite_io import write_suite

    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out: {args.out} exists and is not a directory")
    from robofollow_ros.decisions.errors import OwdaError

    try:
        suite = generate_suite(args.seed)
    except OwdaError as exc:  # a seed whose anchors cannot support the sizes: say so, do not write half a suite
        raise CliError(f"--seed {args.seed}: {exc}", exit_code=1) from None
    write_suite(suite, args.out)
    counts = suite.counts()
    if args.json:
        print_json(counts)
    else:
        print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.validate import validate_suite

    suite = _load(args.suite)
    try:
        counts = validate_suite(suite)
    except OwdaError as exc:
        raise CliError(f"invalid: {exc}", exit_code=EXIT_INVALID_TASK) from None
    if args.json:
        print_json({"valid": True, **counts})
    else:
        print(f"valid: {counts['atomic_families']} atomic and {counts['compositional_families']} compositional "
              f"families on {counts['anchors']} anchors")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.chat_client import ChatError
    from robofollow_ros.decisions.deciders import load_decider
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.evaluate import format_report, run_evaluation

    if args.output.exists() and not args.output.is_dir():
        raise CliError(f"--output: {args.output} exists and is not a directory")
    suite = _load(args.suite)
    if args.timeout <= 0:
        raise CliError(f"--timeout: must be > 0, got {args.timeout}")
    try:
        decider = load_decider(args.model, timeout_s=args.timeout)
    except OwdaError as exc:
        raise _owda_error(exc) from None

    def progress(done: int, total: int) -> None:
        if done % 200 == 0 or done == total:
            print(f"  {done}/{total} instances", file=sys.stderr)

    try:
        result = run_evaluation(suite, decider, args.output, str(args.suite), progress, args.bootstrap_seed)
    except ChatError as exc:  # the endpoint failed mid-run: what was answered is kept for a resumed run
        raise CliError(str(exc), exit_code=1) from None
    except OwdaError as exc:
        raise _owda_error(exc) from None
    if args.json:
        print_json(result)
    else:
        print(format_report(result))
    return 0


def _report(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.evaluate import format_report, load_metrics

    try:
        data = load_metrics(args.output)
    except OwdaError as exc:
        raise _owda_error(exc) from None
    if args.json:
        print_json(data)
    else:
        print(format_report(data))
    return 0


def _capture(args: argparse.Namespace) -> int:
    import json

    from robofollow_ros.benchmark import UnknownTaskError, default_registry
    from robofollow_ros.decisions.capture import capture_from_perception, capture_from_sim
    from robofollow_ros.decisions.errors import OwdaError

    if args.seed < 0:
        raise CliError(f"--seed: must be >= 0, got {args.seed}")
    if args.out.is_dir():
        raise CliError(f"--out: {args.out} is a directory; give a file name such as anchor.json")
    reg = default_registry()
    if args.scene not in reg.layouts:
        raise CliError(f"--scene: unknown scene {args.scene!r}; expected one of {sorted(reg.layouts)}")
    try:
        layout = reg.layout(args.scene, args.layout)
    except UnknownTaskError as exc:
        raise CliError(f"--layout: {exc}") from None
    anchor_id = args.anchor_id or f"captured_{args.scene}_{args.layout}_{args.seed}"
    capture = capture_from_perception if args.source == "perception" else capture_from_sim
    try:
        anchor = capture(anchor_id, layout, args.seed, args.kind)
    except OwdaError as exc:  # e.g. perception did not find an object
        raise CliError(str(exc), exit_code=1) from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(anchor.to_dict(), indent=1) + "\n")
    print(f"wrote {args.out}: {anchor.kind} anchor {anchor.anchor_id} with {len(anchor.candidate_ids)} candidates")
    return 0


def _execute(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.execute import execute_in_sim

    if args.suite is not None:
        anchors = {a.anchor_id: a for a in _load(args.suite).anchors}
    else:
        from robofollow_ros.decisions.authoring import authored_anchors

        anchors = {a.anchor_id: a for a in authored_anchors(0)}
    if args.anchor not in anchors:
        raise CliError(f"--anchor: unknown anchor {args.anchor!r}; e.g. {', '.join(sorted(anchors)[:3])}")
    try:
        report = execute_in_sim(anchors[args.anchor], args.instruction)
    except OwdaError as exc:
        raise _owda_error(exc) from None
    if args.json:
        print_json(report)
    else:
        print(f"decision   {' '.join(report['decision'])}")
        for step in report["steps"]:
            print(f"  {step['action']:45} {'ok' if step['ok'] else 'FAILED'}  {step.get('detail', '')}")
        print(f"satisfied  {report['satisfied']}")
    return 0 if report["satisfied"] else 1
