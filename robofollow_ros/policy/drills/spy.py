"""``spy``: a drill that writes down exactly what it is handed, so a user (and the test suite) can check
which keys reach a policy on each path: in process, behind ``robofollow serve`` (TCP or openpi), in the
ROS ``policy_node``.

    robofollow serve --policy robofollow_ros.policy.drills.spy:spy --kwargs '{"record": "/tmp/seen.jsonl"}'

Every ``predict`` appends one JSON line to ``record``: ``keys``, every key path of the observation down
to its leaves (``observation.head_camera.rgb``, ``joint_action.vector``, ``instruction``,
``privileged.objects.red_cylinder`` ...), and ``leaves``, what each leaf is (``uint8 (240, 320, 3)``,
``float64 (14,)``, ``str``, ``None``). It then holds still like ``hold``. One ``os.write`` per line, in
append mode, so the workers and connections of one run can share a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.interface import Observation


def leaves(value: Any, prefix: str = "") -> dict[str, str]:
    """Every leaf of a nested mapping by its dotted key path, with what it is. A mapping with no keys is
    a leaf of its own (``{}``)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(leaves(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: _kind(value)}


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} {value.shape}"
    if value is None:
        return "None"
    if isinstance(value, Mapping):
        return "{}"
    return type(value).__name__


class SpyPolicy(HoldPolicy):
    """``hold`` that records every observation's key paths to ``record`` (see the module docstring).

    ``needs_privileged`` makes it declare privileged state, as the ``oracle`` does (a drill of this
    package: the declaration is honoured in process)."""

    shareable = False

    def __init__(self, record: str, chunk_size: int = 5, needs_privileged: bool = False) -> None:
        super().__init__(chunk_size)
        self.record = str(record)
        self.needs_privileged = bool(needs_privileged)

    def predict(self, obs: Observation) -> np.ndarray:
        seen = leaves(obs)
        line = json.dumps({"keys": sorted(seen), "leaves": seen}) + "\n"
        fd = os.open(self.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
        return super().predict(obs)


def spy(**kwargs: Any) -> SpyPolicy:
    """Factory for ``module:function`` specs."""
    return SpyPolicy(**kwargs)


def read_record(path: str) -> list[dict[str, Any]]:
    """The lines a spy wrote, in order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
