"""The ``robofollow`` command.

Each module in this package (not starting with ``_``) contributes subcommands through a
``register(subparsers)`` function, so a new feature adds one file and touches no shared list.
Modules keep heavy imports (SAPIEN, torch, rclpy) inside their handlers: ``robofollow tasks``
must not pay for a physics engine. A command that loads the rig takes ``--rig`` (``_common.add_rig_option``);
the rig is loaded and made the active one (``ROBOFOLLOW_RIG``) before its handler runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from robofollow_ros import __version__
from robofollow_ros.cli._common import CliError, Parser, apply_rig
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_INTERRUPTED


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


#: How soon an interrupt that came during an import is delivered again.
_IMPORT_RETRY_S = 0.05
#: main() is running: an interrupt deferred past its end is dropped (the command has ended anyway).
_running = threading.Event()


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _interrupt_outside_imports(signum: int, frame: FrameType | None) -> None:
    """Python's SIGINT handler (raise ``KeyboardInterrupt``), except during an import: there it is delivered
    again a moment later.

    Ctrl-C in the first second of a command lands in an import (the subcommands', a handler's rclpy or
    numpy), and an interrupt raised inside one does not always come out as ``KeyboardInterrupt``: numpy,
    interrupted while loading its C extension, raises ``ImportError: Importing the numpy C-extensions
    failed``, a page of traceback. Raised after the import, it is an interrupt like any other (``main``
    prints one line, status 130), or a command's own handler, set meanwhile, takes it (bringup: 128 + 2)."""
    if _importing(frame):
        again = threading.Timer(_IMPORT_RETRY_S, _deliver_again, (signum,))
        again.daemon = True
        again.start()
        return
    raise KeyboardInterrupt


def _deliver_again(signum: int) -> None:
    if _running.is_set():
        os.kill(os.getpid(), signum)


def main(argv: Sequence[str] | None = None) -> int:
    # Only where Python raises KeyboardInterrupt for Ctrl-C: not where it is ignored (a background job) or
    # handled by someone else, and not from another thread (a test calling main() in one), which cannot set it.
    main_thread = threading.current_thread() is threading.main_thread()
    ours = main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # SIGTERM (`kill PID`, a scheduler, the end of a session) stops a command as Ctrl-C does, where nothing else
    # handles it: one line, status 130, its worker processes stopped with it (they were left running, orphaned,
    # and printed tracebacks when they found their parent gone). A command with its own handler sets it later.
    term = main_thread and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if ours:
        signal.signal(signal.SIGINT, _interrupt_outside_imports)
    if term:
        signal.signal(signal.SIGTERM, _interrupt_outside_imports)
    if ours or term:
        _running.set()
    try:
        return _main(argv)
    finally:
        _running.clear()
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if term:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # a bad argument (one line printed, status 2), --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
        args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed: `eval` names the line resuming it
        if hasattr(args, "rig_spec"):  # a command taking --rig: its rig is checked and made active first
            args.rig_config = apply_rig(args)
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"robofollow {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
