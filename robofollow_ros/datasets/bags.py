"""Recorded trials and teleoperated sessions (ROS 2 bags, MCAP or SQLite) → LeRobot v3.0 episodes.

Read with ``rosbags`` (pure Python CDR), so a bag from ``ros2 bag record`` on the rig converts like
one recorded by ``robofollow``. Topics (standard interfaces only, DESIGN.md "ROS interface"):

- ``/joint_states`` (sensor_msgs/JointState): ``observation.state``, reordered by joint *name*
- ``/robofollow/joint_command`` (sensor_msgs/JointState): ``action``; absent (a teleop bag without
  commands) → the next frame's state, RoboFollow's own convention for training pairs
- ``/cameras/<camera>/image_raw/compressed`` (sensor_msgs/CompressedImage) or
  ``/cameras/<camera>/image_raw`` (sensor_msgs/Image, rgb8/bgr8)
- ``/robofollow/trial`` (std_msgs/String, JSON with ``id`` (``contract.TRIAL_ID_KEY``), ``phase``,
  ``instruction``): one episode per trial, its ``running`` phase; without it, the whole bag is one episode
- ``/robofollow/instruction`` (std_msgs/String): the task when trials do not name one
- ``/robofollow/intervention`` (std_msgs/Bool, the arm bridge's takeover tag, one per joint-state frame):
  the ``intervention`` feature (true where teleoperation drove the frame); a bag without it has none

Frames are resampled at ``fps`` on the time the data refer to: each message's header stamp (the
receive time, the bag's log time, only for a message stamped zero). Each stream contributes its
latest message at or before the frame time (sample and hold), and a frame is kept only once every
stream has spoken. Stamps, not log times: a simulated trial on the graph runs on sim time
(``use_sim_time``), which stands still while the policy thinks and the cameras render, so the
recorder's receive times measure the computer, not the robot; on the rig the stamps are the drivers'
measurement times. A trial's running phase (headerless JSON) is placed by the ``start_stamp_ns`` /
``end_stamp_ns`` the trial manager puts in its messages, else by its receive time shifted by the
joint states' typical offset between stamp and receive time (their median: one shift for the start
and the end, so an episode keeps its length).

Refused, in one line naming the bag (``BagError``), rather than written as a poor episode: a bag that
says it was recorded at the policy rate (``monitoring.rates``: cameras once per policy call), or at a
control rate below ``fps``; and an episode that a stream (joint states or a camera) covers for less than
``MIN_COVERAGE`` of its frames because its first message came late: the episode would start late.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import (
    CAMERA_NAMES,
    JOINT_NAMES,
    TOPIC_INSTRUCTION,
    TOPIC_INTERVENTION,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_TRIAL,
    TRIAL_ID_KEY,
)
from robofollow_ros.monitoring import rates

RUNNING = "running"
#: The share of an episode's frames every stream must cover (from its first message on).
MIN_COVERAGE = 0.9


class BagError(ValueError):
    """A bag cannot be converted; the message names the bag and what is missing."""


@dataclass
class Stream:
    times: list[int] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    #: When each message was received (the bag's log time), for headerless messages' placement.
    received: list[int] = field(default_factory=list)

    def in_time_order(self) -> Stream:
        order = sorted(range(len(self.times)), key=lambda i: self.times[i])  # stable: equal stamps keep order
        return Stream([self.times[i] for i in order], [self.values[i] for i in order],
                      [self.received[i] for i in order])

    def at(self, t: int) -> Any:
        """The latest value at or before ``t`` (None before the first)."""
        i = bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else None


@dataclass
class BagEpisode:
    task: str
    state: np.ndarray
    action: np.ndarray
    images: dict[str, np.ndarray]
    provenance: dict[str, Any]
    #: Per frame, true where teleoperation drove it; None when the bag has no /robofollow/intervention.
    intervention: np.ndarray | None = None


def joint_vector(names: list[str], positions: Any, where: str) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in JOINT_NAMES if n not in index]
    if missing:
        raise BagError(f"{where}: joint {missing[0]!r} is not in the message's names {list(names)[:16]}")
    return np.asarray([positions[index[n]] for n in JOINT_NAMES], dtype=np.float32)


def decode_image(msg: Any, msgtype: str) -> np.ndarray:
    import cv2

    if msgtype.endswith("CompressedImage"):
        bgr = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise BagError(f"CompressedImage format {msg.format!r}: cannot decode")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if msg.encoding not in ("rgb8", "bgr8"):
        raise BagError(f"Image encoding {msg.encoding!r}: expected rgb8 or bgr8")
    rows = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)
    rgb = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return rgb[..., ::-1].copy() if msg.encoding == "bgr8" else rgb.copy()


def bag_custom_data(path: Path) -> dict[str, str]:
    """The bag's rosbag2 ``custom_data``: from ``metadata.yaml`` (a bag directory) or from the ``rosbag2``
    metadata record of a single MCAP; empty when it has none (or the file was cut before its end)."""
    import yaml

    path = Path(path)
    try:
        if path.is_dir():
            doc = yaml.safe_load((path / "metadata.yaml").read_text())
        else:
            from mcap.reader import make_reader

            with path.open("rb") as f:
                records = [m for m in make_reader(f).iter_metadata() if m.name == "rosbag2"]
            if not records:
                return {}
            doc = yaml.safe_load(records[-1].metadata.get("serialized_metadata", ""))
    except Exception:  # unreadable here: read_streams names what is wrong with the bag
        return {}
    if not isinstance(doc, dict):
        return {}
    info = doc.get("rosbag2_bagfile_information", doc)
    custom = info.get("custom_data") if isinstance(info, dict) else None
    return {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {}


def check_record_rate(path: Path, fps: int) -> None:
    """Refuse a bag recorded at the policy rate, or at a control rate below ``fps`` (``monitoring.rates``)."""
    rate, hz = rates.recorded_rate(bag_custom_data(path))
    if rate == rates.POLICY:
        raise BagError(f"{path}: recorded at the policy rate (cameras only when the policy was called, its rows "
                       f"as commands), so its frames would be stale; record with `robofollow eval --record "
                       f"--record-rate {rates.control_hz_for(fps)}`")
    if rate == rates.CONTROL and hz is not None and hz < fps:
        raise BagError(f"{path}: recorded at {hz} Hz, below --fps {fps}: frames would repeat; export with "
                       f"--fps {hz} or record with a higher --record-rate")


def read_streams(path: Path) -> dict[str, Stream]:
    """Every stream the export uses, by role: state, command, camera names, trial, instruction."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    wanted = {TOPIC_JOINT_STATES: "state", TOPIC_JOINT_COMMAND: "command", TOPIC_TRIAL: "trial",
              TOPIC_INSTRUCTION: "instruction", TOPIC_INTERVENTION: "intervention"}
    for camera in CAMERA_NAMES:
        wanted[f"/cameras/{camera}/image_raw/compressed"] = camera
        wanted[f"/cameras/{camera}/image_raw"] = camera
    streams: dict[str, Stream] = {}
    try:
        with AnyReader([Path(path)], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
            connections = [c for c in reader.connections if c.topic in wanted]
            compressed = {c.topic.rsplit("/", 2)[0] for c in connections if c.topic.endswith("/compressed")}
            for conn, t, raw in reader.messages(connections=connections):
                if conn.topic.endswith("/image_raw") and conn.topic in compressed:
                    continue  # both present: the compressed stream is the recording's images
                role = wanted[conn.topic]
                msg: Any = reader.deserialize(raw, conn.msgtype)
                where = f"{path}: {conn.topic} at {t} ns"
                if role in ("state", "command"):
                    value: Any = joint_vector(list(msg.name), msg.position, where)
                elif role == "trial":
                    value = json.loads(msg.data)
                elif role == "instruction":
                    value = str(msg.data)
                elif role == "intervention":
                    value = bool(msg.data)
                else:
                    value = decode_image(msg, conn.msgtype)
                stamp = _header_stamp(msg) if role not in ("trial", "instruction", "intervention") else 0
                stream = streams.setdefault(role, Stream())
                stream.times.append(stamp or int(t))
                stream.values.append(value)
                stream.received.append(int(t))
    except BagError:
        raise
    except Exception as exc:  # rosbags raises its own error types for unreadable bags
        raise BagError(f"{path}: not a readable ROS 2 bag ({type(exc).__name__}: {exc})") from None
    for role in ("state", *CAMERA_NAMES):
        if role not in streams:
            topic = TOPIC_JOINT_STATES if role == "state" else f"/cameras/{role}/image_raw[/compressed]"
            raise BagError(f"{path}: no messages on {topic}")
    return {role: stream.in_time_order() for role, stream in streams.items()}


def _header_stamp(msg: Any) -> int:
    header = getattr(msg, "header", None)
    if header is None:
        return 0
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _stamp_offset(state: Stream) -> int:
    """The joint states' median offset from receive time to stamp: where headerless messages (trial
    phases) fall on the stamps' time line."""
    return int(np.median(np.asarray(state.times, dtype=np.int64) - np.asarray(state.received, dtype=np.int64)))


def spans(streams: dict[str, Stream], task: str | None, path: Path) -> list[tuple[int, int, str, str]]:
    """(start ns, end ns, instruction, label) of each episode in the bag."""
    trial = streams.get("trial")
    instruction = streams.get("instruction")
    out = []
    if trial is not None:
        state = streams["state"]
        offset = _stamp_offset(state)

        def stamp(value: dict[str, Any], key: str, received: int) -> int:
            given = value.get(key)
            return int(given) if isinstance(given, int) and given > 0 else received + offset

        ends: dict[Any, dict[str, Any]] = {}  # the trial manager's end stamp comes with the scoring phase
        for value in trial.values:
            if isinstance(value.get("end_stamp_ns"), int):
                ends.setdefault(value.get(TRIAL_ID_KEY), value)
        current: dict[str, Any] | None = None
        for t, value in zip(trial.received, trial.values, strict=True):
            if current is not None and (value.get(TRIAL_ID_KEY) != current["id"] or value.get("phase") != RUNNING):
                end = stamp(ends.get(current["id"], {}), "end_stamp_ns", t)
                out.append((current["t"], end, current["instruction"], str(current["id"])))
                current = None
            if value.get("phase") == RUNNING and current is None:
                words = value.get("instruction") or (instruction.at(t) if instruction else None) or task
                current = {"t": stamp(value, "start_stamp_ns", t), "id": value.get(TRIAL_ID_KEY), "instruction": words}
        if current is not None:
            out.append((current["t"], state.times[-1], current["instruction"], str(current["id"])))
    else:
        start, end = streams["state"].times[0], streams["state"].times[-1]
        words = task or (instruction.values[-1] if instruction else None)
        out.append((start, end, words, path.name))
    for _, _, words, label in out:
        if not words:
            raise BagError(f"{path}: episode {label} has no instruction (no /robofollow/instruction; pass --task)")
    return out


def _intervention(streams: dict[str, Stream], times: list[int]) -> np.ndarray | None:
    """The takeover tag of each frame: the tag (headerless, placed by its receive time shifted by the joint
    states' stamp offset) at or before it; False before the first. None when the bag has no tags."""
    tags = streams.get("intervention")
    if tags is None:
        return None
    offset = _stamp_offset(streams["state"])
    return np.asarray([bool(tags.at(t - offset)) for t in times], dtype=bool)


def check_coverage(path: Path, streams: dict[str, Stream], start: int, end: int, dt: int, where: str) -> None:
    """Every stream covers at least ``MIN_COVERAGE`` of the frames from ``start`` to ``end`` (those at or
    after its first message); else the episode would silently start late."""
    grid = range(start, end + 1, dt)
    frames = len(grid) - 1  # the last time only gives the last frame's action
    for role in ("state", *CAMERA_NAMES):
        first = streams[role].times[0]
        covered = sum(1 for t in grid[:-1] if t >= first)
        if covered < MIN_COVERAGE * frames:
            name = "joint states cover" if role == "state" else f"{role} camera covers"
            raise BagError(f"{path}: {where}: the {name} {covered} of {frames} frames (the first message "
                           f"comes {(first - start) / 1e9:.2f} s after the start), under {MIN_COVERAGE:.0%}: "
                           f"not exported")


def episodes_from_bag(path: Path, fps: int, task: str | None = None) -> Iterator[BagEpisode]:
    check_record_rate(path, fps)
    streams = read_streams(path)
    dt = round(1e9 / fps)
    for start, end, words, label in spans(streams, task, path):
        check_coverage(path, streams, start, end, dt, f"trial {label}" if "trial" in streams else "the session")
        roles = ["state", *CAMERA_NAMES]
        first = max([start] + [streams[r].times[0] for r in roles])
        times = list(range(first, end + 1, dt))
        if len(times) < 2:
            continue
        state = np.stack([streams["state"].at(t) for t in times])
        command = streams.get("command")
        if command is not None and command.at(times[1]) is not None:
            action = np.stack([command.at(t) if command.at(t) is not None else state[0] for t in times[1:]])
        else:
            action = state[1:]
        images = {c: np.stack([streams[c].at(t) for t in times[:-1]]) for c in CAMERA_NAMES}
        intervention = _intervention(streams, times[:-1])
        sizes = {c: v.shape[1:3] for c, v in images.items()}
        if len(set(sizes.values())) != 1:
            raise BagError(f"{path}: cameras differ in size {sizes}; a dataset has one size per feature")
        yield BagEpisode(words, state[:-1], action, images, intervention=intervention, provenance=
                         {"source": "ros2-bag", "bag": str(path), "episode": label,
                          "intervened_frames": None if intervention is None else int(intervention.sum()),
                          "trial": label if "trial" in streams else None, "start_ns": first,
                          "frames": len(times) - 1, "action_from": "command" if command is not None else "next state"})
