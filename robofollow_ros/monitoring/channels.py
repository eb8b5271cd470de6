"""``TrialChannels``: the one set of channels that every monitoring path logs through.

Two foxglove Contexts: ``record`` (whose sink is the open trial recording, a ROS 2 bag) and ``live``
(whose sink is the websocket server). Both carry the same ROS 2 types on the same topics
(``monitoring.topics``), so a layout works live and on a recording alike; they are separate so
that a latched message re-sent to a viewer who subscribes late (the robot model, the static
transforms) does not land in the recording twice, and so that the live view can carry the
viewer's own ``foxglove.CameraCalibration`` where the bag has ``sensor_msgs/CameraInfo``, and the robot
description with its meshes as ``package://`` URIs that the server's asset handler answers
(``monitoring.rig_assets``) where the bag keeps the ``file://`` URLs.

A message is serialized once and logged to whichever context has a listener; costly work (JPEG)
is skipped when nobody listens, and cameras are rate-limited per camera: a schedule on the images' log
times, which starts again with every recording (``restart_schedules``; each trial's clock starts anew, and
its first images must not wait for the previous trial's schedule) and whenever the log time runs backwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import foxglove
import numpy as np
from foxglove.channels import CameraCalibrationChannel
from foxglove.messages import CameraCalibration, Timestamp

from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OPTICAL_FRAMES, JOINT_NAMES
from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.bagfile import BagRecording, channel_metadata
from robofollow_ros.monitoring.jsonenc import encode_json
from robofollow_ros.monitoring.rig_assets import RigAssets

#: Distinct payloads kept per latched topic (every static-TF publisher sends its own message).
LATCHED_KEEP = 32


@dataclass(frozen=True)
class MonitorSettings:
    """What the monitoring path may spend: camera rate cap and JPEG quality."""

    camera_max_hz: float = 15.0
    jpeg_quality: int = 80

    def __post_init__(self) -> None:
        if not self.camera_max_hz > 0:
            raise ValueError(f"camera_max_hz: must be > 0, got {self.camera_max_hz}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality: must be in 1..100, got {self.jpeg_quality}")


class ChannelSet:
    """The ``ros2msg``/``cdr`` channels of one Context, one per topic (every contract topic up front)."""

    def __init__(self, context: foxglove.Context, exclude: Sequence[str] = ()) -> None:
        self.context = context
        self.channels: dict[str, foxglove.Channel] = {}
        self.qos: dict[str, topics.Qos] = {}
        self.types: dict[str, str] = {}
        for topic in topics.TOPICS.values():
            if topic.name not in exclude:
                self.channel(topic.name, topic.type_name, topic.qos)

    def channel(self, topic: str, type_name: str, qos: topics.Qos | None = None) -> foxglove.Channel:
        existing = self.channels.get(topic)
        if existing is not None:
            if self.types[topic] != type_name:
                raise ValueError(f"topic {topic}: carries {self.types[topic]}, got a {type_name}")
            return existing
        qos = qos or topics.STREAM
        schema = foxglove.Schema(name=type_name, encoding="ros2msg",
                                 data=rosmsg.ros_type(type_name).definition.encode("utf-8"))
        channel = foxglove.Channel(topic, schema=schema, message_encoding="cdr", context=self.context,
                                   metadata=channel_metadata(type_name, qos))
        self.channels[topic], self.qos[topic], self.types[topic] = channel, qos, type_name
        return channel


class TrialChannels:
    """Log ROS 2 messages to the open recording and the live view; keep the latched ones."""

    def __init__(self, settings: MonitorSettings | None = None) -> None:
        self.settings = settings or MonitorSettings()
        self.record = ChannelSet(foxglove.Context())
        calibration = [topics.calibration_topic(c) for c in CAMERA_NAMES]
        self.live = ChannelSet(foxglove.Context(), exclude=calibration)
        self.calibration = {c: CameraCalibrationChannel(topics.calibration_topic(c), context=self.live.context)
                            for c in CAMERA_NAMES}
        self.recording: BagRecording | None = None
        #: The live description's mesh files, served to viewers (``start_monitor_server``'s asset handler).
        self.assets = RigAssets()
        self._live_description: tuple[bytes, bytes] | None = None  # (recorded CDR, live CDR)
        #: Intrinsics (width, height, K) per camera, when no graph publishes camera_info (headless).
        self.intrinsics: dict[str, tuple[int, int, np.ndarray]] = {}
        self._latched: dict[str, dict[bytes, str]] = {t: {} for t in (*topics.LATCHED_TOPICS,
                                                                       *topics.LIVE_LATCHED_TOPICS)}
        self._lock = threading.Lock()
        #: Per camera: when the next image is due, and the log time of the last one sent.
        self._camera_due_ns: dict[str, int] = {}
        self._camera_last_ns: dict[str, int] = {}
        self.camera_dropped = 0
        #: A blinded run (``monitoring.blind.blind_live``): what the live view is sent instead; never the recording.
        self.live_filter: Callable[[str, str, bytes], bytes] | None = None

    @property
    def live_context(self) -> foxglove.Context:
        return self.live.context

    # -- the one way out ----------------------------------------------------------------------------
    def publish(self, topic: str, type_name: str, data: bytes, time_ns: int | None = None,
                qos: topics.Qos | None = None) -> None:
        """Log serialized CDR ``data`` of ``type_name`` on ``topic`` to the recording and the live view."""
        now = time.time_ns() if time_ns is None else time_ns
        if topic in self._latched:
            with self._lock:
                kept = self._latched[topic]
                if topic in topics.KEEP_LAST_ONE:
                    kept.clear()
                kept[data] = type_name
                while len(kept) > LATCHED_KEEP:
                    kept.pop(next(iter(kept)))
        recording = self.recording
        if recording is not None:
            channel = self.record.channel(topic, type_name, qos)
            recording.declare(topic, type_name, self.record.qos[topic])
            channel.log(data, log_time=now)
            recording.count(topic, now)
        live = self.live.channel(topic, type_name, qos)
        live_data = self._live_payload(topic, data)  # also when nobody watches yet: it sets what is served
        if live.has_sinks():
            live.log(self._filtered(topic, type_name, live_data), log_time=now)

    def _live_payload(self, topic: str, data: bytes) -> bytes:
        """What the live view gets of ``data``: the robot description with its meshes by ``package://``."""
        if topic != topics.ROBOT_DESCRIPTION:
            return data
        cached = self._live_description
        if cached is not None and cached[0] == data:
            return cached[1]
        try:
            urdf = str(rosmsg.decode(data, topics.STRING).data)
        except Exception:  # not a std_msgs/String the typestore reads: passed on as it came
            return data
        live = self.assets.live_description(urdf)
        payload = data if live == urdf else rosmsg.encode(rosmsg.string(live))
        self._live_description = (data, payload)
        return payload

    def _filtered(self, topic: str, type_name: str, data: bytes) -> bytes:
        return data if self.live_filter is None else self.live_filter(topic, type_name, data)

    def send(self, topic: str, msg: Any, time_ns: int | None = None) -> None:
        """Serialize a message built with ``monitoring.rosmsg`` and publish it."""
        self.publish(topic, msg.__msgtype__, rosmsg.encode(msg), time_ns)

    def wants(self, topic: str) -> bool:
        """Somebody listens: a recording is open or a viewer subscribed (skip costly work otherwise)."""
        if self.recording is not None:
            return True
        channel = self.live.channels.get(topic)
        return channel is not None and channel.has_sinks()

    # -- recordings and latched messages -----------------------------------------------------------------
    def restart_schedules(self) -> None:
        """A new trial: the per-camera rate limits start again (its first image of each camera is sent)."""
        self._camera_due_ns.clear()
        self._camera_last_ns.clear()

    def open_recording(self, path: Path, custom_data: Mapping[str, str] | None = None) -> BagRecording:
        """Start a new trial recording; it gets the latched messages (robot model, static TF) first, and its
        cameras start with it. ``custom_data`` goes into the bag's metadata (``monitoring.rates``)."""
        self.close_recording()
        self.restart_schedules()
        recording = BagRecording.open(path, self.record.context, custom_data)
        for topic, type_name in self.record.types.items():
            recording.declare(topic, type_name, self.record.qos[topic])
        self.recording = recording
        for topic, type_name, data in self.latched():
            if topic in topics.LATCHED_TOPICS:
                self.publish_to_recording(topic, type_name, data)
        return recording

    def publish_live(self, topic: str, type_name: str, data: bytes) -> None:
        """Log to the live view only (kept for late viewers when latched); the recording does not get it."""
        if topic in self._latched:
            with self._lock:
                kept = self._latched[topic]
                if topic in topics.KEEP_LAST_ONE:
                    kept.clear()
                kept[data] = type_name
        live = self.live.channel(topic, type_name)
        live_data = self._live_payload(topic, data)
        if live.has_sinks():
            live.log(self._filtered(topic, type_name, live_data), log_time=time.time_ns())

    def publish_to_recording(self, topic: str, type_name: str, data: bytes, time_ns: int | None = None) -> None:
        recording, now = self.recording, time.time_ns() if time_ns is None else time_ns
        if recording is not None:
            self.record.channel(topic, type_name).log(data, log_time=now)
            recording.declare(topic, type_name, self.record.qos[topic])
            recording.count(topic, now)

    def close_recording(self) -> Path | None:
        """Finish the open recording; only then does ``recording`` read None (a reader waiting for that
        finds the file complete)."""
        recording = self.recording
        if recording is None:
            return None
        try:
            recording.close()
        finally:
            self.recording = None
        return recording.path

    def latched(self, topic: str | None = None) -> list[tuple[str, str, bytes]]:
        with self._lock:
            return [(t, type_name, data) for t, kept in self._latched.items() if topic in (None, t)
                    for data, type_name in kept.items()]

    def resend_latched(self, topic: str) -> int:
        """A viewer subscribed to ``topic``: give the live view its latched messages again."""
        sent = self.latched(topic)
        for name, type_name, data in sent:
            self.live.channel(name, type_name).log(self._filtered(name, type_name, self._live_payload(name, data)),
                                                   log_time=time.time_ns())
        return len(sent)

    # -- content --------------------------------------------------------------------------------------
    def log_json(self, topic: str, payload: Mapping[str, Any], time_ns: int | None = None) -> None:
        self.publish(topic, topics.STRING, rosmsg.encode(rosmsg.string(encode_json(dict(payload)))), time_ns)

    def log_joints(self, positions: Sequence[float] | np.ndarray, time_ns: int | None = None,
                   names: Sequence[str] = JOINT_NAMES, topic: str = topics.JOINT_STATES) -> None:
        if self.wants(topic):
            now = time.time_ns() if time_ns is None else time_ns
            self.send(topic, rosmsg.joint_state(now, names, positions), now)

    def log_line(self, level: str, message: str, name: str = "robofollow", time_ns: int | None = None) -> None:
        """A log line on ``/rosout`` (Foxglove's Log panel); level is debug, info, warning, error or fatal."""
        now = time.time_ns() if time_ns is None else time_ns
        self.send(topics.ROSOUT, rosmsg.log(now, level, name, message), now)

    def log_image(self, camera: str, rgb: np.ndarray | None, time_ns: int | None = None,
                  stamp_ns: int | None = None, frame_id: str | None = None, limit: bool = True) -> bool:
        """JPEG-encode and log one camera image unless rate-limited or unwatched; True if logged.

        The image carries the camera's optical frame id (so it projects into the 3-D view) and, when
        intrinsics are known here, its calibration with the same stamp. ``limit=False``: a sample the
        recording asked for (a control-rate recording), never dropped by the rate cap.
        """
        topic = topics.camera_topic(camera)
        if rgb is None or not self.wants(topic):
            return False
        now = time.time_ns() if time_ns is None else time_ns
        # A schedule, not "period since the last one": with 30 Hz offered and a 15 Hz cap, jitter would
        # otherwise make it send every third image (10 Hz) instead of every second one.
        due, last = self._camera_due_ns.get(camera), self._camera_last_ns.get(camera)
        if last is not None and now < last:  # the clock went back (another trial's): a new schedule
            due = None
        if limit and due is not None and now < due:
            self.camera_dropped += 1
            return False
        period = int(1e9 / self.settings.camera_max_hz)
        self._camera_due_ns[camera] = now + period if due is None or now - due >= period else due + period
        self._camera_last_ns[camera] = now
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR),
                                [cv2.IMWRITE_JPEG_QUALITY, self.settings.jpeg_quality])
        if not ok:
            raise ValueError(f"camera {camera}: JPEG encoding failed for an image of shape {rgb.shape}")
        stamp = now if stamp_ns is None else stamp_ns
        frame = frame_id or CAMERA_OPTICAL_FRAMES[camera]
        self.send(topic, rosmsg.compressed_image(stamp, frame, jpeg.tobytes()), now)
        if camera in self.intrinsics:
            width, height, k = self.intrinsics[camera]
            info = rosmsg.camera_info(stamp, frame, width, height, k)
            self.log_camera_info(camera, rosmsg.encode(info), info, now)
        return True

    def log_camera_info(self, camera: str, data: bytes, info: Any | None, time_ns: int | None = None) -> None:
        """sensor_msgs/CameraInfo (CDR ``data``) into the recording; live, ``info`` as foxglove.CameraCalibration."""
        now = time.time_ns() if time_ns is None else time_ns
        self.publish_to_recording(topics.calibration_topic(camera), "sensor_msgs/msg/CameraInfo", data, now)
        channel = self.calibration[camera]
        if info is not None and channel.has_sinks():
            channel.log(calibration_of(info), log_time=now)


def calibration_of(info: Any) -> CameraCalibration:
    """foxglove.CameraCalibration of a CameraInfo (rosbags or rclpy message: same field names)."""
    sec, nanosec = int(info.header.stamp.sec), int(info.header.stamp.nanosec)
    return CameraCalibration(timestamp=Timestamp(sec, nanosec), frame_id=str(info.header.frame_id),
                             width=int(info.width), height=int(info.height),
                             distortion_model=str(info.distortion_model), D=[float(v) for v in info.d],
                             K=[float(v) for v in info.k], R=[float(v) for v in info.r],
                             P=[float(v) for v in info.p])
