"""``robofollow demo``: the main job.

1. The sim-in-the-loop dry run: the oracle served by ``robofollow serve`` in its own process, the ROS
   graph (``robofollow bringup sim``) running the built-in default trials against it over DDS, and
   the headless evaluator rerunning the same trials: the verdicts must be equal.
2. The mirage in one screen: the oracle beside the memorizer on a small subset, with a plot.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import PORT, WORKERS, CliError, add_rig_option, integer
from robofollow_ros.exit_status import EXIT_PORT_IN_USE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="sim-in-the-loop dry run over ROS, then oracle vs memorizer (the mirage)")
    p.add_argument("--output", type=Path, help="new or empty directory (default results/demo-<time>)")
    p.add_argument("--no-render", action="store_true", help="dry run without camera images")
    p.add_argument("--skip-ros", action="store_true", help="only the headless mirage part")
    p.add_argument("--foxglove-port", type=PORT, metavar="PORT",
                   help="dry run: port of the live Foxglove server on 127.0.0.1 (default 8765; 0 picks a free one)")
    p.add_argument("--per-group", type=integer(1, 1000), default=2,
                   help="mirage: tasks per scene and level (default 2)")
    p.add_argument("--workers", type=WORKERS, default=2, help="mirage: parallel worker processes (default 2)")
    add_rig_option(p)
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.dry_run import run_dry_run
    from robofollow_ros.evaluation.demo import run_demo, side_by_side
    from robofollow_ros.preflight import PortInUse, port_free
    from robofollow_ros.rundir import RunDirError

    output = args.output or Path("results") / time.strftime("demo-%Y%m%d-%H%M%S")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise CliError(f"--output: {output} exists and is not an empty directory")
    if args.foxglove_port is not None:
        if args.skip_ros:
            raise CliError(f"--foxglove-port {args.foxglove_port}: the live view is the dry run's; "
                           "leave out --skip-ros or --foxglove-port")
        try:  # as bringup checks it, but before the policy server starts and anything is written
            port_free("127.0.0.1", args.foxglove_port, what="the live Foxglove view", flag="--foxglove-port")
        except PortInUse as exc:
            raise CliError(str(exc), EXIT_PORT_IN_USE) from None
    registry = default_registry()
    verdicts_equal = True
    try:
        if not args.skip_ros:
            dry = run_dry_run(output / "dry_run", registry, render=not args.no_render, stream=sys.stderr,
                              foxglove_port=args.foxglove_port)
            print(dry.table)
            verdicts_equal = not dry.differences
            print(f"\nROS vs headless: {dry.compared - len(dry.differences)}/{dry.compared} trials with equal "
                  f"verdicts (IS, ES, complete)" + ("" if verdicts_equal else ":"))
            for line in dry.differences:
                print(f"  {line}")
            print(f"results: {dry.ros_dir} (recordings in {dry.ros_dir / 'mcap'}), reference: {dry.headless_dir}\n")
        mirage = run_demo(output / "mirage", registry, per_group=args.per_group, workers=args.workers,
                          stream=sys.stderr)
    except (RunDirError, ValueError, RuntimeError) as exc:
        raise CliError(str(exc), exit_code=1) from None
    print(side_by_side(mirage.stats))
    print(f"\nplot: {mirage.plot}")
    return 0 if verdicts_equal else 1
