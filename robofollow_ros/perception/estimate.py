"""3-D pose of a grounded detection from the identity's known primitive.

With depth the pose is the robust fit of the identity's primitive to the segment's points
(``primitives.py``): the signed-distance fit made during grounding, refined along the viewing rays.
An object whose fitted centre lies within ``SNAP_M`` of where the layout rests it (on the fitted
table plane, a stack or a bowl), or of standing on the table itself, or below that (a sliver's fit
that sank: no object can be there), is resting: its height is then the plane's plus its known centre
height, and x, y (and yaw) are refitted with that height fixed, which removes the depth noise from z
and decouples it from x, y. A flat patch (a label) lies on the plane at its pixels' centre. Without
depth the blob centre's ray meets the plane of the identity's resting centre height (table-plane
mode, coarser; an object in the hand is then not located correctly).
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
from robofollow_ros.perception.primitives import refine_along_rays

#: A fitted centre this close (m) to the resting height is taken as resting on the plane.
SNAP_M = 0.008


def wrap_yaw(yaw: float, period: float) -> float:
    """Yaw folded into [−period/2, period/2) (a cube repeats every π/2, a bar every π)."""
    return (yaw + period / 2) % period - period / 2


def _resting_height(model: IdentityModel, plane: Plane | None, position: np.ndarray) -> float | None:
    """The height to pin the fit to: where the layout rests it, or on the table itself (an unstacked
    object, or a fit of a sliver that sank below the table, where no object can be); None if neither."""
    if plane is None:
        return None
    z = float(position[2])
    rest = resting_centre_z(model, plane, position)
    if abs(z - rest) < SNAP_M:
        return rest
    on_table = plane.height_at_xy(float(position[0]), float(position[1])) + model.table_centre_height
    if z - on_table < SNAP_M:
        return on_table
    return None


def estimate_pose(detection: Detection, model: IdentityModel, camera: CameraModel, plane: Plane | None
                  ) -> tuple[np.ndarray | None, float]:
    """World position of the identity's pose origin (a bowl's: 2 cm above its bottom) and its yaw."""
    if detection.kind == "solid":
        prim = model.primitive
        origin = np.asarray(camera.world_position)
        fit = fit_for(detection, prim, origin)
        assert detection.points is not None
        previous = detection.refined.get(prim.key)  # last frame's pose of this unchanged segment
        fit = refine_along_rays(detection.points, prim, previous or fit, origin, detection.noise_m,
                                _resting_height(model, plane, fit.position), warm=previous is not None)
        detection.refined[prim.key] = fit
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
