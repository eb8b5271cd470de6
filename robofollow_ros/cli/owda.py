"""``robofollow owda generate|validate|eval|report|capture|execute``: the One Word, Different Action benchmark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli import _owda_capture
from robofollow_ros.cli._common import SEED, CliError, add_rig_option, integer, print_json, seconds, writing
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OUTPUT_UNUSABLE, EXIT_POLICY_UNREACHABLE, EXIT_TRIALS_FAILED

#: ``owda generate --anchors``: atomic families per anchor file.
DEFAULT_PER_ANCHOR = 8


def register(subparsers: Any) -> None:
    owda = subparsers.add_parser("owda", help="One Word, Different Action: decision anchors, tasks, evaluation")
    sub = owda.add_subparsers(dest="owda_command", metavar="ACTION", required=True)

    gen = sub.add_parser("generate",
                         help="build the default suite (85 anchors, 988 atomic + 102 compositional families)")
    gen.add_argument("--seed", type=SEED, default=0, help="suite seed (default 0); the same seed gives the same suite")
    gen.add_argument("--anchors", type=Path, nargs="+", metavar="FILE",
                     help="instead of the default suite: atomic families on these anchor files (owda capture)")
    gen.add_argument("--per-anchor", type=integer(1, 10_000),
                     help=f"with --anchors: families per anchor (default {DEFAULT_PER_ANCHOR})")
    gen.add_argument("--out", type=Path, required=True, metavar="DIR")
    gen.add_argument("--json", action="store_true", help="print the counts as JSON")
    gen.set_defaults(func=_generate)

    val = sub.add_parser("validate", help="check every task of a suite; exits 2 naming the first invalid one")
    val.add_argument("suite", type=Path, metavar="DIR")
    val.add_argument("--json", action="store_true")
    val.set_defaults(func=_validate)

    ev = sub.add_parser("eval", help="run a decision model over a suite")
    ev.add_argument("--suite", type=Path, required=True, metavar="DIR")
    ev.add_argument("--model", required=True, metavar="SPEC",
                    help="reference (the template grammar and the solver) | ignore:N|E|Q|T (the reference with "
                         "one operator dropped) | openai:URL?model=NAME (an OpenAI-compatible chat endpoint; "
                         "key from $OPENAI_API_KEY) | module:function (a Python factory returning an object with "
                         "decide(anchor, instruction), found in the current directory first, then on PYTHONPATH; "
                         "see docs/owda.md)")
    ev.add_argument("--model-kwargs", default="{}", metavar="JSON",
                    help="JSON keyword arguments for a module:function factory (default {}); recorded in run.json")
    ev.add_argument("--output", type=Path, required=True, metavar="DIR")
    ev.add_argument("--timeout", type=seconds(), default=120.0,
                    help="seconds per model request or decide() call (default 120)")
    ev.add_argument("--bootstrap-seed", type=SEED, default=0)
    ev.add_argument("--controls", metavar="LIST", help="RoboFollow's instruction controls where they apply: "
                    "swap (decision sensitivity), paraphrase (decision invariance), blank (the empty instruction, "
                    "one more call per anchor); default swap,paraphrase (docs/owda.md)")
    ev.add_argument("--json", action="store_true", help="print metrics.json")
    ev.set_defaults(func=_eval)

    st = sub.add_parser("stats", help="per operator and type: families, distinct sentences, rejected seeds and why")
    st.add_argument("suite", type=Path, metavar="DIR")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_stats)

    rep = sub.add_parser("report", help="print the metrics of an evaluation output directory")
    rep.add_argument("output", type=Path, metavar="DIR")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=_report)

    cap = sub.add_parser("capture", help="write an anchor from a physical state (sim, perception, or the "
                                          "perception node's /robofollow/objects)")
    _owda_capture.add_arguments(cap)
    cap.set_defaults(func=_owda_capture.run)

    exe = sub.add_parser("execute", help="decide an instruction on an anchor and run the decision in SAPIEN")
    exe.add_argument("--anchor", required=True, metavar="ID")
    exe.add_argument("--instruction", required=True, metavar="TEXT")
    exe.add_argument("--suite", type=Path, metavar="DIR", help="suite holding the anchor (default: generate seed 0)")
    exe.add_argument("--sim", action="store_true", required=True, help="run in SAPIEN (the only mode for now)")
    exe.add_argument("--anchor-file", type=Path, metavar="FILE", help="the anchor from a file (owda capture)")
    add_rig_option(exe)
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
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.generator import generate_on_anchors, generate_suite
    from robofollow_ros.decisions.suite_io import write_suite
    from robofollow_ros.evaluation.progress import StageProgress

    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out: {args.out} exists and is not a directory")
    if args.per_anchor is not None and not args.anchors:
        raise CliError(f"--per-anchor: {args.per_anchor} applies only with --anchors (the default suite sets its own)")
    per_anchor = DEFAULT_PER_ANCHOR if args.per_anchor is None else args.per_anchor
    anchors = [_anchor_file(p, "--anchors") for p in args.anchors] if args.anchors else []  # a bad file: one line
    progress = StageProgress("owda generate", sys.stderr)  # minutes for the default suite
    what = (f"{per_anchor} families on each of {len(anchors)} anchor{'s' if len(anchors) > 1 else ''}" if anchors
            else f"the default suite at seed {args.seed} (85 anchors, then their families; about 15 s on 2 cores)")
    print(f"==> generating {what}", file=sys.stderr, flush=True)
    try:
        if args.anchors:
            suite = generate_on_anchors(anchors, per_anchor, args.seed, progress)
        else:
            suite = generate_suite(args.seed, progress)
    except OwdaError as exc:  # a seed or anchor that cannot support the families: say so, write nothing
        progress.end()
        raise CliError(f"--{'anchors' if args.anchors else 'seed'}: {exc}") from None
    with writing(args.out, "--out"):
        write_suite(suite, args.out)
    counts = suite.counts()
    if args.json:
        print_json(counts)
    else:
        print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _anchor_file(path: Path, flag: str) -> Any:
    from robofollow_ros.decisions.anchors import Anchor
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.jsonlimits import JsonLimitError, loads_bounded

    if not path.is_file():
        raise CliError(f"{flag}: {path} is not a file")
    try:
        return Anchor.from_dict(loads_bounded(path.read_bytes()))
    except (JsonLimitError, ValueError, OwdaError, TypeError, AttributeError) as exc:
        raise CliError(f"{flag}: {path}: {exc}") from None


def _validate(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.validate import validate_suite
    from robofollow_ros.evaluation.progress import StageProgress

    suite = _load(args.suite)
    progress = StageProgress("owda validate", sys.stderr)  # half a minute for the default suite
    try:
        counts = validate_suite(suite, progress)
    except OwdaError as exc:
        progress.end()
        raise CliError(f"invalid: {exc}", exit_code=EXIT_BAD_INPUT) from None
    if args.json:
        print_json({"valid": True, **counts})
    else:
        print(f"valid: {counts['atomic_families']} atomic and {counts['compositional_families']} compositional "
              f"families on {counts['anchors']} anchors")
    return 0


def _model_kwargs(text: str) -> dict[str, Any]:
    import json

    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--model-kwargs: not valid JSON ({exc})") from None
    if not isinstance(kwargs, dict):
        raise CliError(f"--model-kwargs: expected a JSON object, got {text!r}")
    return kwargs


def _eval(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.chat_client import ChatError
    from robofollow_ros.decisions.deciders import load_decider
    from robofollow_ros.decisions.errors import ModelError, OwdaError
    from robofollow_ros.decisions.evaluate import format_report, run_evaluation
    from robofollow_ros.rundir import OutputUnusableError

    if args.output.exists() and not args.output.is_dir():
        raise CliError(f"--output: {args.output} exists and is not a directory")
    from robofollow_ros.decisions.controls import parse_owda_controls

    kwargs = _model_kwargs(args.model_kwargs)
    try:
        controls = parse_owda_controls(args.controls)
    except OwdaError as exc:
        raise _owda_error(exc) from None
    suite = _load(args.suite)
    try:  # before the output exists: a bad SPEC or a failing factory leaves nothing behind
        decider = load_decider(args.model, timeout_s=args.timeout, kwargs=kwargs)
    except OwdaError as exc:
        raise _owda_error(exc) from None

    import time

    started = time.monotonic()
    answered = [0]  # answers received by this invocation (a resumed run starts from what is on disk)

    def counted(done: int, total: int) -> None:
        answered[0] += 1
        if answered[0] % 200 == 0 or done == total:
            rate = answered[0] / max(time.monotonic() - started, 1e-9)
            print(f"  {done}/{total} instances, {rate:.1f}/s, ETA {(total - done) / rate:.0f} s", file=sys.stderr)

    try:
        result = run_evaluation(suite, decider, args.output, str(args.suite), counted, args.bootstrap_seed,
                                record=getattr(decider, "record", None), controls=controls)
    except ModelError as exc:  # no answer (endpoint down, decide() raised or timed out): the answers so far are kept
        unreachable = isinstance(exc, ChatError) and answered[0] == 0
        raise CliError(str(exc), exit_code=EXIT_POLICY_UNREACHABLE if unreachable else EXIT_TRIALS_FAILED) from None
    except OwdaError as exc:
        raise _owda_error(exc) from None
    except OutputUnusableError as exc:  # another owda eval writes it, read-only, or full: answers so far are kept
        raise CliError(str(exc), exit_code=EXIT_OUTPUT_UNUSABLE) from None
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


def _stats(args: argparse.Namespace) -> int:
    from robofollow_ros.decisions.suite_stats import markdown_table, suite_table

    rows = suite_table(_load(args.suite))
    if args.json:
        print_json(rows)
    else:
        print(markdown_table(rows))
    return 0


def _known_anchor(anchor_id: str, known: list[str]) -> None:
    if anchor_id not in known:
        raise CliError(f"--anchor: unknown anchor {anchor_id!r}; e.g. {', '.join(sorted(known)[:3])}")


def _execute(args: argparse.Namespace) -> int:
    import time

    from robofollow_ros.decisions.errors import OwdaError
    from robofollow_ros.decisions.execute import execute_in_sim
    from robofollow_ros.evaluation.progress import Heartbeat, waited

    if args.anchor_file is not None:
        anchors = {a.anchor_id: a for a in [_anchor_file(args.anchor_file, "--anchor-file")]}
    elif args.suite is not None:
        anchors = {a.anchor_id: a for a in _load(args.suite).anchors}
    else:
        from robofollow_ros.decisions.authoring import authored_anchor_ids, authored_anchors

        # the id first (milliseconds), then the anchors up to it only: the suite's 85 take about 20 s
        _known_anchor(args.anchor, authored_anchor_ids(0))
        since = time.monotonic()
        with Heartbeat(lambda: f"… building the default suite's anchors up to {args.anchor} (all 85 take about "
                               f"20 s), {waited(since)}", sys.stderr):
            anchors = {a.anchor_id: a for a in authored_anchors(0, until=args.anchor)}
    _known_anchor(args.anchor, list(anchors))
    since = time.monotonic()
    try:
        with Heartbeat(lambda: f"… deciding and running the decision in SAPIEN, {waited(since)}", sys.stderr):
            report = execute_in_sim(anchors[args.anchor], args.instruction)
    except OwdaError as exc:
        raise _owda_error(exc) from None
    if args.json:
        print_json(report)
    else:
        print(f"decision   {' '.join(report['decision'])}")
        print(f"  initial state: {report['initial_state']}")
        for step in report["steps"]:
            print(f"  {step['action']:45} {'ok' if step['ok'] else 'FAILED'}  {step.get('detail', '')}")
            if step["state"] != "matches the world model":
                print(f"  {'':45} state: {step['state']}")
        print(f"satisfied  {report['satisfied']}")
    return 0 if report["satisfied"] else EXIT_TRIALS_FAILED
