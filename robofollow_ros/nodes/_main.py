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
            try:
                if make_executor is None:
                    rclpy.spin(node)
                else:
                    executor = make_executor()
                    executor.add_node(node)
                    executor.spin()
            finally:
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
