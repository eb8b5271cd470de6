"""A node executable whose one callback stays busy for 60 s, run through ``nodes._main.run_node`` as every
node is: what a stop signal meets while sim_node builds a scene or takes its first picture. It says
``busy`` on /busy_node/state as the callback starts (test_node_stop)."""

from __future__ import annotations

import threading

from rclpy.node import Node
from std_msgs.msg import String

from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node

BUSY_S = 60.0


class BusyNode(Node):
    def __init__(self) -> None:
        super().__init__("busy_node")
        self.state = self.create_publisher(String, "/busy_node/state", tp.LATCHED_STATE)
        self.create_subscription(String, "/busy_node/go", self._go, tp.LATCHED)

    def _go(self, _msg: String) -> None:
        self.state.publish(String(data="busy"))
        threading.Event().wait(BUSY_S)  # a long call, as a reset is


if __name__ == "__main__":
    run_node(BusyNode)
