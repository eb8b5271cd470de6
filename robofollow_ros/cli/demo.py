"""``robofollow demo``: the main job — the mirage in one screen (oracle vs memorizer)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="oracle vs memorizer on a small built-in subset, tables and a plot")
    p.add_argument("--output", type=Path, help="new or empty directory (default results/demo-<time>)")
    p.add_argument("--per-group", type=int, default=2, help="tasks per scene and level (default 2)")
    p.add_argument("--workers", type=int, default=2, help="parallel worker processes (default 2)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.demo import run_demo, side_by_side
    from robofollow_ros.evaluation.results import RunDirError

    output = args.output or Path("results") / time.strftime("demo-%Y%m%d-%H%M%S")
    try:
        outcome = run_demo(output, default_registry(), per_group=args.per_group, workers=args.workers,
                           stream=sys.stderr)
    except (RunDirError, ValueError) as exc:
        raise CliError(str(exc)) from None
    print(side_by_side(outcome.tables))
    print(f"\nplot: {outcome.plot}\nruns: " + ", ".join(str(r.run_dir) for r in outcome.runs.values()))
    return 0
