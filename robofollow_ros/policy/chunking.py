"""Compatibility path: chunk execution moved to :mod:`robofollow_ros.policy.execution`.

Import from there; these names are re-exported so that existing callers keep working.
"""

from robofollow_ros.policy.execution.stamped import AsyncChunkExecutor, AsyncStats, StampedAction, Submit
from robofollow_ros.policy.execution.sync import SyncChunkExecutor

__all__ = ["AsyncChunkExecutor", "AsyncStats", "StampedAction", "Submit", "SyncChunkExecutor"]
