"""The ``robofollow`` command.

Each module in this package (not starting with ``_``) contributes subcommands through a
``register(subparsers)`` function, so a new feature adds one file and touches no shared list.
Modules keep heavy imports (SAPIEN, torch, rclpy) inside their handlers: ``robofollow tasks``
must not pay for a physics engine.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from robofollow_ros import __version__
from robofollow_ros.child_process import follow_parent
from robofollow_ros.cli._common import CliError, Parser
from robofollow_ros.exit_status import EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="robofollow",
        description="Run the RoboFollow and OWDA benchmarks on a dual-arm rig or in SAPIEN.",
    )
    parser.add_argument("--version", action="version", version=f"robofollow_ros {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    follow_parent()  # started by a supervisor (demo runs serve and bringup): end with it, even on SIGKILL
    try:
        # Inside the try: Ctrl-C while the subcommands import (the first second of every command) is
        # an interrupt like any other, not a traceback from deep inside an import.
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # a bad argument (one line printed, status 2), --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"robofollow {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
