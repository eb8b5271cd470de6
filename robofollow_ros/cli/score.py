"""``robofollow score FILE [--json]``: stage-wise score of one recorded trajectory file.

The file is user input of any size or shape, so it is read with a size cap (never more than the
cap plus one byte, even from ``/dev/zero``) and parsed with the bounded JSON reader (nesting
depth, number of containers, integer digits): a bad file is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, print_json
from robofollow_ros.jsonlimits import JsonLimitError, JsonLimits, loads_bounded

#: Largest trajectory file read: 64 MiB, about 100,000 frames of a six-object layout.
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
#: Bounds of the parsed document; ``NaN`` is read so that the frame reader can name its frame and field.
TRAJECTORY_LIMITS = JsonLimits(max_bytes=MAX_TRAJECTORY_BYTES, allow_nan=True)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("score", help="score a trajectory JSON file with RoboFollow's stage-wise rules")
    p.add_argument("file", metavar="FILE", help='trajectory JSON: {"task": ID, "frames": [...]} (docs/scoring.md)')
    p.add_argument("--json", action="store_true", help="print the full score as JSON")
    p.add_argument("--results-entry", action="store_true",
                   help="print the entry exactly as the official evaluator's run_once writes it (no frame count)")
    p.set_defaults(func=_score)


def _score(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError, default_registry
    from robofollow_ros.scoring import TrajectoryError, frames_from_json, score_trajectory, score_view

    path = Path(args.file)
    try:
        data = loads_bounded(read_capped(path, MAX_TRAJECTORY_BYTES), TRAJECTORY_LIMITS, what=f"FILE: {path}")
    except JsonLimitError as exc:
        raise CliError(str(exc)) from None
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
        print_json({k: v for k, v in result.items() if k != "frames"})
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


def read_capped(path: Path, cap: int) -> bytes:
    """The file's bytes, refusing anything over ``cap`` without reading more than ``cap + 1`` bytes."""
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > cap:
                raise CliError(f"FILE: {path} is {info.st_size:,} bytes, over the {cap:,}-byte limit for a trajectory")
            data = fh.read(cap + 1)
    except OSError as exc:
        raise CliError(f"FILE: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise CliError(f"FILE: {path} is over the {cap:,}-byte limit for a trajectory")
    return data
