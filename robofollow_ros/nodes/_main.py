"""The body of every node executable's ``main()``: run one node until Ctrl-C or a ROS shutdown."""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node


def run_node(make_node: Callable[[], Node], args: list[str] | None = None,
             make_executor: Callable[[], Executor] | None = None) -> None:
    """Init rclpy with ``args`` (``--ros-args`` included), spin the node, tear it down on any exit."""
    try:
        with rclpy.init(args=args):
            node = make_node()
            executor: Executor | None = None
            try:
                if make_executor is None:
                    rclpy.spin(node)
                else:
                    executor = make_executor()
                    executor.add_node(node)
                    executor.spin()
            finally:
                if executor is not None:
                    shutdown_executor(executor, timeout_sec=10.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


def shutdown_executor(executor: Executor, timeout_sec: float) -> None:
    """Shut a (multi-threaded) executor down after the callbacks it handed to its threads finished.

    rclpy's ``Executor.shutdown`` destroys its guard condition without waiting for in-flight
    callbacks (its wait is guarded by the flag it has just set), so a callback still running in the
    thread pool fails on that guard and rclpy prints "The following exception was never retrieved"
    at exit. Draining the pool first (``MultiThreadedExecutor`` keeps it in ``_executor``) avoids it.
    """
    pool = getattr(executor, "_executor", None)
    if pool is not None:
        pool.shutdown(wait=True)
    executor.shutdown(timeout_sec=timeout_sec)
