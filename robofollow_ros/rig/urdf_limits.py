"""Joint limits read from the rig's URDF, so the safety filter and the simulator share one source."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JointLimit:
    lower: float
    upper: float
    velocity: float  # rad/s (or m/s for prismatic joints); inf when the URDF gives none


def read_joint_limits(urdf: str | Path) -> dict[str, JointLimit]:
    """Limits of every revolute/prismatic joint of ``urdf`` (a path or the XML text)."""
    text = Path(urdf).read_text() if isinstance(urdf, Path) or not str(urdf).lstrip().startswith("<") else str(urdf)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"urdf: not valid XML ({exc})") from None
    limits: dict[str, JointLimit] = {}
    for joint in root.iter("joint"):
        kind, name = joint.get("type"), joint.get("name")
        if kind not in ("revolute", "prismatic") or name is None:
            continue
        limit = joint.find("limit")
        if limit is None:
            raise ValueError(f"urdf: joint {name!r} of type {kind} has no <limit>")
        limits[name] = JointLimit(
            lower=float(limit.get("lower", "-inf")),
            upper=float(limit.get("upper", "inf")),
            velocity=float(limit.get("velocity", "inf")) or math.inf,
        )
    return limits
