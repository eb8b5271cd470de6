"""Checked reading of a rig YAML's fields: every refusal is one line naming the file, the field and the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import ARMS
from robofollow_ros.robot.rig_model import DriveGains, RigConfigError

Vec3 = tuple[float, float, float]


class Fields:
    """The mapping of one rig YAML, read field by field."""

    def __init__(self, data: dict[str, Any], source: Path) -> None:
        self.data = data
        self.source = source

    def error(self, field: str, message: str, value: Any) -> RigConfigError:
        return RigConfigError(f"{self.source}: field {field!r} {message}, got {value!r}")

    def require(self, key: str) -> Any:
        if key not in self.data:
            raise RigConfigError(f"{self.source}: missing field {key!r}")
        return self.data[key]

    def number(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
            raise self.error(field, "must be a finite number", value)
        return float(value)

    def positive(self, value: Any, field: str) -> float:
        number = self.number(value, field)
        if number <= 0:
            raise self.error(field, "must be a finite number > 0", value)
        return number

    def vector(self, value: Any, field: str, size: int) -> tuple[float, ...]:
        if not isinstance(value, list) or len(value) != size:
            raise self.error(field, f"must list {size} numbers", value)
        return tuple(self.number(v, f"{field}[{i}]") for i, v in enumerate(value))

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(field, "must be a mapping", value)
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(field, "must be a non-empty string", value)
        return value

    def keys(self, value: Any, field: str, allowed: set[str]) -> dict[str, Any]:
        """A mapping whose keys are all in ``allowed``."""
        value = self.mapping(value, field)
        unknown = set(value) - allowed
        if unknown:
            raise self.error(field, f"has unknown keys {sorted(unknown)} (expected some of {sorted(allowed)})", value)
        return value

    def per_arm(self, key: str) -> dict[str, Any]:
        value = self.require(key)
        if not isinstance(value, dict) or set(value) != set(ARMS):
            raise self.error(key, f"must map exactly {list(ARMS)}", value)
        return value

    def gains(self, drives: dict[str, Any], key: str) -> DriveGains:
        value = self.mapping(drives.get(key), f"drives.{key}")
        names = ("stiffness", "damping", "force_limit")
        return DriveGains(*(self.positive(value.get(n), f"drives.{key}.{n}") for n in names))

    def offset(self, value: dict[str, Any], field: str) -> tuple[Vec3, Vec3]:
        """``xyz`` and ``rpy`` of a mapping (each defaults to zeros)."""
        unknown = set(value) - {"link", "xyz", "rpy", "fovy", "calibration", "frame"}
        if unknown:
            raise self.error(field, f"has unknown keys {sorted(unknown)}", value)
        xyz = self.vector(value.get("xyz", [0.0, 0.0, 0.0]), f"{field}.xyz", 3)
        rpy = self.vector(value.get("rpy", [0.0, 0.0, 0.0]), f"{field}.rpy", 3)
        return (xyz[0], xyz[1], xyz[2]), (rpy[0], rpy[1], rpy[2])
