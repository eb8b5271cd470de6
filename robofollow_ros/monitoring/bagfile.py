"""One recording as a ROS 2 bag file: an MCAP with the ``ros2`` profile, as rosbag2's MCAP storage writes it.

What rosbag2 needs to read a single ``.mcap`` (read from ``rosbag2_storage_mcap/src/mcap_storage.cpp``
and ``rosbag2_storage/{yaml.hpp,qos.cpp}`` of ros2/rosbag2; ``ros2 bag`` is not on PyPI, so this is
reasoned from its source, not run):

- ``ros2 bag info FILE.mcap`` without a ``metadata.yaml`` opens the file with the MCAP storage plugin,
  which takes counts and times from the summary's Statistics record and each topic from its Channel
  (``messageEncoding``), its Schema (``name`` = type) and the channel metadata
  ``offered_qos_profiles`` / ``topic_type_hash``;
- it then decodes the Metadata record named ``rosbag2`` (key ``serialized_metadata``: the bag's
  metadata YAML, version 9); without it, QoS strings would be parsed as the older integer form.

The foxglove SDK's MCAP writer does the writing (profile ``ros2``, zstd chunks of ``CHUNK_BYTES``
so a killed process loses at most one chunk); this module adds the per-topic counts and the
``rosbag2`` record at close.

A write that fails (a full disk, a read-only or vanished filesystem) does not raise in the SDK: each
message after it is logged as ``error logging message: McapError(...)`` on the Python logger
``foxglove.log_sink_set`` (hundreds a trial, the first one naming the OS error) and ``close`` raises a
``RuntimeError`` without the cause. :class:`_WriteFailures` takes those lines off the log and keeps the
first one as an ``OSError`` (errno and text of the OS), which the recording raises once -- from
:meth:`BagRecording.check` as soon as it is known, or from :meth:`BagRecording.close` -- so that its
caller reports an unusable output in one line (``rundir.errors``) instead of a traceback.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import foxglove
import yaml
from foxglove.mcap import MCAPWriteOptions, MCAPWriter

from robofollow_ros.monitoring.rosmsg import ROS_DISTRO, ros_type
from robofollow_ros.monitoring.topics import Qos

#: Target uncompressed chunk size: what a killed recording can lose at most (plus the open chunk).
CHUNK_BYTES = 64 * 1024
#: rosbag2 metadata version (9: QoS enums as strings) and storage plugin id.
BAG_VERSION = 9
STORAGE_ID = "mcap"
#: RMW_DURATION_INFINITE as rosbag2 writes it.
_INFINITE = {"sec": 9223372036, "nsec": 854775807}
#: Where the SDK logs a failed write (Rust target ``foxglove::log_sink_set``), and how it names the OS error.
_SINK_LOGGER = "foxglove.log_sink_set"
_OS_ERROR = re.compile(r'McapError\(Io\(Os \{ code: (\d+), kind: \w+, message: "([^"]*)" \}\)\)')


class _WriteFailures(logging.Filter):
    """Keeps the first MCAP write failure of each thread, and keeps the SDK's line per failed message off the log.

    The SDK writes (and so logs) on the thread that logs the message, so the failure belongs to the recording
    that thread is writing; :meth:`BagRecording.check` claims it there."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()
        #: The last OS error of any thread: what a close that failed falls back on (a write on another thread).
        self.last: tuple[int, str] | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "McapError(" not in message:
            return True
        match = _OS_ERROR.search(message)
        if match:
            self.last = (int(match[1]), match[2])
        if getattr(self.local, "failure", None) is None:
            self.local.failure = self.last if match else (errno.EIO, message)
        return False

    def take(self) -> tuple[int, str] | None:
        failure, self.local.failure = getattr(self.local, "failure", None), None
        return failure


_FAILURES = _WriteFailures()
logging.getLogger(_SINK_LOGGER).addFilter(_FAILURES)


def qos_profiles(qos: Qos) -> list[dict[str, Any]]:
    """The ``offered_qos_profiles`` entry of one publisher (rosbag2 metadata version 9)."""
    return [{"history": qos.history, "depth": qos.depth, "reliability": qos.reliability,
             "durability": qos.durability, "deadline": dict(_INFINITE), "lifespan": dict(_INFINITE),
             "liveliness": "automatic", "liveliness_lease_duration": dict(_INFINITE),
             "avoid_ros_namespace_conventions": False}]


def channel_metadata(type_name: str, qos: Qos) -> dict[str, str]:
    """Channel metadata as rosbag2's MCAP storage writes it (QoS as a YAML string, RIHS01 hash)."""
    return {"offered_qos_profiles": yaml.safe_dump(qos_profiles(qos), sort_keys=False),
            "topic_type_hash": ros_type(type_name).type_hash}


@dataclass
class TopicStats:
    type_name: str
    qos: Qos
    count: int = 0


@dataclass
class BagRecording:
    """An open trial recording: the SDK writer plus what the ``rosbag2`` record must say at close."""

    path: Path
    writer: MCAPWriter | None
    topics: dict[str, TopicStats] = field(default_factory=dict)
    start_ns: int | None = None
    end_ns: int | None = None
    #: The first write that failed (errno, the OS's words), once known; raised once, as an ``OSError``.
    failure: OSError | None = None
    _raised: bool = False
    #: The metadata's ``custom_data`` (string to string; e.g. the rate it was recorded at, ``monitoring.rates``).
    custom_data: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path, context: foxglove.Context, custom_data: Mapping[str, str] | None = None) -> BagRecording:
        """Start ``path`` (a re-run trial overwrites its killed recording) on ``context``'s channels."""
        path.parent.mkdir(parents=True, exist_ok=True)
        _FAILURES.take()  # a failure left on this thread belongs to an earlier recording
        options = MCAPWriteOptions(chunk_size=CHUNK_BYTES, profile="ros2")
        return cls(path, foxglove.open_mcap(path, allow_overwrite=True, context=context, writer_options=options),
                   custom_data={str(k): str(v) for k, v in (custom_data or {}).items()})

    def _claim(self) -> None:
        failure = _FAILURES.take()
        if failure is not None and self.failure is None:
            self.failure = OSError(failure[0], failure[1], str(self.path))

    def check(self) -> None:
        """Raise the write failure (an ``OSError`` naming the file) once it is known; nothing more is written."""
        self._claim()
        if self.failure is not None and not self._raised:
            self._raised = True
            raise self.failure

    def declare(self, topic: str, type_name: str, qos: Qos) -> None:
        self.topics.setdefault(topic, TopicStats(type_name, qos))

    def count(self, topic: str, time_ns: int) -> None:
        self.topics[topic].count += 1
        self.start_ns = time_ns if self.start_ns is None else min(self.start_ns, time_ns)
        self.end_ns = time_ns if self.end_ns is None else max(self.end_ns, time_ns)
        self._claim()  # the message just logged was written on this thread

    def close(self) -> None:
        """Finish the file; a write that failed is raised (once) as the ``OSError`` that caused it."""
        writer, self.writer = self.writer, None  # dropped here, while Python runs, whatever happens below
        if writer is None:
            return
        try:
            try:
                writer.write_metadata("rosbag2", {"serialized_metadata": self.serialized_metadata()})
            finally:
                writer.close()  # even after a failed write: a writer dropped open logs "Failed to close" itself
        except RuntimeError as exc:  # "MCAP error: attempted another write after a write method failed", or
            self._claim()             # "I/O error from writing" when the first failed write is this one
            if self.failure is None and _FAILURES.last is not None:
                self.failure = OSError(*_FAILURES.last, str(self.path))
            if self.failure is None and "I/O error" in str(exc):
                self.failure = _io_failure(self.path, str(exc))
            if self.failure is None:
                raise
        self.check()

    def serialized_metadata(self) -> str:
        """The bag's metadata (rosbag2's ``BagMetadata`` YAML, version 9) for the ``rosbag2`` record."""
        return yaml.safe_dump(bag_metadata(self.path.name, self.topics, self.start_ns, self.end_ns, self.custom_data),
                              sort_keys=False)


def _io_failure(path: Path, message: str) -> OSError:
    """The SDK's close failed on I/O without saying why; a full filesystem, the usual reason, can be seen."""
    try:
        if os.statvfs(path.parent).f_bavail == 0:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    except OSError:
        pass
    return OSError(errno.EIO, f"{os.strerror(errno.EIO)} ({message})", str(path))


def bag_metadata(file_name: str, topics: Mapping[str, TopicStats], start_ns: int | None,
                 end_ns: int | None, custom_data: Mapping[str, str] | None = None) -> dict[str, Any]:
    count = sum(t.count for t in topics.values())
    start = start_ns or 0
    duration = (end_ns - start_ns) if start_ns is not None and end_ns is not None else 0
    return {
        "version": BAG_VERSION,
        "storage_identifier": STORAGE_ID,
        "duration": {"nanoseconds": duration},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": count,
        "topics_with_message_count": [
            {"topic_metadata": {"name": name, "type": t.type_name, "serialization_format": "cdr",
                                "offered_qos_profiles": qos_profiles(t.qos),
                                "type_description_hash": ros_type(t.type_name).type_hash},
             "message_count": t.count}
            for name, t in topics.items()],
        "compression_format": "",
        "compression_mode": "",
        "relative_file_paths": [file_name],
        "files": [{"path": file_name, "starting_time": {"nanoseconds_since_epoch": start},
                   "duration": {"nanoseconds": duration}, "message_count": count}],
        "custom_data": dict(custom_data or {}),
        "ros_distro": ROS_DISTRO,
    }
