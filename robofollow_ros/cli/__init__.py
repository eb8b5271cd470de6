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
from robofollow_ros.cli._common import CliError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
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
