"""The rig's figures beside its URDF, read from ``config/robot/rig.yaml``.

Everything rig-specific that is not in the URDF (home pose, which links are TCPs and cameras,
gripper travel, drive gains, planner limits) lives in that YAML, so a rig with other arms swaps
in its own URDF and YAML and no code changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import ARMS, CAMERA_NAMES
from robofollow_ros.paths import share_path
from robofollow_ros.yamlio import read_yaml_mapping

DEFAULT_RIG_CONFIG = share_path("config", "robot", "rig.yaml")


class RigConfigError(ValueError):
    """A rig YAML that cannot be used; the message names the field and the value."""


@dataclass(frozen=True)
class DriveGains:
    stiffness: float
    damping: float
    force_limit: float


@dataclass(frozen=True)
class RigConfig:
    urdf_path: Path
    home: dict[str, tuple[float, ...]]
    tcp_links: dict[str, str]
    gripper_joints: dict[str, tuple[str, ...]]
    gripper_travel: float
    fingertip_offset: float
    camera_links: dict[str, str]
    camera_fovy: dict[str, float]
    max_velocity: float
    max_acceleration: float
    gripper_full_stroke_steps: int
    arm_drive: DriveGains
    gripper_drive: DriveGains
    finger_friction: float

    def home_vector(self) -> np.ndarray:
        """The 14-value home vector (grippers open), in the contract's joint order."""
        return np.array([*self.home["left"], 1.0, *self.home["right"], 1.0], dtype=np.float64)


def _require(data: dict[str, Any], key: str, source: Path) -> Any:
    if key not in data:
        raise RigConfigError(f"{source}: missing field {key!r}")
    return data[key]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and bool(np.isfinite(value))


def _positive(value: Any, field: str, source: Path) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RigConfigError(f"{source}: field {field!r} must be a number, got {value!r}") from None
    if not (np.isfinite(number) and number > 0):
        raise RigConfigError(f"{source}: field {field!r} must be a finite number > 0, got {value!r}")
    return number


def _per_arm(data: dict[str, Any], key: str, source: Path) -> dict[str, Any]:
    value = _require(data, key, source)
    if not isinstance(value, dict) or set(value) != set(ARMS):
        raise RigConfigError(f"{source}: field {key!r} must map exactly {list(ARMS)}, got {value!r}")
    return value


def _gains(data: dict[str, Any], key: str, source: Path) -> DriveGains:
    value = _require(data, key, source)
    fields = ("stiffness", "damping", "force_limit")
    if not isinstance(value, dict):
        raise RigConfigError(f"{source}: field 'drives.{key}' must be a mapping, got {value!r}")
    return DriveGains(*(_positive(value.get(f), f"drives.{key}.{f}", source) for f in fields))


def load_rig_config(path: Path | str | None = None) -> RigConfig:
    """Read and check a rig YAML; relative paths inside it are relative to the file."""
    source = Path(path) if path is not None else DEFAULT_RIG_CONFIG
    if not source.is_file():
        raise RigConfigError(f"rig config: no such file {str(source)!r}")
    data = read_yaml_mapping(source, "rig config", RigConfigError)
    urdf = (source.parent / str(_require(data, "urdf", source))).resolve()
    if not urdf.is_file():
        raise RigConfigError(f"{source}: field 'urdf' names a missing file {str(urdf)!r}")
    home: dict[str, tuple[float, ...]] = {}
    for arm, values in _per_arm(data, "home", source).items():
        if not isinstance(values, list) or len(values) != 6 or not all(_is_number(v) for v in values):
            raise RigConfigError(f"{source}: field 'home.{arm}' must list 6 joint angles, got {values!r}")
        home[arm] = tuple(float(v) for v in values)
    cameras = _require(data, "camera_links", source)
    if not isinstance(cameras, dict) or set(cameras) != set(CAMERA_NAMES):
        raise RigConfigError(f"{source}: field 'camera_links' must map exactly {list(CAMERA_NAMES)}, got {cameras!r}")
    fovy = _require(data, "camera_fovy", source)
    if not isinstance(fovy, dict) or set(fovy) != set(CAMERA_NAMES):
        raise RigConfigError(f"{source}: field 'camera_fovy' must map exactly {list(CAMERA_NAMES)}, got {fovy!r}")
    drives = _require(data, "drives", source)
    if not isinstance(drives, dict):
        raise RigConfigError(f"{source}: field 'drives' must be a mapping, got {drives!r}")
    return RigConfig(
        urdf_path=urdf,
        home=home,
        tcp_links={arm: str(v) for arm, v in _per_arm(data, "tcp_links", source).items()},
        gripper_joints={arm: tuple(str(j) for j in v) for arm, v in _per_arm(data, "gripper_joints", source).items()},
        gripper_travel=_positive(_require(data, "gripper_travel", source), "gripper_travel", source),
        fingertip_offset=_positive(_require(data, "fingertip_offset", source), "fingertip_offset", source),
        camera_links={name: str(v) for name, v in cameras.items()},
        camera_fovy={name: _positive(v, f"camera_fovy.{name}", source) for name, v in fovy.items()},
        max_velocity=_positive(_require(data, "max_velocity", source), "max_velocity", source),
        max_acceleration=_positive(_require(data, "max_acceleration", source), "max_acceleration", source),
        gripper_full_stroke_steps=int(_positive(_require(data, "gripper_full_stroke_steps", source),
                                                "gripper_full_stroke_steps", source)),
        arm_drive=_gains(drives, "arm", source),
        gripper_drive=_gains(drives, "gripper", source),
        finger_friction=_positive(_require(data, "finger_friction", source), "finger_friction", source),
    )
