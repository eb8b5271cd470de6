"""What the trial manager measures for the health checks (``rig.health`` judges), and the arms' halt.

It keeps the last ``/joint_states`` and when it arrived, each camera's frame arrival times (counted
from the serialized message, never decoded: three cameras at 30 Hz must not cost the trial manager a
core), and loads the camera calibration the way perception does. A halt is published on
``/robofollow/arm_bridge/halt`` (``std_msgs/String`` JSON ``{"halt", "reason"}``, latched): the arm
bridge holds both arms while it is true, exactly as for its e-stop, and after it is lifted executes
only commands received (and stamped) after the lift. A separate input from ``/robofollow/estop``: lifting
the trial manager's halt must never release a person's e-stop.
"""

from __future__ import annotations

import collections
import functools
import json
import time
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String

from robofollow_ros.contract import CAMERA_NAMES, TOPIC_JOINT_STATES, camera_image_topic
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_vector
from robofollow_ros.rig.health import HealthInputs

#: The trial manager's halt of the arms (the arm bridge reads it beside its e-stop).
TOPIC_BRIDGE_HALT = "/robofollow/arm_bridge/halt"


class HealthWatch:
    def __init__(self, node: Node, cameras: bool, camera_window_s: float, calibration_dir: str) -> None:
        self._node = node
        self.window_s = camera_window_s
        self.calibration_dir = calibration_dir
        self._joints: Any = None
        self._joints_at: float | None = None
        self._since = time.monotonic()
        self._frames: dict[str, collections.deque[float]] = {}
        # Only the newest state matters here: a deep queue (STATE_STREAM keeps 1000) read by a busy node would
        # hand the check a state seconds old, stamped fresh on arrival (a joint moved back would still read bent).
        node.create_subscription(JointState, TOPIC_JOINT_STATES, self._on_joints,
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
        if cameras:
            for camera in CAMERA_NAMES:
                self._frames[camera] = collections.deque(maxlen=1000)
                node.create_subscription(Image, camera_image_topic(camera),
                                         functools.partial(self._on_frame, camera),
                                         qos_profile_sensor_data, raw=True)
        self.halt_pub = node.create_publisher(String, TOPIC_BRIDGE_HALT, tp.LATCHED_STATE)

    def _on_frame(self, camera: str, _data: bytes) -> None:
        self._frames[camera].append(time.monotonic())

    def _on_joints(self, msg: JointState) -> None:
        try:
            self._joints = joint_vector(msg)
        except ValueError:
            return
        self._joints_at = time.monotonic()

    def camera_hz(self) -> dict[str, float | None]:
        """Frames per second over the last window (or since the watch began, if shorter); None: no frame."""
        now = time.monotonic()
        span = min(self.window_s, now - self._since)
        rates: dict[str, float | None] = {}
        for camera, arrivals in self._frames.items():
            recent = [t for t in list(arrivals) if now - t <= self.window_s]
            rates[camera] = None if not recent else (len(recent) / span if span > 0 else 0.0)
        return rates

    def settled(self) -> bool:
        """A rate needs a window: true once the watch has listened for one."""
        return time.monotonic() - self._since >= self.window_s

    def calibration_problem(self) -> str | None:
        from robofollow_ros.perception.camera_model import CameraModel

        directory = Path(self.calibration_dir)
        try:
            CameraModel.from_calibration_dir(directory, "head")
        except Exception as exc:  # any unreadable calibration is the operator's to fix, in one line
            return f"camera calibration in {directory}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        return None

    def inputs(self) -> HealthInputs:
        age = None if self._joints_at is None else time.monotonic() - self._joints_at
        return HealthInputs(self._joints, age, self.camera_hz(), self.calibration_problem)

    def halt(self, engaged: bool, reason: str = "") -> None:
        self.halt_pub.publish(String(data=json.dumps({"halt": engaged, "reason": reason})))
