"""What the simulated cameras render: image size, the optional depth and segmentation pictures, clip planes.

Render settings belong to the simulator; the cameras themselves (mounts, intrinsics, optical frames,
calibration files) are part of the rig's description in ``robot.cameras`` and serve the rig too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robofollow_ros.contract import CAMERA_NAMES, DEFAULT_IMAGE_SIZE

#: Clip planes of every simulated camera (m).
NEAR, FAR = 0.01, 10.0


@dataclass(frozen=True)
class CameraSettings:
    """What the world renders: image size and the optional extra pictures."""

    width: int = DEFAULT_IMAGE_SIZE[0]
    height: int = DEFAULT_IMAGE_SIZE[1]
    depth: bool = False
    segmentation: bool = False
    cameras: tuple[str, ...] = field(default=CAMERA_NAMES)

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"camera size: width and height must be positive, got {self.width}x{self.height}")
        unknown = [c for c in self.cameras if c not in CAMERA_NAMES]
        if unknown:
            raise ValueError(f"cameras: unknown camera {unknown[0]!r}; expected some of {CAMERA_NAMES}")
