"""foxglove_node: the ROS graph, live in Foxglove (foxglove-sdk websocket) and recorded as ROS 2 bags.

A thin adapter over the monitoring core (``monitoring.session.LiveSession`` over
``monitoring.channels.TrialChannels``), which the headless evaluator uses too, so a ROS trial and a
headless trial record the same topics and types. Topics recorded as they are (joint states and
commands, TF, the robot description, camera_info, objects, the instruction, ``/rosout``) are taken
as serialized CDR (``raw=True``) and passed on untouched; camera images are JPEG-compressed; trial,
score and scorer-frame JSON drive the per-trial recordings and the derived panel topics.

``session_file`` (used by ``robofollow record``) records everything into one file from start to
stop instead of one file per trial: teleoperated sessions have no trial manager.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from foxglove.websocket import WebSocketServer
from rcl_interfaces.msg import Log as RosLog
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from robofollow_ros.contract import (
    CAMERA_NAMES,
    CAMERA_OPTICAL_FRAMES,
    SERVICE_TRIAL_NEXT,
    camera_image_topic,
    camera_info_topic,
)
from robofollow_ros.monitoring import cdr_peek, topics
from robofollow_ros.monitoring.access import is_loopback, offers_control
from robofollow_ros.monitoring.channels import MonitorSettings, TrialChannels
from robofollow_ros.monitoring.server import TRIAL_SERVICES, start_monitor_server
from robofollow_ros.monitoring.session import LiveSession
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import Bounds, ParameterSet, positive
from robofollow_ros.nodes.conversions import OBJECT_FRAME_PREFIX, stamp_ns
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.nodes.stage_monitor_node import marker_confidences

#: Streams: best effort matches reliable and best-effort publishers alike; deep, so bursts are kept.
STREAM_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
#: Latched topics (robot description, static TF, instruction): the last value also when we start late.
LATCHED_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
#: /rosout: reliable, matches rcl's transient-local publishers.
ROSOUT_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                        history=HistoryPolicy.KEEP_LAST)
#: Topics passed on as serialized CDR: topic -> (QoS of our subscription).
FORWARDED = {topics.JOINT_STATES: STREAM_QOS, topics.JOINT_COMMAND: STREAM_QOS, topics.INTERVENTION: STREAM_QOS,
             topics.TF: STREAM_QOS,
             topics.TF_STATIC: LATCHED_QOS, topics.ROBOT_DESCRIPTION: LATCHED_QOS, topics.INSTRUCTION: LATCHED_QOS,
             topics.OBJECTS: STREAM_QOS, topics.RESET_CHECK: LATCHED_QOS, topics.PERCEPTION_STATUS: STREAM_QOS}
_ROS_LOG_LEVELS = {10: "debug", 20: "info", 30: "warning", 40: "error", 50: "fatal"}


_port = Bounds(low=0, high=65535, integer=True, rule="must be in 0..65535 (0 picks a free port)")
_quality = Bounds(low=1, high=100, integer=True, rule="must be in 1..100")


def image_to_rgb(msg: Image) -> np.ndarray:
    """sensor_msgs/Image (rgb8 / bgr8) -> an (h, w, 3) RGB array, honouring ``step``."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"image encoding: expected rgb8 or bgr8, got {msg.encoding!r}")
    rows = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)
    rgb = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return rgb[:, :, ::-1] if msg.encoding == "bgr8" else rgb


class FoxgloveNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("foxglove_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        self._lock = threading.Lock()  # callbacks run on several executor threads; the session is not shared-safe
        self.server: WebSocketServer | None = None
        self._phase: object = None  # the trial manager's last phase (what a control answers once it has exited)
        params = ParameterSet(self)
        serve = params.declare("serve", True, "run the Foxglove websocket server (false: record only)")
        host = params.declare("host", "127.0.0.1", "websocket bind address (loopback unless watched from another host)")
        port = params.declare("port", 8765, "websocket port (0 picks a free one)", _port)
        remote_control = params.declare(
            "remote_control", False, "bound beyond loopback, offer the operator's services (trial controls, "
            "take_over/hand_back, which move an arm) with no authentication (--foxglove-control); false: read-only "
            "there. On loopback they are always offered")
        record = params.declare("record", True, "write every trial to <run_dir>/mcap/<trial>.mcap")
        output = params.declare("output_dir", "", "record into this directory instead of the trial's run_dir/mcap")
        session_file = params.declare("session_file", "", "record everything into this one file (no trials)")
        camera_hz = params.declare("camera_max_hz", 15.0, "per-camera rate cap of the JPEG streams, Hz", positive)
        quality = params.declare("jpeg_quality", 80, "JPEG quality of the camera streams, 1..100", _quality)
        self.service_timeout_s = params.declare("service_timeout_s", 10.0, "wait for the trial manager, s", positive)
        blind = params.declare("blind", False, "a blinded run (bringup --controls): the live view gets no instruction, "
                               "task id or stage name (monitoring.blind); the recordings keep them")

        self.channels = TrialChannels(MonitorSettings(camera_hz, quality))
        if blind:
            from robofollow_ros.monitoring.blind import blind_live

            self.channels.live_filter = blind_live
        self.session = LiveSession(self.channels, record=record, record_dir=Path(output) if output else None,
                                   session_file=Path(session_file) if session_file else None)
        self._trial_clients: dict[str, Any] = {name: self.create_client(Trigger, name) for name in TRIAL_SERVICES}
        if serve:
            self.server = start_monitor_server(self.channels, host, port,
                                               {name: self._control(name) for name in TRIAL_SERVICES},
                                               remote_control=remote_control)
            self.get_logger().info(f"Foxglove: connect to ws://{host}:{self.server.port} "
                                   f"(layout config/foxglove/robofollow_layout.json)")
            if not offers_control(host, remote_control):
                self.get_logger().warning(
                    f"Foxglove: {host} is beyond loopback: the live view is read-only (no trial or teleop "
                    "services); tunnel instead (ssh -L, docs/foxglove.md) or pass --foxglove-control")
            elif not is_loopback(host):
                self.get_logger().warning(
                    f"Foxglove: {host} is beyond loopback and --foxglove-control is set: anyone who reaches "
                    "this port can start trials and take over the arms (no authentication)")

        for topic, qos in FORWARDED.items():
            self.create_subscription(_ros_class(topic), topic, self._forward(topic), qos, raw=True)
        for camera in CAMERA_NAMES:
            self.create_subscription(Image, camera_image_topic(camera),
                                     functools.partial(self._on_image, camera), qos_profile_sensor_data)
            self.create_subscription(CameraInfo, camera_info_topic(camera),
                                     functools.partial(self._on_camera_info, camera), qos_profile_sensor_data,
                                     raw=True)
        self.create_subscription(String, topics.TRIAL, self._on_trial, tp.LATCHED)
        self.create_subscription(String, topics.SCORE, self._on_score, tp.LATCHED)
        self.create_subscription(String, topics.FRAME, self._on_frame, tp.FRAME_STREAM)
        self.create_subscription(RosLog, topics.ROSOUT, self._on_rosout, ROSOUT_QOS, raw=True)

    # -- Foxglove services -> trial manager ----------------------------------------------------------
    def _control(self, name: str) -> Any:
        def call() -> tuple[bool, str]:
            client = self._trial_clients[name]
            if not client.wait_for_service(timeout_sec=min(self.service_timeout_s, 2.0)):
                if self._phase == tp.PHASE_FINISHED:  # the trial manager exits when its run ends
                    nothing = "there is no next trial: " if name == SERVICE_TRIAL_NEXT else ""
                    return False, f"{name}: {nothing}the run has finished (the trial manager has exited)"
                return False, f"{name}: the trial manager's service is not available"
            done = threading.Event()
            future = client.call_async(Trigger.Request())
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(self.service_timeout_s):
                return False, f"{name}: no answer within {self.service_timeout_s} s"
            res = future.result()
            if res is None:
                return False, f"{name}: the call failed ({future.exception()})"
            with self._lock:
                self.channels.log_line("info" if res.success else "warning", f"{name}: {res.message}")
            return bool(res.success), str(res.message)
        return call

    # -- topic callbacks ---------------------------------------------------------------------------------
    def _forward(self, topic: str) -> Callable[[bytes], None]:
        type_name = topics.TOPICS[topic].type_name

        def forward(data: bytes) -> None:
            stamp = _state_stamp(topic, data)
            with self._lock:
                if topic == topics.INSTRUCTION:
                    self.session.on_instruction(data)
                elif stamp is None:
                    self.channels.publish(topic, type_name, data)
                else:  # per-state streams lag behind the trial's messages: the recording waits for them
                    self.session.on_state(*stamp, lambda: self.channels.publish(topic, type_name, data))
                if topic == topics.PERCEPTION_STATUS:
                    report = tp.decode_or_log(deserialize_message(data, String).data, topic, self.get_logger())
                    if report is not None:
                        self.session.on_perception(report)
                if topic == topics.OBJECTS and self.channels.wants(topics.SCENE):
                    markers = deserialize_message(data, MarkerArray)
                    self.session.on_objects(_object_poses(markers), marker_confidences(markers))
        return forward

    def _on_image(self, camera: str, msg: Image) -> None:
        try:
            rgb = image_to_rgb(msg)
        except ValueError as exc:
            self.get_logger().warning(f"{camera_image_topic(camera)}: {exc}", throttle_duration_sec=5.0)
            return
        stamp, frame_id = stamp_ns(msg.header.stamp), msg.header.frame_id or CAMERA_OPTICAL_FRAMES[camera]
        with self._lock:  # the next trial's first pictures may come while the last recording waits for its tail
            self.session.on_stamped(stamp, lambda: self.channels.log_image(camera, rgb, stamp_ns=stamp,
                                                                           frame_id=frame_id))

    def _on_camera_info(self, camera: str, data: bytes) -> None:
        live = self.channels.calibration[camera].has_sinks()
        info = deserialize_message(data, CameraInfo) if live else None
        stamp = cdr_peek.header_stamp(data)
        with self._lock:
            self.session.on_stamped(stamp, lambda: self.channels.log_camera_info(camera, data, info))

    def _json(self, msg: String, what: str) -> dict[str, Any] | None:
        try:
            return tp.decode(msg.data, what)
        except ValueError as exc:
            self.get_logger().warning(str(exc), throttle_duration_sec=5.0)
            return None

    def _on_trial(self, msg: String) -> None:
        state = self._json(msg, topics.TRIAL)
        if state is not None:
            self._phase = state.get("phase")
            with self._lock:
                self.session.on_trial(state)

    def _on_score(self, msg: String) -> None:
        live = self._json(msg, topics.SCORE)
        if live is not None:
            with self._lock:
                self.session.on_score(live)

    def _on_frame(self, msg: String) -> None:
        frame = self._json(msg, topics.FRAME)
        if frame is not None:
            with self._lock:
                self.session.on_frame(frame)

    def _on_rosout(self, data: bytes) -> None:
        if deserialize_message(data, RosLog).name == self.get_name():
            return  # our own lines are already on the log channel
        with self._lock:
            self.channels.publish(topics.ROSOUT, topics.TOPICS[topics.ROSOUT].type_name, data)

    def destroy_node(self) -> None:
        with self._lock:  # also reached when __init__ rejected a parameter: close only what was opened
            session: LiveSession | None = getattr(self, "session", None)
            if session is not None:
                session.close()
            if self.server is not None:
                self.server.stop()  # a close frame to every viewer
                self.server = None
        super().destroy_node()


def _ros_class(topic: str) -> Any:
    classes = {"sensor_msgs/msg/JointState": JointState, "tf2_msgs/msg/TFMessage": TFMessage,
               "std_msgs/msg/String": String, "visualization_msgs/msg/MarkerArray": MarkerArray,
               "std_msgs/msg/Bool": Bool}
    return classes[topics.TOPICS[topic].type_name]


def _state_stamp(topic: str, data: bytes) -> tuple[str, int] | None:
    """(stream, header stamp) of a per-state message — joint states, link or object TF, objects; else None."""
    if topic == topics.JOINT_STATES:
        return topic, cdr_peek.header_stamp(data)
    if topic == topics.TF:
        first = cdr_peek.first_transform(data)
        if first is None:
            return None
        kind = "objects" if first[2].startswith(OBJECT_FRAME_PREFIX) else "links"
        return f"{topic} {kind}", first[0]
    if topic == topics.OBJECTS:
        stamp = cdr_peek.first_marker_stamp(data)
        return None if stamp is None else (topic, stamp)
    return None


def _object_poses(msg: MarkerArray) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
    return {m.ns: ((m.pose.position.x, m.pose.position.y, m.pose.position.z),
                   (m.pose.orientation.w, m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z))
            for m in msg.markers if m.ns}


def main(args: list[str] | None = None) -> None:
    # two threads: service calls from Foxglove wait on futures that the other thread completes
    run_node(FoxgloveNode, args, lambda: MultiThreadedExecutor(num_threads=2))


if __name__ == "__main__":
    main()


__all__ = ["FoxgloveNode", "image_to_rgb", "main"]
