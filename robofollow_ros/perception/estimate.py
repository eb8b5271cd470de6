"""3-D pose of a grounded detection: the identity's known shape turns surface points into a centre.

From above and in front, every benchmark object shows its full width along x, its front-most point
(towards the robot and the head camera) and its top. So the centre is x = middle of the x extent,
y = front-most y + the shape's half depth, z = top − the shape's centre-to-top offset; in simulation
this is within about 2 mm (docs/perception.md). Without depth the blob centre's ray meets the plane
of the identity's resting centre height (table-plane mode, coarser; an object in the hand is then
not located correctly).
"""

from __future__ import annotations

import math

import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.identities import IdentityModel


def wrap_yaw(yaw: float, period: float) -> float:
    """Yaw folded into [−period/2, period/2) (a cube repeats every π/2, a bar every π)."""
    return (yaw + period / 2) % period - period / 2


def estimate_yaw(detection: Detection, model: IdentityModel) -> float:
    """Yaw about world z for blocks and slabs (0 for round things or when the top is not seen)."""
    if not model.has_yaw or detection.top_yaw is None:
        return 0.0
    if model.shape == "cube":
        return wrap_yaw(detection.top_yaw, math.pi / 2)
    # A Scene 3 bar has its long side along y at yaw 0.
    return wrap_yaw(detection.top_yaw - math.pi / 2, math.pi)


def _half_depth(model: IdentityModel, yaw: float) -> float:
    if not model.has_yaw or yaw == 0.0:
        return model.half_depth
    # Box footprint: half sizes (hx, hy) recovered from the yaw-0 width and half depth.
    hx, hy = model.width / 2, model.half_depth
    return hx * abs(math.sin(yaw)) + hy * abs(math.cos(yaw))


def estimate_position(detection: Detection, model: IdentityModel, camera: CameraModel,
                      yaw: float = 0.0) -> np.ndarray | None:
    """World position of the identity's pose origin (its centre; a bowl's origin 2 cm above its bottom)."""
    if detection.has_depth:
        assert detection.x_range is not None and detection.y_front is not None and detection.z_top is not None
        x = 0.5 * (detection.x_range[0] + detection.x_range[1])
        y = detection.y_front + _half_depth(model, yaw)
        return np.array([x, y, detection.z_top - model.top_offset])
    centre_z = TABLE_TOP_Z + model.resting_top_height - model.top_offset
    return camera.ray_plane(*detection.centroid_uv, centre_z)


def yaw_quat_wxyz(yaw: float) -> tuple[float, float, float, float]:
    return math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)
