"""A node executable, run through ``nodes._main.run_node`` as every node is, whose teardown holds the interpreter
lock for many seconds: what a DDS participant torn down inside a C call that keeps the lock can do. It prints
``spinning`` once it spins (test_orphans)."""

from __future__ import annotations

import re

from rclpy.node import Node

from robofollow_ros.nodes._main import run_node

#: A pattern that backtracks for seconds inside the regex engine, which never lets go of the lock.
BACKTRACKING = (re.compile(r"(a+)+$"), "a" * 30 + "b")


class GilTeardownNode(Node):
    def __init__(self) -> None:
        super().__init__("gil_teardown_node")
        self._said = False
        self.create_timer(0.05, self._say)

    def _say(self) -> None:
        if not self._said:
            self._said = True
            print("spinning", flush=True)

    def destroy_node(self) -> None:
        pattern, text = BACKTRACKING
        pattern.match(text)
        super().destroy_node()


if __name__ == "__main__":
    run_node(GilTeardownNode)
