"""``robofollow collect``: oracle demonstrations in SAPIEN, written as a LeRobot v3.0 dataset."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import WORKERS, CliError, add_rig_option, image_size, integer
from robofollow_ros.exit_status import EXIT_OUTPUT_UNUSABLE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "collect", help="record oracle demonstrations in SAPIEN as a LeRobot v3.0 dataset",
        description="The oracle performs the selected tasks with the three cameras rendered; each episode is "
                    "recorded at a fixed control rate (state and action: the 14-joint vector; the instruction "
                    "as the task). Demonstrations the oracle does not complete are counted, not written.",
    )
    p.add_argument("--output", required=True, type=Path, help="new or empty dataset directory")
    p.add_argument("--split", choices=("train", "eval"), default="train",
                   help="training tasks (instruction variants in turn) or evaluation tasks (default train)")
    p.add_argument("--tasks", help="comma list of task ids of that split (default: all)")
    p.add_argument("--episodes-per-task", type=integer(1, 100_000), default=1,
                   help="episodes per task, each a fresh seed")
    p.add_argument("--fps", type=integer(1, 100), default=10,
                   help="control and recording rate: 5, 10, 25 or 50 (default 10)")
    p.add_argument("--image-size", type=image_size, default="320x240",
                   help="camera size WIDTHxHEIGHT (default 320x240)")
    p.add_argument("--vcodec", choices=("libsvtav1", "h264"), default="libsvtav1",
                   help="video codec (default libsvtav1, as LeRobot records)")
    p.add_argument("--workers", type=WORKERS, default=1, help="parallel worker processes (default 1)")
    add_rig_option(p)
    p.add_argument("--resume", action="store_true", help="continue a killed collection in --output")
    p.set_defaults(func=_collect)


def _collect(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import UnknownTaskError
    from robofollow_ros.datasets.collect import CollectConfig, CollectError, run_collection
    from robofollow_ros.datasets.demo import FPS_CHOICES
    from robofollow_ros.datasets.video import VideoSettings
    from robofollow_ros.rundir import OutputUnusableError

    width, height = args.image_size
    if args.fps not in FPS_CHOICES:
        raise CliError(f"--fps: {args.fps} is not one of {', '.join(map(str, FPS_CHOICES))}")
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip()) if args.tasks else ()
    try:
        config = CollectConfig(output=args.output, split=args.split, tasks=tasks,
                               episodes_per_task=args.episodes_per_task, fps=args.fps, width=width, height=height,
                               workers=args.workers, resume=args.resume, video=VideoSettings(args.vcodec))
        from robofollow_ros.datasets.collect import plan

        plan(config)  # unknown task ids fail here, before any worker starts
        summary = run_collection(config, stream=sys.stderr)
    except UnknownTaskError as exc:
        raise CliError(f"--tasks: {exc}") from None
    except OutputUnusableError as exc:  # locked by another collection, read-only, or full
        raise CliError(str(exc), EXIT_OUTPUT_UNUSABLE) from None
    except CollectError as exc:
        raise CliError(str(exc)) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"--output: {exc}", EXIT_OUTPUT_UNUSABLE) from None
    for line in summary.lines():
        print(line)
    return 0
