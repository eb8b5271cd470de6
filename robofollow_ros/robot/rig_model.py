"""What a loaded rig is (``RigConfig`` and its parts), apart from how it is read (``rig_description``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

Vec3 = tuple[float, float, float]
#: The built-in rig's workspace box (world frame, m), fitted to its arms over the layouts: the default of a rig
#: YAML without ``workspace``.
BUILT_IN_WORKSPACE: tuple[Vec3, Vec3] = ((-0.6, -0.6, 0.745), (0.6, 0.4, 1.4))


class RigConfigError(ValueError):
    """A rig YAML that cannot be used; the message names the file, the field and the value."""


@dataclass(frozen=True)
class DriveGains:
    stiffness: float
    damping: float
    force_limit: float


@dataclass(frozen=True)
class ArmJoint:
    """Contract joint ``k`` of an arm is the description's joint ``name``: ``lab = offset + sign · contract``."""

    name: str
    sign: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class FingerJoint:
    """A finger joint driven from the normalised gripper g: ``closed + g · (open − closed)``."""

    name: str
    closed: float
    open: float

    def position(self, normalised: float) -> float:
        return self.closed + float(np.clip(normalised, 0.0, 1.0)) * (self.open - self.closed)


@dataclass(frozen=True)
class GripperGeometry:
    """The parallel gripper as OWDA's world model sees it (``decisions/clearance.py``), in metres, in the TCP frame
    (approach, opening axis, across it). Each finger is a box and the palm (everything of the gripper above the
    fingers: the housing, the bar the fingers slide on) is another; each part's box is where its collision shapes
    are, over its whole height. YAML ``gripper_geometry: {...}``, every field given; without it, the built-in
    rig's figures, measured on ``urdf/robofollow_rig.urdf`` (``test_owda_clearance`` measures each rig's in
    SAPIEN)."""

    #: From the TCP to each finger's inner face with the gripper closed, along the opening axis (< 0 where the
    #: closed fingers' shapes cross the TCP's centre line)
    finger_inner_closed: float = 0.002
    #: How far each finger's inner face moves from closed to open
    finger_travel: float = 0.04
    #: Each finger's size along the opening axis
    finger_thickness: float = 0.010
    #: Half each finger's size across the opening axis
    finger_half_across: float = 0.012
    #: How far the fingertips reach beyond the TCP along the approach (down, in a top-down grasp)
    finger_below_tcp: float = 0.04
    #: Half the palm's size along the opening axis, and across it
    palm_half_along: float = 0.05
    palm_half_across: float = 0.02
    #: How far the palm's lowest point is behind the TCP along the approach (above it, in a top-down grasp)
    palm_above_tcp: float = 0.0


@dataclass(frozen=True)
class RigFile:
    """A file the rig was built from, for a run's provenance."""

    path: Path
    sha256: str


@dataclass(frozen=True)
class RigConfig:
    name: str
    source: Path  # the rig YAML
    urdf_path: Path  # the composed URDF the simulator and the kinematics load
    files: tuple[RigFile, ...]  # every file read: the YAML, the description, its meshes, calibration files
    home: dict[str, tuple[float, ...]]  # contract units
    arm_joints: dict[str, tuple[ArmJoint, ...]]
    fingers: dict[str, tuple[FingerJoint, ...]]
    tcp_links: dict[str, str]  # contract frames (``left_tcp``) in the composed URDF
    fingertip_offset: float
    camera_links: dict[str, str]  # contract frames (``head_camera``) in the composed URDF
    camera_fovy: dict[str, float]
    max_velocity: float
    max_acceleration: float
    gripper_full_stroke_steps: int
    arm_drive: DriveGains
    gripper_drive: DriveGains
    finger_friction: float
    #: Distance from the TCP to each finger's inner face, closed and open (m): how wide the expert opens.
    finger_half_gap: tuple[float, float] = (0.0, 0.04)
    #: The driver map its twin and mock hardware play and its arm bridge speaks by default: a preset's name under
    #: ``config/rig/`` or an absolute path; None: ``config/rig/arm_drivers.yaml``.
    driver_config: str | None = None
    #: The box both TCPs must stay in (world frame, m: lower corner, upper corner): the arm bridge's default
    #: ``workspace_min``/``workspace_max``. YAML ``workspace: {min, max}``; without it, the built-in rig's box.
    workspace: tuple[Vec3, Vec3] = BUILT_IN_WORKSPACE
    #: The gripper's fingers and palm as OWDA's world model checks room for them (YAML ``gripper_geometry``)
    gripper_geometry: GripperGeometry = GripperGeometry()

    @property
    def workspace_min(self) -> Vec3:
        return self.workspace[0]

    @property
    def workspace_max(self) -> Vec3:
        return self.workspace[1]

    @property
    def gripper_joints(self) -> dict[str, tuple[str, ...]]:
        return {arm: tuple(f.name for f in fingers) for arm, fingers in self.fingers.items()}

    def home_vector(self) -> np.ndarray:
        """The 14-value home vector (grippers open), in the contract's joint order."""
        return np.array([*self.home["left"], 1.0, *self.home["right"], 1.0], dtype=np.float64)

    def robot_description(self) -> str:
        """The composed URDF with meshes as ``file://`` URLs (``/robot_description``, for RViz and Foxglove)."""
        text = self.urdf_path.read_text(encoding="utf-8")
        return text.replace('filename="/', 'filename="file:///')

    def provenance(self) -> dict[str, object]:
        """What run.json records of the rig: its name, the YAML and every file read with its SHA-256."""
        return {"name": self.name, "config": str(self.source),
                "files": [{"path": str(f.path), "sha256": f.sha256} for f in self.files]}
