"""3-D pose of a grounded detection from the identity's known primitive.

With depth the pose is the robust fit of the identity's primitive to the segment's points
(``primitives.py``), made during grounding. An object whose fitted centre lies within ``SNAP_M`` of
where it rests on the fitted table plane is resting: its height is then the plane's plus its known
centre height, and x, y (and yaw) are refitted with that height fixed, which removes the depth noise
from z and decouples it from x, y. A flat patch (a label) lies on the plane at its pixels' centre.
Without depth the blob centre's ray meets the plane of the identity's resting centre height
(table-plane mode, coarser; an object in the hand is then not located correctly).
"""

from __future__ import annotations

import math

import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.grounding import fit_for, resting_centre_z
from robofollow_ros.perception.identities import IdentityModel
from robofollow_ros.perception.plane import Plane
from robofollow_ros.perception.primitives import fit_primitive

#: A fitted centre this close (m) to the resting height is taken as resting on the plane.
SNAP_M = 0.008


def wrap_yaw(yaw: float, period: float) -> float:
    """Yaw folded into [−period/2, period/2) (a cube repeats every π/2, a bar every π)."""
    return (yaw + period / 2) % period - period / 2


def estimate_pose(detection: Detection, model: IdentityModel, camera: CameraModel, plane: Plane | None
                  ) -> tuple[np.ndarray | None, float]:
    """World position of the identity's pose origin (a bowl's: 2 cm above its bottom) and its yaw."""
    if detection.kind == "solid":
        prim = model.primitive
        fit = fit_for(detection, prim, np.asarray(camera.world_position))
        rest = resting_centre_z(model, plane, fit.position)
        if plane is not None and abs(float(fit.position[2]) - rest) < SNAP_M:
            assert detection.points is not None
            fit = fit_primitive(detection.points, prim, fit.position, fit.yaw, fixed_z=rest, noise=detection.noise_m,
                                origin=np.asarray(camera.world_position))
        yaw = wrap_yaw(fit.yaw, prim.yaw_period) if model.has_yaw else 0.0
        return np.asarray(fit.position, dtype=np.float64), yaw
    if detection.kind == "flat":
        assert detection.plane_xy is not None
        x, y = detection.plane_xy
        table = TABLE_TOP_Z if plane is None else plane.height_at_xy(x, y)
        yaw = 0.0
        if model.has_yaw and detection.flat_yaw is not None:
            yaw = wrap_yaw(detection.flat_yaw, math.pi / 2)
        return np.array([x, y, table + model.top_offset]), yaw
    centre_z = TABLE_TOP_Z + model.resting_top_height - model.top_offset
    return camera.ray_plane(*detection.centroid_uv, centre_z), 0.0


def yaw_quat_wxyz(yaw: float) -> tuple[float, float, float, float]:
    return math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)
