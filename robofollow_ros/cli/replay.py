"""``robofollow replay FILE.mcap [--json]``: re-score a trial recording through the StageMonitor."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import MAX_SECONDS, CliError, number, output_file, print_json, writing


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="re-score an MCAP trial recording (also one cut short by a crash)",
        description="Feed the recorded scorer frames (/robofollow/frame) to a fresh StageMonitor and print "
                    "the result; says whether it matches the result the live trial recorded.")
    p.add_argument("file", metavar="FILE", type=Path, help="a trial recording, e.g. RUN/mcap/<trial>.mcap")
    p.add_argument("--json", action="store_true", help="print the replay (with the results.json entry) as JSON")
    p.add_argument("--picture", type=Path, metavar="PNG",
                   help="also draw the three cameras and the scene from above (what the Foxglove layout shows)")
    p.add_argument("--at", type=number(0, MAX_SECONDS, unit="seconds"), metavar="S",
                   help="with --picture: seconds after the recording's start, at most its length "
                   "(default: its end)")
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    from robofollow_ros.monitoring.replay import RecordingError, comparable, read_recording, rescore

    if args.at is not None and args.picture is None:
        raise CliError(f"--at: needs --picture, got --at {args.at:g} alone")
    if args.picture is not None:
        if args.picture.suffix != ".png":
            raise CliError(f"--picture: {args.picture} must end in .png")
        output_file(args.picture, "--picture")
    try:
        rec = read_recording(args.file)
        result = rescore(rec)
    except RecordingError as exc:
        raise CliError(f"FILE: {exc}") from None
    if args.picture is not None:
        _picture(args, rec.trial or args.file.stem)
    matches = None
    if rec.live_result is not None:
        live = rec.live_result
        if "policy_error" in live:  # a failed trial zeroes the totals; the scorer's own part is kept aside
            matches = all(result.get(k) == v for k, v in live.get("partial_result", {}).items())
        else:
            matches = comparable(result) == comparable(live)
    report = {"file": str(args.file), "trial": rec.trial, "task": rec.task, "frames": len(rec.frames),
              "truncated": rec.truncated, "matches_live": matches, "result": result}
    if args.json:
        print_json(report)
        return 0
    print(f"{rec.trial or args.file.name}: {rec.task}")
    print(f"  intent {result['intent_score']:.2f}  exec {result['exec_score']:.2f}  "
          f"complete {'yes' if result['completion_ok'] else 'no'}  ({len(rec.frames)} frames)")
    for phase in result["phases"]:
        print(f"  {phase['phase']:<22} intent {phase['intent_score']:.2f}  exec {phase['exec_score']:.2f}  "
              f"{phase['exec_reason']}")
    if rec.truncated:
        print(f"  recording truncated ({rec.truncated}): re-scored the {len(rec.frames)} frames before the cut")
    if matches is not None:
        print(f"  live result recorded: {'matches' if matches else 'DIFFERS from'} the replay")
    return 0


def _picture(args: argparse.Namespace, title: str) -> None:
    from robofollow_ros.monitoring.picture import PastTheEndError, read_moment, render

    try:
        moment = read_moment(args.file, args.at)
    except PastTheEndError as exc:
        raise CliError(f"--at: {exc}; give at most {exc.length_s:.3f}, or leave --at out for the end") from None
    except Exception as exc:  # a truncated file has no summary to seek in
        raise CliError(f"FILE: {args.file}: cannot draw it ({type(exc).__name__}: {exc})") from None
    with writing(args.picture, "--picture"):
        render(moment, args.picture, title=title)
