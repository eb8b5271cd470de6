"""perception_node: head camera (RGB + optional depth) → named object poses on ``/robofollow/objects`` and TF.

On the rig nothing else knows where the objects are, so the stage monitor and the oracle read this
node's output. It is a thin adapter around ``robofollow_ros.perception.Perception``: messages in,
core types through, messages out. The layout to expect comes from ``/robofollow/trial`` (its task
id) or from the ``task`` / ``layout`` parameters.

Outputs (stamped with the picture's stamp, frame ``world``):
- ``/robofollow/objects`` (MarkerArray): one marker per tracked identity, ``ns`` = name, shape and
  size of the object, colour alpha = confidence, ``text`` = JSON ``{"confidence", "age_s",
  "visible"}``. An object hidden by the gripper keeps its last pose with a growing age and a decaying
  confidence; an identity never seen has no marker.
- TF ``world`` → ``object/<name>`` for every tracked identity.
- ``/robofollow/perception/status`` (String JSON): ``{"stamp_ns", "task", "layout", "missing": [names],
  "unexplained": [{"colour", "position", "pixels"}], "objects": {name: {"confidence", "age_s", "visible"}},
  "colour_calibrated", "colour_drift": {"drifted", "reasons", "hue_shift_deg", "gains", "exposure",
  "table_shift"}, "doubts": {name: why}, "depth_age_s", "frames": {"camera_hz", "camera_hz_source",
  "processed_hz", "received", "processed", "dropped", "dropped_by_cause", "depth_age_s"}}``
  (``perception.frame_stats``). A drift from the colour calibration, and frames dropped (never silently), are
  also logged as (throttled) warnings.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.contract import TOPIC_OBJECTS, TOPIC_TRIAL, WORLD_FRAME, camera_image_topic
from robofollow_ros.monitoring.stages import doubt_change
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import Bounds, ParameterSet, one_of, positive
from robofollow_ros.nodes.conversions import MessageError, image_array, object_frame, stamp_ns, time_msg, transform_msg
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.perception.frame_stats import FrameStats

TOPIC_PERCEPTION_STATUS = "/robofollow/perception/status"
TOPIC_HEAD_DEPTH = "/cameras/head/depth"
#: Pictures and depth maps waiting for their partner (by stamp); older ones are dropped.
PAIR_BUFFER = 4
#: With no depth for this long, pictures are used alone (table-plane mode) instead of waiting.
DEPTH_STALE_NS = 1_000_000_000
#: At most one log line a second about what perception doubts (it can change every picture).
DOUBT_LOG_INTERVAL_S = 1.0


def depth_array(msg: Image) -> np.ndarray:
    """float32 (H, W) metres from a 32FC1 image (16UC1 millimetres also accepted)."""
    if msg.encoding == "32FC1":
        rows = np.frombuffer(bytes(msg.data), dtype=np.float32).reshape(msg.height, msg.step // 4)
        return rows[:, : msg.width].copy()
    if msg.encoding == "16UC1":
        rows16 = np.frombuffer(bytes(msg.data), dtype=np.uint16).reshape(msg.height, msg.step // 2)
        return rows16[:, : msg.width].astype(np.float32) / 1000.0
    raise MessageError(f"depth: encoding {msg.encoding!r}; expected 32FC1 (m) or 16UC1 (mm)")


class PerceptionNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("perception_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        calibration = params.declare("calibration_dir", "", "directory with head.yaml (camera_info) and "
                                     "extrinsics.yaml; empty: the active rig's simulated cameras (calibration/sim "
                                     "for the built-in rig)")
        if not calibration:
            from robofollow_ros.robot.calibration import rig_calibration_dir

            calibration = str(rig_calibration_dir())
        self.use_depth = params.declare("use_depth", True, "pair pictures with /cameras/head/depth when it arrives")
        self.publish_tf = params.declare("publish_tf", True, "also publish world -> object/<name> on /tf")
        task = params.declare("task", "", "evaluation task id to expect before /robofollow/trial names one")
        layout = params.declare("layout", "", "or a layout as 'scene:key' (e.g. 'scene2:scene2.3')")
        min_pixels = params.declare("min_pixels", 25, "smallest colour blob taken as an object, px", positive)
        smoothing = params.declare("smoothing", 0.5, "weight of a new measurement of a still object (0..1]",
                                   Bounds(low=0, high=1, low_open=True, rule="must be in (0, 1]"))
        half_life = params.declare("confidence_half_life_s", 2.0, "unseen objects' confidence halves this often",
                                   positive)
        params.declare("camera", "head", "camera perception watches", one_of("head"))
        camera_hz = params.declare("camera_hz", 0.0, "the head camera's nominal rate, Hz (the rig: 30): a stream "
                                   "perception cannot keep up with counts its lost pictures against it; 0: learn the "
                                   "rate from the pictures' stamps", Bounds(low=0, rule="must be >= 0 (0: learn it)"))
        colour_model = params.declare("colour_model", "", "colour model YAML (default: <calibration_dir>/colour.yaml, "
                                      "else the built-in uncalibrated one)")

        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.perception.tracker import perception_from_calibration

        self.registry = default_registry()
        self.perception, self.colour_calibrated = perception_from_calibration(
            Path(calibration), Path(colour_model) if colour_model else None, smoothing=smoothing,
            half_life_s=half_life, min_pixels=min_pixels)
        if not self.colour_calibrated:
            self.get_logger().warning(f"no colour.yaml in {calibration}: using the built-in colour classes "
                                      "(run `robofollow calibrate colour`)")
        self.task_id, self.layout_name = "", ""
        if task:
            self._expect_task(task)
        elif layout:
            scene, _, key = layout.partition(":")
            try:
                self.perception.reset(self.registry.layout(scene, key))
            except Exception as exc:
                raise ValueError(f"parameter 'layout' = {layout!r} rejected: {exc}") from None
            self.layout_name = layout
        self._pictures: dict[int, np.ndarray] = {}
        self._depths: dict[int, np.ndarray] = {}
        self._last_depth_ns = -DEPTH_STALE_NS
        #: Camera rate, processed and dropped frames, depth age: on the status topic, and logged when frames drop.
        self.frame_stats = FrameStats(camera_hz or None)
        self._dropped_logged = 0
        self._doubt_key, self._doubt_logged_at = "", -DOUBT_LOG_INTERVAL_S
        self.objects = self.create_publisher(MarkerArray, TOPIC_OBJECTS, 10)
        self.tf = self.create_publisher(TFMessage, "/tf", 10)
        self.status = self.create_publisher(String, TOPIC_PERCEPTION_STATUS, 10)
        self.create_subscription(Image, camera_image_topic("head"), self._on_picture, qos_profile_sensor_data)
        self.create_subscription(Image, TOPIC_HEAD_DEPTH, self._on_depth, qos_profile_sensor_data)
        self.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)

    # -- inputs ----------------------------------------------------------------------------------
    def _expect_task(self, task_id: str) -> None:
        task = self.registry.eval_task(task_id)
        self.perception.reset(self.registry.layout_of(task))
        self.task_id, self.layout_name = task_id, f"{task.scene}:{task.layout}"
        self.get_logger().info(f"expecting layout {self.layout_name} (task {task_id})")

    def _on_trial(self, msg: String) -> None:
        try:
            trial = tp.decode(msg.data, TOPIC_TRIAL)
        except ValueError as exc:
            self.get_logger().error(str(exc))
            return
        task = trial.get("task")
        if isinstance(task, str) and task and task != self.task_id:
            try:
                self._expect_task(task)
            except Exception as exc:  # an unknown task must not stop the node
                self.get_logger().error(f"trial task {task!r}: {exc}")
                return
            self._pictures.clear()
            self._depths.clear()

    def _on_picture(self, msg: Image) -> None:
        try:
            rgb = image_array(msg)
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)
            return
        stamp = stamp_ns(msg.header.stamp)
        self.frame_stats.on_picture(stamp)
        depth_live = self.use_depth and stamp - self._last_depth_ns < DEPTH_STALE_NS
        if stamp in self._depths or not depth_live:
            self._process(stamp, rgb, self._depths.pop(stamp, None))
            return
        self._pictures[stamp] = rgb
        self.frame_stats.on_unpaired(_trim(self._pictures))

    def _on_depth(self, msg: Image) -> None:
        if not self.use_depth:
            return
        try:
            depth = depth_array(msg)
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)
            return
        stamp = stamp_ns(msg.header.stamp)
        self._last_depth_ns = max(self._last_depth_ns, stamp)
        if stamp in self._pictures:
            self._process(stamp, self._pictures.pop(stamp), depth)
            return
        self._depths[stamp] = depth
        self.frame_stats.on_unpaired(_trim(self._depths))

    # -- work ------------------------------------------------------------------------------------
    def _process(self, stamp: int, rgb: np.ndarray, depth: np.ndarray | None) -> None:
        if not self.perception.models:
            self.get_logger().warning("no layout yet (no trial, no task/layout parameter): picture skipped",
                                      throttle_duration_sec=5.0)
            return
        try:
            result = self.perception.update(rgb, depth, stamp / 1e9)
        except ValueError as exc:
            self.get_logger().error(f"picture at {stamp} ns: {exc}", throttle_duration_sec=5.0)
            return
        self.frame_stats.on_processed(stamp, self._last_depth_ns if self._last_depth_ns >= 0 else None)
        self.objects.publish(self._markers(result, stamp))
        if self.publish_tf:
            self.tf.publish(TFMessage(transforms=[
                transform_msg(WORLD_FRAME, object_frame(name), t.position, t.quat_wxyz, stamp)
                for name, t in result.tracks.items()]))
        status = self._status(result, stamp)
        self.status.publish(String(data=json.dumps(status)))
        self._log_doubt(status)
        if self.frame_stats.dropped_total > self._dropped_logged:
            self._dropped_logged = self.frame_stats.dropped_total
            frames = self.frame_stats.as_dict()
            self.get_logger().warning(
                f"perception dropped {frames['dropped']} frames so far ({frames['dropped_by_cause']}): camera "
                f"{frames['camera_hz']} Hz, processed {frames['processed_hz']} Hz", throttle_duration_sec=10.0)
        if result.colour_drift is not None and result.colour_drift.drifted:
            self.get_logger().warning("colours drifted from the colour calibration: "
                                      + "; ".join(result.colour_drift.reasons), throttle_duration_sec=10.0)

    def _log_doubt(self, status: dict[str, Any]) -> None:
        """A log line (the operator's log panel) when what perception doubts changes, at most one a second so a
        flickering doubt cannot flood it; the details stay on the status topic."""
        now = time.monotonic()
        if now - self._doubt_logged_at < DOUBT_LOG_INTERVAL_S:
            return
        key, line = doubt_change(self._doubt_key, status)
        if line is not None:
            self._doubt_logged_at = now
            (self.get_logger().info if key == "sure" else self.get_logger().warning)(line)
        self._doubt_key = key

    def _markers(self, result: Any, stamp: int) -> MarkerArray:
        markers = []
        for index, (name, track) in enumerate(sorted(result.tracks.items())):
            model = self.perception.models[name]
            m = Marker(ns=name, id=index, action=Marker.ADD)
            m.type = {"sphere": Marker.SPHERE, "cylinder": Marker.CYLINDER}.get(model.shape, Marker.CUBE)
            m.header.stamp = time_msg(stamp)
            m.header.frame_id = WORLD_FRAME
            m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in track.position)
            w, x, y, z = track.quat_wxyz
            m.pose.orientation.w, m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z = w, x, y, z
            height = 2 * model.top_offset if model.shape != "bowl" else 0.04
            m.scale.x, m.scale.y, m.scale.z = model.width, 2 * model.half_depth, max(height, 0.002)
            rgb = _COLOUR_RGB[model.colour]
            m.color.r, m.color.g, m.color.b = rgb
            m.color.a = float(max(0.05, min(1.0, track.confidence)))
            m.text = json.dumps({"confidence": round(track.confidence, 4), "age_s": round(track.age_s, 3),
                                 "visible": track.visible})
            markers.append(m)
        return MarkerArray(markers=markers)

    def _status(self, result: Any, stamp: int) -> dict[str, Any]:
        return {
            "stamp_ns": stamp, "task": self.task_id, "layout": self.layout_name, "missing": result.missing,
            "unexplained": [{"colour": d.colour, "pixels": d.pixel_count,
                             "position": None if d.raw_position() is None else [round(float(v), 4)
                                                                                for v in d.raw_position()]}
                            for d in result.unexplained],
            "objects": {name: {"confidence": round(t.confidence, 4), "age_s": round(t.age_s, 3),
                               "visible": t.visible} for name, t in result.tracks.items()},
            "doubts": result.doubts,
            "depth_age_s": self.frame_stats.as_dict()["depth_age_s"],
            "frames": self.frame_stats.as_dict(),
            "colour_calibrated": self.colour_calibrated,
            "colour_drift": None if result.colour_drift is None else result.colour_drift.as_dict(),
        }


_COLOUR_RGB = {"red": (0.9, 0.15, 0.15), "yellow": (0.95, 0.85, 0.1), "green": (0.1, 0.75, 0.2),
               "blue": (0.1, 0.3, 0.95)}


def _trim(buffer: dict[int, Any]) -> int:
    """Drop the oldest entries beyond PAIR_BUFFER; returns how many were dropped (counted, never silent)."""
    dropped = 0
    while len(buffer) > PAIR_BUFFER:
        del buffer[min(buffer)]
        dropped += 1
    return dropped


def main(args: list[str] | None = None) -> None:
    run_node(PerceptionNode, args)


if __name__ == "__main__":
    main()
