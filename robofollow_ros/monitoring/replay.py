"""Re-score an MCAP recording through the StageMonitor, also when the recording was cut short.

A trial's recording carries every scorer frame on ``/robofollow/frame`` (the exact input the live
StageMonitor got) and, when the trial finished, the live result on ``/robofollow/result``. Replay
feeds the frames to a fresh monitor, so its result equals the live one (there is one scorer).

Both forms are read: the ROS 2 bags written now (``std_msgs/String`` in CDR, decoded with the
schema stored in the file by ``mcap_ros2``) and the earlier Foxglove-schema recordings (JSON channels).

A process killed mid-trial leaves a file without summary, footer and maybe with a half-written
record at the end. The reader therefore streams records from the start (``mcap``'s
``StreamReader``, which needs no summary) and stops at the first record it cannot read, keeping
everything before it; ``Recording.truncated`` says that happened and why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.records import Channel, Message, Schema
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory

from robofollow_ros.benchmark import Registry, UnknownTaskError, default_registry
from robofollow_ros.contract import TRIAL_ID_KEY
from robofollow_ros.monitoring import topics
from robofollow_ros.scoring.frame import TrajectoryError, frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor


class RecordingError(ValueError):
    """A file that is not a readable RoboFollow recording (message names the file and the reason)."""


@dataclass
class Recording:
    """What one trial's MCAP holds for re-scoring."""

    path: Path
    task: str | None = None
    trial: str | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    live_result: dict[str, Any] | None = None
    topics: dict[str, int] = field(default_factory=dict)
    truncated: str | None = None


def read_recording(path: Path) -> Recording:
    """Read the scorer frames, task and live result of a (possibly truncated) trial recording."""
    path = Path(path)
    if not path.is_file():
        raise RecordingError(f"{path}: no such file")
    rec = Recording(path=path)
    channels: dict[int, tuple[str, Callable[[bytes], Any] | None]] = {}
    schemas: dict[int, Schema] = {}
    factory = DecoderFactory()
    frames: dict[int, dict[str, Any]] = {}
    with path.open("rb") as stream:
        try:
            for record in StreamReader(stream, record_size_limit=1 << 30).records:
                if isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, Channel):
                    channels[record.id] = (record.topic, _text_decoder(record, schemas.get(record.schema_id), factory))
                elif isinstance(record, Message):
                    topic, decode = channels.get(record.channel_id, ("?", None))
                    rec.topics[topic] = rec.topics.get(topic, 0) + 1
                    if decode is not None and topic in _SCORED_TOPICS:
                        _take(rec, frames, topic, decode(record.data))
        except RecordingError:
            raise
        except Exception as exc:  # a cut-off file ends in a partial record: keep what came before
            if not rec.topics and not channels:
                raise RecordingError(f"{path}: not an MCAP recording ({type(exc).__name__}: {exc})") from None
            rec.truncated = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # Frames are indexed; a gap (a lost chunk) ends what can be re-scored exactly.
    index = 0
    while index in frames:
        rec.frames.append(frames[index])
        index += 1
    if len(rec.frames) != len(frames) and rec.truncated is None:
        rec.truncated = f"frame {index} missing"
    return rec


_SCORED_TOPICS = (topics.FRAME, topics.TRIAL, topics.RESULT)


def _text_decoder(channel: Channel, schema: Schema | None, factory: DecoderFactory) -> Callable[[bytes], Any] | None:
    """The JSON text of a scored topic's message: JSON channels (earlier recordings) or std_msgs/String (CDR)."""
    if channel.topic not in _SCORED_TOPICS:
        return None
    if channel.message_encoding == "json":
        return lambda data: data
    decode = factory.decoder_for(channel.message_encoding, schema)
    if decode is None or schema is None or schema.name not in ("std_msgs/msg/String", "std_msgs/String"):
        raise RecordingError(f"{channel.topic}: expected JSON or std_msgs/msg/String, got {channel.message_encoding} "
                             f"{schema.name if schema else 'without a schema'}")
    return lambda data: decode(data).data


def _take(rec: Recording, frames: dict[int, dict[str, Any]], topic: str, data: bytes | str) -> None:
    if topic == topics.FRAME:
        msg = json.loads(data)
        rec.task = rec.task or msg["task"]
        rec.trial = rec.trial or msg.get("trial")
        frames[int(msg["index"])] = msg["frame"]
    elif topic == topics.TRIAL:
        msg = json.loads(data)
        rec.task = rec.task or msg.get("task")
        rec.trial = rec.trial or msg.get(TRIAL_ID_KEY)
    elif topic == topics.RESULT:
        rec.live_result = json.loads(data)["result"]


def rescore(rec: Recording, registry: Registry | None = None) -> dict[str, Any]:
    """The results.json entry of the recorded frames, from a fresh StageMonitor."""
    if rec.task is None:
        raise RecordingError(f"{rec.path}: no trial state or scorer frame recorded (task unknown)")
    if not rec.frames:
        raise RecordingError(f"{rec.path}: no scorer frames on {topics.FRAME}"
                             + (f" (file truncated: {rec.truncated})" if rec.truncated else ""))
    try:
        monitor = StageMonitor(rec.task, registry or default_registry())
    except UnknownTaskError as exc:
        raise RecordingError(f"{rec.path}: task: {exc}") from None
    for i, raw in enumerate(rec.frames):
        try:
            monitor.update(frame_from_dict(raw, i, monitor.required_objects, monitor.required_quats))
        except (TrajectoryError, KeyError) as exc:
            raise RecordingError(f"{rec.path}: {exc}") from None
    return monitor.result()


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    """The scorer's part of an entry: what replay must reproduce (runner-added fields dropped)."""
    added = {"policy_steps", "rows_executed", "wall_s", "scene", "layout", "seed", "round", "level_tag",
             "base_task_type", "video", "control", "partner", "control_source_task"}
    return {k: v for k, v in result.items() if k not in added}
