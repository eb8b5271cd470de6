"""``TrialChannels``: one set of Foxglove channels that every monitoring path logs through.

The headless evaluator (``robofollow eval --record``), the ROS ``foxglove_node`` and the tests all
log through this object, so a live view and a recording carry the same topics and schemas. The
channels live in a ``foxglove.Context`` whose sinks are an MCAP writer per trial and/or a
websocket server; nothing here knows which sinks are attached.

Costly work is skipped when nobody listens (``has_sinks``), and cameras are rate-limited per
camera, because JPEG encoding is the one expensive step of monitoring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import foxglove
import numpy as np
from foxglove.channels import (
    CompressedImageChannel,
    FrameTransformsChannel,
    LogChannel,
    SceneUpdateChannel,
)
from foxglove.messages import (
    CompressedImage,
    FrameTransform,
    FrameTransforms,
    Log,
    LogLevel,
    Quaternion,
    Timestamp,
    Vector3,
)

from robofollow_ros.contract import CAMERA_FRAMES, CAMERA_NAMES, JOINT_NAMES, WORLD_FRAME
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.scene import SceneBuilder


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


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays in scorer frames / observations become plain JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def encode_json(message: Any) -> bytes:
    return json.dumps(message, default=_json_default, separators=(",", ":")).encode("utf-8")


def _stamp(time_ns: int) -> Timestamp:
    return Timestamp(time_ns // 1_000_000_000, time_ns % 1_000_000_000)


class TrialChannels:
    """Log one trial's data (cameras, scene, TF, joints, score, trial state, frames, log lines)."""

    def __init__(self, context: foxglove.Context, settings: MonitorSettings | None = None) -> None:
        self.context = context
        self.settings = settings or MonitorSettings()
        self.cameras = {name: CompressedImageChannel(topics.camera_topic(name), context=context)
                        for name in CAMERA_NAMES}
        self.scene = SceneUpdateChannel(topics.SCENE, context=context)
        self.tf = FrameTransformsChannel(topics.TF, context=context)
        self.log_channel = LogChannel(topics.LOG, context=context)
        self.joints = foxglove.Channel(topics.JOINT_STATES, schema=topics.JOINT_STATES_SCHEMA, context=context)
        self.score = foxglove.Channel(topics.SCORE, schema=topics.SCORE_SCHEMA, context=context)
        self.trial = foxglove.Channel(topics.TRIAL, schema=topics.TRIAL_SCHEMA, context=context)
        self.frame = foxglove.Channel(topics.FRAME, schema=topics.FRAME_SCHEMA, context=context)
        self.result = foxglove.Channel(topics.RESULT, schema=topics.RESULT_SCHEMA, context=context)
        self._scene_builder: SceneBuilder | None = None
        self._camera_due_ns: dict[str, int] = {}
        self.camera_dropped = 0

    # -- trial framing ----------------------------------------------------------------------------
    def set_scene(self, builder: SceneBuilder | None) -> None:
        """The task's scene (layout, source/target, regions); None hides the 3-D objects."""
        self._scene_builder = builder

    def log_trial(self, state: Mapping[str, Any], time_ns: int | None = None) -> None:
        """Trial state JSON: trial, scene, level, task, instruction, round, seed, phase."""
        self.trial.log(encode_json(dict(state)), log_time=time_ns)

    def log_result(self, trial_id: str, result: Mapping[str, Any], time_ns: int | None = None) -> None:
        """The results.json entry the live trial produced (replay compares against it)."""
        self.result.log(encode_json({"trial": trial_id, "result": dict(result)}), log_time=time_ns)

    # -- per frame --------------------------------------------------------------------------------
    def log_frame(self, trial_id: str, task_id: str, index: int, frame: Mapping[str, Any],
                  time_ns: int | None = None) -> None:
        """The scorer frame (exact re-scoring), plus the 3-D scene and the object/EE transforms it implies."""
        self.frame.log(encode_json({"trial": trial_id, "task": task_id, "index": index, "frame": frame}),
                       log_time=time_ns)
        self.log_scene(frame, time_ns)
        if self.tf.has_sinks():
            self.tf.log(_frame_transforms(frame, time_ns or time.time_ns()), log_time=time_ns)

    def log_scene(self, frame: Mapping[str, Any], time_ns: int | None = None) -> bool:
        """The 3-D scene of a (possibly partial) frame; False when no task scene is set or nobody listens."""
        if self._scene_builder is None or not self.scene.has_sinks():
            return False
        self.scene.log(self._scene_builder.update(frame), log_time=time_ns)
        return True

    def log_joints(self, positions: Sequence[float] | np.ndarray, time_ns: int | None = None,
                   names: Sequence[str] = JOINT_NAMES) -> None:
        """Joint states as JSON (``name``/``position`` like sensor_msgs/JointState, plus a by-name map for Plot)."""
        if not self.joints.has_sinks():
            return
        values = [float(v) for v in positions]
        self.joints.log(encode_json({"name": list(names), "position": values,
                                     "by_name": dict(zip(names, values, strict=True))}), log_time=time_ns)

    def log_score(self, live: Mapping[str, Any], time_ns: int | None = None) -> None:
        """StageMonitor.live() (docs/scoring.md), charted per stage by the Plot panel."""
        self.score.log(encode_json(dict(live)), log_time=time_ns)

    def log_image(self, camera: str, rgb: np.ndarray | None, time_ns: int | None = None) -> bool:
        """JPEG-encode and log one camera image unless rate-limited or unwatched; True if logged."""
        channel = self.cameras[camera]
        if rgb is None or not channel.has_sinks():
            return False
        now = time_ns if time_ns is not None else time.time_ns()
        # A schedule, not "period since the last one": with 30 Hz offered and a 15 Hz cap, jitter would
        # otherwise make it send every third image (10 Hz) instead of every second one.
        due = self._camera_due_ns.get(camera)
        if due is not None and now < due:
            self.camera_dropped += 1
            return False
        period = int(1e9 / self.settings.camera_max_hz)
        self._camera_due_ns[camera] = now + period if due is None or now - due >= period else due + period
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR),
                                [cv2.IMWRITE_JPEG_QUALITY, self.settings.jpeg_quality])
        if not ok:
            raise ValueError(f"camera {camera}: JPEG encoding failed for an image of shape {rgb.shape}")
        channel.log(CompressedImage(timestamp=_stamp(now), frame_id=CAMERA_FRAMES[camera], data=jpeg.tobytes(),
                                    format="jpeg"), log_time=time_ns)
        return True

    def log_transforms(self, transforms: FrameTransforms, time_ns: int | None = None) -> None:
        if self.tf.has_sinks():
            self.tf.log(transforms, log_time=time_ns)

    def log_line(self, level: str, message: str, name: str = "robofollow", time_ns: int | None = None) -> None:
        """A log line (Foxglove's Log panel); level is debug, info, warning, error or fatal."""
        levels = {"debug": LogLevel.Debug, "info": LogLevel.Info, "warning": LogLevel.Warning,
                  "error": LogLevel.Error, "fatal": LogLevel.Fatal}
        if level not in levels:
            raise ValueError(f"level: expected one of {sorted(levels)}, got {level!r}")
        now = time_ns if time_ns is not None else time.time_ns()
        self.log_channel.log(Log(timestamp=_stamp(now), level=levels[level], message=message, name=name),
                             log_time=time_ns)


def _frame_transforms(frame: Mapping[str, Any], time_ns: int) -> FrameTransforms:
    """world -> every object (position and quaternion) and world -> each scorer EE point."""
    stamp = _stamp(time_ns)
    quats: Mapping[str, Sequence[float]] = frame.get("object_quats", {})
    out = []
    for name, xyz in frame.get("objects", {}).items():
        w, x, y, z = quats.get(name, (1.0, 0.0, 0.0, 0.0))
        out.append(FrameTransform(timestamp=stamp, parent_frame_id=WORLD_FRAME, child_frame_id=name,
                                  translation=Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])),
                                  rotation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))))
    for arm in ("left", "right"):
        if f"ee_{arm}" in frame:
            p = frame[f"ee_{arm}"]
            out.append(FrameTransform(timestamp=stamp, parent_frame_id=WORLD_FRAME, child_frame_id=f"{arm}_ee",
                                      translation=Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                                      rotation=Quaternion(w=1.0)))
    return FrameTransforms(transforms=out)
