"""Executing action chunks: how the rows a policy returns become one command per control tick.

- ``sync``: :class:`SyncChunkExecutor`, RoboFollow's fixed runtime (predict, execute the first ``k`` rows,
  repeat; the world waits while the policy thinks).
- ``realtime``: :class:`RealtimeChunkExecutor`, for a world that does not wait (the rig, the wall-clock
  sim): one request in flight, stale rows dropped by what was executed, overlapping chunks merged
  (``merge``), delay estimated from measured latency (``delay``), an RTC hint for policies that accept it.
- ``stamped``: :class:`AsyncChunkExecutor`, the first asynchronous executor, superseded by the real-time
  one and kept for its callers.

All are ROS-free and driven by an explicit step counter (and, for latency, an injected clock), never by a
wall clock of their own. ``policy.chunking`` re-exports the older names.
"""

from robofollow_ros.policy.execution.delay import DelayEstimator
from robofollow_ros.policy.execution.merge import MERGE_RULES, MergeRule
from robofollow_ros.policy.execution.realtime import (
    RealtimeChunkExecutor,
    RealtimeStats,
    RtcSubmit,
    Tick,
    policy_submit,
)
from robofollow_ros.policy.execution.stamped import AsyncChunkExecutor, AsyncStats, StampedAction
from robofollow_ros.policy.execution.sync import SyncChunkExecutor

__all__ = [
    "MERGE_RULES",
    "AsyncChunkExecutor",
    "AsyncStats",
    "DelayEstimator",
    "MergeRule",
    "RealtimeChunkExecutor",
    "RealtimeStats",
    "RtcSubmit",
    "StampedAction",
    "SyncChunkExecutor",
    "Tick",
    "policy_submit",
]
