"""A recorded trial's pictures and scores, read from a ROS 2 bag for its video (``monitoring.trial_video``).

Read with ``rosbags`` (pure Python, MCAP or SQLite, a single ``.mcap`` or a bag directory), so the three kinds
of recordings give videos alike: ``eval --record`` (one trial per file, everything on the trial's clock),
the ROS graph's per-trial files (``foxglove_node``: its resetting phase too, headers on sim time, log
times on the wall clock) and a ``ros2 bag record`` on the rig (raw ``sensor_msgs/Image`` cameras, several
trials in one bag). Topics (``contract``, ``monitoring.topics``):

- cameras: ``/cameras/<camera>/image_raw/compressed`` (what our recorders write), else
  ``/cameras/<camera>/image_raw`` (rgb8 / bgr8); the head camera's messages are the video's frames (the
  first camera the bag has, without a head camera), each wrist camera its latest picture stamped at or
  before the frame's stamp (cameras of one render share a stamp, whichever arrives first);
- ``/robofollow/trial``: one video per trial, its ``running`` phase (from its first ``running`` state to the
  next state of another phase or trial); a bag without trial states is one video named after the bag;
- ``/robofollow/score`` (``StageMonitor.live()``): the stage states at each frame (the latest score logged at
  or before it); the final score, or ``/robofollow/result``, gives the final IS/ES;
- ``/robofollow/instruction``: the instruction when the trial state does not say it.

Frame times are the header stamps (the robot's time: sim time on the graph), falling back on the log time
for an unstamped message; which score and which trial a frame belongs to is decided on log times, the one
clock every message of a bag has. Two passes: ``plan_bag`` reads everything but the pictures (so every bag
is checked before anything is written), ``frames`` then decodes the pictures one at a time.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, TRIAL_ID_KEY, camera_image_topic
from robofollow_ros.monitoring import topics

RUNNING = "running"
#: Pictures of a wrist camera kept waiting for the head camera's next frame (past this the oldest are dropped).
MAX_WAITING = 256


class VideoBagError(ValueError):
    """A bag that gives no video; the message names the bag and what it lacks."""


@dataclass
class Clip:
    """One trial of a bag: its name, what it was asked, its span of log times and its scores."""

    name: str
    instruction: str
    start_ns: int
    end_ns: int | None  # None: to the end of the bag
    #: (log time, live score) in log-time order.
    scores: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    final: tuple[float, float, bool] | None = None
    stage_names: list[str] = field(default_factory=list)
    #: Header stamps of the head-camera pictures (the video's frames) logged in the span.
    stamps: list[int] = field(default_factory=list)
    #: The trial id the trial state gave (None for a bag without trial states).
    trial: str | None = None

    @property
    def frames(self) -> int:
        return len(self.stamps)

    def holds(self, log_ns: int) -> bool:
        return self.start_ns <= log_ns and (self.end_ns is None or log_ns <= self.end_ns)

    def live_at(self, log_ns: int) -> dict[str, Any] | None:
        """The latest score logged at or before ``log_ns`` (None before the first)."""
        i = bisect_right([t for t, _ in self.scores], log_ns) - 1
        return self.scores[i][1] if i >= 0 else None


@dataclass
class BagPlan:
    path: Path
    #: camera -> the topic its pictures are read from.
    cameras: dict[str, str]
    #: The camera whose pictures are the frames.
    clock: str
    clips: list[Clip]


def bag_name(path: Path) -> str:
    return Path(path).stem if Path(path).suffix == ".mcap" else Path(path).name


def _reader(path: Path) -> Any:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    return AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_JAZZY))


def _camera_topics(connections: list[Any]) -> dict[str, str]:
    counts: dict[str, int] = {}
    for c in connections:
        counts[c.topic] = counts.get(c.topic, 0) + int(getattr(c, "msgcount", 1) or 0)
    chosen = {}
    for camera in CAMERA_NAMES:
        for topic in (topics.camera_topic(camera), camera_image_topic(camera)):
            if counts.get(topic, 0) > 0:
                chosen[camera] = topic
                break
    return chosen


def plan_bag(path: Path) -> BagPlan:
    """Pass one: the trials, their scores and frame counts; every refusal comes here, before a file is written."""
    path = Path(path)
    if not path.exists():
        raise VideoBagError(f"{path}: does not exist")
    texts = {topics.TRIAL: "trial", topics.SCORE: "score", topics.RESULT: "result", topics.INSTRUCTION: "instruction"}
    events: list[tuple[int, str, Any]] = []
    clock_times: list[tuple[int, int]] = []  # (log time, stamp) of each clock-camera picture
    try:
        with _reader(path) as reader:
            cameras = _camera_topics(list(reader.connections))
            if not cameras:
                raise VideoBagError(f"{path}: no camera pictures (no messages on /cameras/<camera>/image_raw"
                                    f"[/compressed] for any of {', '.join(CAMERA_NAMES)})")
            clock = "head" if "head" in cameras else next(iter(cameras))
            wanted = [c for c in reader.connections if c.topic in texts or c.topic == cameras[clock]]
            for conn, t, raw in reader.messages(connections=wanted):
                if conn.topic == cameras[clock]:
                    clock_times.append((int(t), _stamp(reader.deserialize(raw, conn.msgtype), int(t))))
                    continue
                data = str(reader.deserialize(raw, conn.msgtype).data)
                kind = texts[conn.topic]
                events.append((int(t), kind, data if kind == "instruction" else _json(data)))
    except VideoBagError:
        raise
    except Exception as exc:  # rosbags raises its own error types for unreadable bags
        raise VideoBagError(f"{path}: not a readable ROS 2 bag ({type(exc).__name__}: {exc})") from None
    clips = _clips(path, events)
    _attach_scores(clips, events)
    for clip in clips:
        clip.stamps = [stamp for t, stamp in clock_times if clip.holds(t)]
    if not any(clip.frames for clip in clips):
        when = "its trials ran" if len(clips) > 1 else "it ran"
        raise VideoBagError(f"{path}: no {clock} camera picture while {when}")
    return BagPlan(path, cameras, clock, clips)


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def safe_name(name: str) -> str:
    """A trial id as a file name: letters, digits, ``._-`` kept, anything else ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "trial"


def _clips(path: Path, events: list[tuple[int, str, Any]]) -> list[Clip]:
    """The running phase of each trial state stream; the whole bag when it has no trial states."""
    instruction = ""
    clips: list[Clip] = []
    current: Clip | None = None
    current_id: Any = None
    phases: list[str] = []
    for t, kind, value in events:
        if kind == "instruction":
            instruction = value
        if kind != "trial":
            continue
        phase, trial_id = value.get("phase"), value.get(TRIAL_ID_KEY)
        phases.append(str(phase))
        if current is not None and (trial_id != current_id or phase != RUNNING):
            current.end_ns = t
            clips.append(current)
            current = None
        if phase == RUNNING and current is None:
            current_id = trial_id
            current = Clip(str(trial_id), str(value.get("instruction") or instruction), t, None, trial=str(trial_id))
    if current is not None:
        clips.append(current)
    if not phases:
        return [Clip(bag_name(path), instruction, 0, None)]
    if not clips:
        raise VideoBagError(f"{path}: no trial reached the running phase (phases recorded: "
                            f"{', '.join(dict.fromkeys(phases))})")
    seen: dict[str, int] = {}
    for clip in clips:  # a trial run again (redo) is a second video
        seen[clip.name] = seen.get(clip.name, 0) + 1
        clip.name = safe_name(clip.name if seen[clip.name] == 1 else f"{clip.name}_attempt{seen[clip.name]}")
    return clips


def _attach_scores(clips: list[Clip], events: list[tuple[int, str, Any]]) -> None:
    """Each score to its trial (named by ``trial_id``, else the latest trial started at or before it); the final
    totals from the trial's result, else its final score."""
    starts = [c.start_ns for c in clips]
    results: dict[int, tuple[float, float, bool]] = {}
    for t, kind, value in events:
        if kind not in ("score", "result"):
            continue
        named = value.get("trial_id") if kind == "score" else value.get("trial")
        owners = [k for k, c in enumerate(clips) if named is not None and c.trial == str(named) and c.start_ns <= t]
        k = owners[-1] if owners else bisect_right(starts, t) - 1
        if k < 0:
            continue
        clip = clips[k]
        if kind == "result" and isinstance(value.get("result"), dict):
            r = value["result"]
            results[k] = (float(r.get("intent_score", 0.0)), float(r.get("exec_score", 0.0)),
                          bool(r.get("completion_ok")))
            clip.stage_names = clip.stage_names or [str(p.get("phase")) for p in r.get("phases") or []]
        elif kind == "score":
            clip.scores.append((t, value))
            if value.get("final"):
                clip.final = (float(value.get("intent", 0.0)), float(value.get("exec", 0.0)),
                              bool(value.get("complete")))
            if isinstance(value.get("stages"), dict) and value["stages"]:
                clip.stage_names = list(value["stages"])
    for k, final in results.items():
        clips[k].final = final


def decode(data: bytes, msgtype: str, encoding: str = "", height: int = 0, width: int = 0,
           step: int = 0) -> np.ndarray:
    """RGB uint8 of a CompressedImage (JPEG/PNG) or an rgb8/bgr8 Image."""
    import cv2

    if msgtype.endswith("CompressedImage"):
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise ValueError("a compressed picture OpenCV cannot decode")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"Image encoding {encoding!r}: expected rgb8 or bgr8")
    rows = np.frombuffer(data, np.uint8).reshape(height, step)
    rgb = rows[:, : width * 3].reshape(height, width, 3)
    return rgb[..., ::-1].copy() if encoding == "bgr8" else rgb.copy()


@dataclass
class Frame:
    clip: int
    stamp_ns: int
    log_ns: int
    images: dict[str, np.ndarray | None]


class _Camera:
    """A wrist camera's pictures, waiting to be matched to the next frame's stamp; decoded only when used."""

    def __init__(self) -> None:
        self.waiting: deque[tuple[int, Any]] = deque()
        self.held: Any = None
        self._decoded: tuple[Any, np.ndarray] | None = None

    def take_until(self, stamp: int) -> None:
        while self.waiting and self.waiting[0][0] <= stamp:
            self.held = self.waiting.popleft()[1]

    def add(self, stamp: int, msg: Any) -> None:
        self.waiting.append((stamp, msg))
        while len(self.waiting) > MAX_WAITING:
            self.held = self.waiting.popleft()[1]

    def picture(self, where: str) -> np.ndarray | None:
        if self.held is None:
            return None
        if self._decoded is None or self._decoded[0] is not self.held:
            self._decoded = (self.held, _picture(self.held, where))
        return self._decoded[1]


def _picture(msg: Any, where: str) -> np.ndarray:
    try:
        return decode(bytes(msg.data), type(msg).__name__, str(getattr(msg, "encoding", "")),
                      int(getattr(msg, "height", 0)), int(getattr(msg, "width", 0)), int(getattr(msg, "step", 0)))
    except ValueError as exc:
        raise VideoBagError(f"{where}: {exc}") from None


def _stamp(msg: Any, log_ns: int) -> int:
    stamp = msg.header.stamp
    value = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
    return value or log_ns


def frames(plan: BagPlan) -> Iterator[Frame]:
    """Pass two: every frame of every clip in time order, each camera's picture matched to the frame's stamp."""
    by_topic = {topic: camera for camera, topic in plan.cameras.items()}
    others = {camera: _Camera() for camera in plan.cameras if camera != plan.clock}
    pending: tuple[int, int, int, Any] | None = None  # clip, stamp, log time, the clock camera's message

    def emit(clip: int, stamp: int, log_ns: int, msg: Any) -> Frame:
        where = f"{plan.path}: {plan.cameras[plan.clock]} at {log_ns} ns"
        images: dict[str, np.ndarray | None] = {plan.clock: _picture(msg, where)}
        for camera, state in others.items():
            state.take_until(stamp)
            images[camera] = state.picture(f"{plan.path}: {plan.cameras[camera]}")
        return Frame(clip, stamp, log_ns, images)

    try:
        with _reader(plan.path) as reader:
            wanted = [c for c in reader.connections if c.topic in by_topic]
            for conn, t, raw in reader.messages(connections=wanted):
                camera = by_topic[conn.topic]
                msg = reader.deserialize(raw, conn.msgtype)
                stamp = _stamp(msg, int(t))
                if camera != plan.clock:
                    others[camera].add(stamp, msg)
                    continue
                if pending is not None:
                    yield emit(*pending)
                    pending = None
                clip = next((k for k, c in enumerate(plan.clips) if c.holds(int(t))), None)
                if clip is not None:
                    pending = (clip, stamp, int(t), msg)
            if pending is not None:
                yield emit(*pending)
    except VideoBagError:
        raise
    except Exception as exc:
        raise VideoBagError(f"{plan.path}: cannot read its pictures ({type(exc).__name__}: {exc})") from None
