"""``robofollow score FILE [--json]``: stage-wise score of one recorded trajectory file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, print_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("score", help="score a trajectory JSON file with RoboFollow's stage-wise rules")
    p.add_argument("file", metavar="FILE", help='trajectory JSON: {"task": ID, "frames": [...]} (docs/scoring.md)')
    p.add_argument("--json", action="store_true", help="print the full score as JSON")
    p.add_argument("--results-entry", action="store_true", help="print the results.json entry instead")
    p.set_defaults(func=_score)


def _score(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError, default_registry
    from robofollow_ros.scoring import TrajectoryError, frames_from_json, score_trajectory, score_view

    path = Path(args.file)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"FILE: cannot read {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"FILE: {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("task"), str):
        raise CliError('task: the file needs a "task" field naming an evaluation task id')
    if "frames" not in data:
        raise CliError('frames: the file needs a "frames" list')
    registry = default_registry()
    try:
        task = registry.eval_task(data["task"])
    except UnknownTaskError as exc:
        raise CliError(f"task: {exc}") from None
    try:
        frames = frames_from_json(task, data["frames"], registry)
    except TrajectoryError as exc:
        raise CliError(str(exc)) from None
    result = score_trajectory(task, frames, registry)
    if args.results_entry:
        print_json(result)
        return 0
    view = score_view(result)
    if args.json:
        print_json(view)
        return 0
    print(f"{view['task']}: intent {view['intent']:.2f}  exec {view['exec']:.2f}  "
          f"complete {'yes' if view['complete'] else 'no'}  ({result['frames']} frames)")
    for name, st in view["stages"].items():
        print(f"  {name:<22} intent {st['intent']:.2f}/{st['intent_max']:.2f}  {st['intent_reason']}")
        print(f"  {'':<22} exec   {st['exec']:.2f}/{st['exec_max']:.2f}  {st['exec_reason']}")
    return 0
