"""``robofollow record FILE.mcap``: record the live ROS graph into one ROS 2 bag, without a trial manager.

For teleoperated sessions and anything else that is not a benchmark trial: the same topics, types
and format as the per-trial recordings (``docs/foxglove.md``), from start until Ctrl-C / SIGTERM or
``--duration``; optionally served live in Foxglove at the same time (``--serve``). Either way the file is
closed whole; the exit status is 0, except when a signal cut a ``--duration`` short (128 + the signal).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import PORT, CliError, number, seconds
from robofollow_ros.exit_status import EXIT_OK, EXIT_OUTPUT_UNUSABLE, EXIT_PORT_IN_USE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "record", help="record the live ROS graph into one ROS 2 bag (MCAP), e.g. a teleoperated session",
        description="Subscribe to the graph's topics (robot description, TF, joint states and commands, cameras, "
                    "objects, trial and score if any, /rosout) and write them as a rosbag2-compatible MCAP until "
                    "Ctrl-C, SIGTERM or --duration.")
    p.add_argument("output", metavar="FILE", type=Path, help="the recording to write, e.g. runs/teleop.mcap")
    p.add_argument("--duration", type=seconds(), metavar="S", help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("--serve", action="store_true", help="also serve the graph live in Foxglove")
    p.add_argument("--port", type=PORT, default=8765, metavar="PORT", help="Foxglove port with --serve (0: a free one)")
    p.add_argument("--camera-max-hz", type=number(0, 1000, low_open=True, unit="Hz"), default=15.0, metavar="HZ",
                   help="JPEG rate cap per camera")
    p.set_defaults(func=_record)


def _check(args: argparse.Namespace) -> None:
    if args.output.suffix != ".mcap":
        raise CliError(f"FILE: {args.output} must end in .mcap")
    if args.output.exists() and not args.overwrite:
        raise CliError(f"FILE: {args.output} exists (pass --overwrite to replace it)")
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
    except (NotADirectoryError, FileExistsError):  # a file where a folder of FILE should be: the path is wrong
        raise CliError(f"FILE: {args.output.parent} cannot be a folder: a part of that path is a file") from None
    except OSError as exc:
        raise CliError(f"FILE: cannot create {args.output.parent} ({exc.strerror})", EXIT_OUTPUT_UNUSABLE) from None


def _record(args: argparse.Namespace) -> int:
    _check(args)
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    from robofollow_ros.nodes._main import shutdown_executor
    from robofollow_ros.nodes.foxglove_node import FoxgloveNode

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    context = Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    unwritable: OSError | None = None
    # One callback at a time, as the node spins under bringup (nodes._main.run_node): rclpy's multi-threaded
    # executor busy-waits on a busy callback group and can drain a burst at a few messages a second (ros_harness).
    executor = SingleThreadedExecutor(context=context)
    try:
        try:
            node = FoxgloveNode(context=context, parameter_overrides=[
                Parameter("session_file", value=str(args.output)), Parameter("serve", value=bool(args.serve)),
                Parameter("port", value=args.port), Parameter("camera_max_hz", value=float(args.camera_max_hz))])
        except RuntimeError as exc:  # the SDK's "address in use"
            raise CliError(f"--port: cannot serve on {args.port} ({exc})", EXIT_PORT_IN_USE) from None
        executor.add_node(node)
        where = f"; live at ws://127.0.0.1:{node.server.port}" if node.server is not None else ""
        print(f"recording the graph into {args.output}{where}; Ctrl-C to stop", flush=True)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            executor.spin_once(timeout_sec=0.1)
    finally:
        if node is not None:
            executor.remove_node(node)
        # Drain the thread pool before shutting the executor down: rclpy's own shutdown destroys its guard
        # condition under callbacks still running, which printed "The following exception was never
        # retrieved: cannot use Destroyable because destruction was requested" after every recording.
        shutdown_executor(executor, timeout_sec=10.0)
        if node is not None:
            try:
                node.destroy_node()  # closes the file: summary, footer and the rosbag2 record
            except OSError as exc:  # a write failed (full, read-only): monitoring.bagfile names the OS error
                unwritable = exc
        rclpy.shutdown(context=context)
        for s, handler in previous.items():  # only now: a second Ctrl-C must not cut the file's closing short
            signal.signal(s, handler)
    if unwritable is not None:
        raise CliError(f"FILE: cannot write {args.output} ({unwritable.strerror or unwritable}); the recording "
                       "ends where the write failed", EXIT_OUTPUT_UNUSABLE)
    if received and args.duration is not None:  # cut short: the recording is shorter than asked for
        print(f"stopped by signal {received[0]} before --duration {args.duration:g} s elapsed; wrote {args.output}",
              flush=True)
        return 128 + received[0]
    print(f"wrote {args.output}", flush=True)
    return EXIT_OK
