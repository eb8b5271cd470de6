"""mock_hardware_node: the rig's hardware without physics or a simulator (``use_mock_hardware``).

What ros2_control's mock hardware is to a controller, this is to the rig graph: it answers each
arm's driver commands (the topics and types of ``config/rig/arm_drivers.yaml``, or of a preset such as
``aloha_interbotix``: an xs_sdk's group and gripper commands, answered with its joint states, fingers
included) with driver joint states that follow the command with a first-order lag (over the wall time
that passed, however late the timer fires), publishes each camera's still picture of
the trial's layout (``rig.mock_view``) with its ``camera_info``, and reports the layout's objects
where the layout puts them (``rig.layout_poses``) on ``/robofollow/objects`` and TF, as perception
would. Wall-clock time, like the real rig. For a laptop without Vulkan, and for CI of the rig graph.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from robofollow_ros.contract import (
    ARM_SLICE,
    ARMS,
    CAMERA_NAMES,
    CAMERA_OPTICAL_FRAMES,
    GRIPPER_INDEX,
    TOPIC_OBJECTS,
    TOPIC_TF,
    TOPIC_TRIAL,
    WORLD_FRAME,
    camera_image_topic,
    camera_info_topic,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet, non_negative, positive
from robofollow_ros.nodes.conversions import (
    MessageError,
    camera_info_msg,
    image_msg,
    object_frame,
    object_markers_msg,
    transform_msg,
)
from robofollow_ros.nodes.driver_messages import command_channels, command_part, group_by_topic, state_message
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.rig.displacement import displacement_error, parse_displacement
from robofollow_ros.rig.driver_config import ArmDriver, load_driver_config, rig_driver_config


class MockHardwareNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("mock_hardware_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        driver_file = params.declare("driver_config", "", "the arm drivers to play: command and state topics, "
                                     "joint names, gripper units (empty: the rig's driver map)") or rig_driver_config()
        rig_file = params.declare("rig_config", "", "rig name or YAML (empty: $ROBOFOLLOW_RIG, else built-in)")
        state_hz = params.declare("state_hz", 100.0, "driver joint states per second", positive)
        self.time_constant_s = params.declare("time_constant_s", 0.05, "first-order lag of the joints behind the "
                                                                        "command, s", positive)
        camera_hz = params.declare("camera_hz", 5.0, "still pictures per second per camera", positive)
        self.width = params.declare("image_width", 320, "camera image width, px", positive)
        self.height = params.declare("image_height", 240, "camera image height, px", positive)
        objects_hz = params.declare("objects_hz", 10.0, "object reports per second (as perception would)", positive)
        params.declare("displace_object", "", "drills and tests: report one object off its place, JSON "
                       '{"object": NAME, "dx": M, "dy": M, "dyaw_deg": DEG} (empty: every object in place; '
                       "settable while running, like a person moving it)", displacement_error,
                       read_only=False)
        params.declare("stall_states_s", 0.0, "drills and tests: once, at the next driver command, publish no joint "
                       "states for this long, as a loaded machine's drivers would fall silent (0: never), s",
                       non_negative, read_only=False)
        self._params = params
        self._stall_until = 0.0

        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.cameras import camera_info_dict
        from robofollow_ros.robot.kinematics import RigKinematics
        from robofollow_ros.robot.rig_config import load_rig_config

        self.registry = default_registry()
        self.kinematics = RigKinematics(load_rig_config(rig_file) if rig_file else load_rig_config())
        self.drivers = load_driver_config(driver_file).arms
        rig = self.kinematics.rig
        self._infos = {c: camera_info_dict(c, self.width, self.height, rig.camera_fovy[c]) for c in CAMERA_NAMES}
        self._lock = threading.Lock()
        home = self.kinematics.home_vector()
        self._position = {arm: np.array([*home[ARM_SLICE[arm]], home[GRIPPER_INDEX[arm]]]) for arm in ARMS}
        self._target = {arm: p.copy() for arm, p in self._position.items()}
        self._period = 1.0 / state_hz
        self._last_tick = time.monotonic()
        self._trial_id: str | None = None
        self._poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pictures: dict[str, np.ndarray] = {}

        self.states = {topic: (drivers, self.create_publisher(JointState, topic, tp.STATE_STREAM))
                       for topic, drivers in group_by_topic(self.drivers.values(), "state_topic").items()}
        for driver in self.drivers.values():
            for topic, kind in command_channels(driver):
                self.create_subscription(kind, topic, functools.partial(self._on_command, driver), tp.STATE_STREAM)
        self.images = {c: self.create_publisher(Image, camera_image_topic(c), 5) for c in CAMERA_NAMES}
        self.infos = {c: self.create_publisher(CameraInfo, camera_info_topic(c), 5) for c in CAMERA_NAMES}
        self.objects = self.create_publisher(MarkerArray, TOPIC_OBJECTS, 10)
        self.tf = self.create_publisher(TFMessage, TOPIC_TF, 100)
        self.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)
        self.create_timer(self._period, self._on_state_tick)
        self.create_timer(1.0 / camera_hz, self._on_camera_tick)
        self.create_timer(1.0 / objects_hz, self._on_objects_tick)

    # -- drivers ---------------------------------------------------------------------------------
    def _on_command(self, driver: ArmDriver, msg: Any) -> None:
        try:
            joints, gripper = command_part(driver, msg)  # an xs_sdk's group or gripper command moves only those
        except MessageError as exc:
            self.get_logger().error(f"driver command rejected: {exc}", throttle_duration_sec=5.0)
            return
        with self._lock:
            if joints is not None:
                self._target[driver.arm][:6] = joints
            if gripper is not None:
                self._target[driver.arm][6] = gripper
        stall = float(self._params.get("stall_states_s"))
        if stall > 0:
            self._stall_until = time.monotonic() + stall
            self.set_parameters([Parameter("stall_states_s", value=0.0)])  # once
            self.get_logger().warning(f"drill: no joint states for {stall} s")

    def _on_state_tick(self) -> None:
        now = time.monotonic()
        if now < self._stall_until:
            return  # the drill: the drivers fall silent (stall_states_s)
        # The lag over the time that really passed: a loaded machine fires this timer late or skips ticks,
        # and a real arm does not slow down when the computer does (the nominal period made it crawl).
        elapsed, self._last_tick = now - self._last_tick, now
        blend = 1.0 - math.exp(-min(max(elapsed, 0.0), 1.0) / self.time_constant_s)
        with self._lock:
            for arm in ARMS:
                self._position[arm] = self._position[arm] + blend * (self._target[arm] - self._position[arm])
            positions = {arm: (p[:6].copy(), float(p[6])) for arm, p in self._position.items()}
        stamp = self.get_clock().now().to_msg()
        for drivers, publisher in self.states.values():
            publisher.publish(state_message(drivers, positions, stamp))

    # -- the table -------------------------------------------------------------------------------
    def _on_trial(self, msg: String) -> None:
        trial = tp.decode_or_log(msg.data, TOPIC_TRIAL, self.get_logger())
        if trial is None:
            return
        if trial.get("phase") != tp.PHASE_RESETTING or trial.get("id") == self._trial_id:
            return
        try:
            self._lay_out(self.registry.eval_task(str(trial.get("task"))), int(trial.get("seed", 0)))
        except (KeyError, ValueError, TypeError) as exc:
            self.get_logger().error(f"trial {trial.get('id')}: cannot lay the table out ({exc})")
            return
        self._trial_id = str(trial.get("id"))
        self._on_objects_tick()
        self._on_camera_tick()

    def _lay_out(self, task: Any, seed: int) -> None:
        from robofollow_ros.rig.layout_poses import layout_rest_poses
        from robofollow_ros.rig.mock_view import draw_layout_view

        layout = self.registry.layout_of(task)
        poses = layout_rest_poses(layout, seed)
        home = self.kinematics.home_vector()
        pictures = {}
        for camera in CAMERA_NAMES:
            pose = self.kinematics.link_pose(home, self.kinematics.rig.camera_links[camera])
            pictures[camera] = draw_layout_view(layout, poses, pose.rotation, pose.position, self.width,
                                                self.height, self.kinematics.rig.camera_fovy[camera])
        with self._lock:
            self._poses = {name: (p.position, p.quat_wxyz) for name, p in poses.items()}
            self._pictures = pictures
        self.get_logger().info(f"table laid out for {task.task_id} seed {seed} ({len(poses)} objects)")

    def _on_objects_tick(self) -> None:
        with self._lock:
            poses = dict(self._poses)
        if not poses:
            return
        poses = _displaced(poses, str(self._params.get("displace_object")))
        ns = self.get_clock().now().nanoseconds
        self.objects.publish(object_markers_msg(poses, ns))
        self.tf.publish(TFMessage(transforms=[transform_msg(WORLD_FRAME, object_frame(n), p, q, ns)
                                              for n, (p, q) in poses.items()]))

    def _on_camera_tick(self) -> None:
        with self._lock:
            pictures = dict(self._pictures)
        if not pictures:
            return
        ns = self.get_clock().now().nanoseconds
        for camera, rgb in pictures.items():
            self.images[camera].publish(image_msg(rgb, ns, CAMERA_OPTICAL_FRAMES[camera]))
            self.infos[camera].publish(camera_info_msg(self._infos[camera], ns))


def _displaced(poses: dict[str, tuple[np.ndarray, np.ndarray]], spec: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``poses`` with the object of ``spec`` (``displace_object``) moved and turned (an unknown name: none)."""
    move = parse_displacement(spec)
    if move is None or move.object not in poses:
        return poses
    return {**poses, move.object: move.apply(*poses[move.object])}


def main(args: list[str] | None = None) -> None:
    run_node(MockHardwareNode, args)


if __name__ == "__main__":
    main()
