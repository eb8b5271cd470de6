"""A still picture of a layout as one of the rig's cameras would frame it, drawn without a renderer.

The mock hardware has no simulator, yet the graph's cameras (policy observations, Foxglove,
recordings) should show the trial's table: the table top and every object's silhouette (the
convex hull of its projected outline, in its colour) are projected through the camera's pinhole
model from the pose the URDF gives the camera at the home joints, far objects first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.contract import TABLE_SIZE_XY, TABLE_TOP_Z
from robofollow_ros.rig.layout_poses import RestPose
from robofollow_ros.robot.bowl import ORIGIN_ABOVE_BOTTOM, BowlGeometry
from robofollow_ros.robot.cameras import BODY_FROM_OPTICAL, intrinsic_matrix

#: The table's centre in the world (x, y); the simulator's table (``sim.scene_objects``) sits there too.
TABLE_CENTRE_XY = (0.0, -0.05)
TABLE_RGB = (184, 158, 128)
BACKGROUND_RGB = (70, 74, 82)
_NEAR = 0.02


def _outline(spec: ObjectSpec, pose: RestPose) -> np.ndarray:
    """Points on the object's surface (world frame) whose projection's hull is its silhouette."""
    angles = np.linspace(0.0, 2 * math.pi, 16, endpoint=False)
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
    if spec.shape == "sphere":
        r = spec.size[0]
        points = np.concatenate([ring * r * math.cos(lat) + [0.0, 0.0, r * math.sin(lat)]
                                 for lat in np.linspace(-1.3, 1.3, 7)])
    elif spec.shape in ("cylinder", "bowl"):
        if spec.shape == "bowl":
            bowl = BowlGeometry(spec.scale)
            r, bottom, top = bowl.outer_radius, -ORIGIN_ABOVE_BOTTOM, bowl.rim_z
        else:
            r, bottom, top = spec.size[0], -spec.size[1], spec.size[1]
        points = np.concatenate([ring * r + [0.0, 0.0, bottom], ring * r + [0.0, 0.0, top]])
    else:
        hx, hy, hz = (spec.size[0],) * 3 if spec.shape == "cube" else spec.size[:3]
        points = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    yaw = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return points @ yaw.T + pose.position


def _project(points: np.ndarray, rotation: np.ndarray, position: np.ndarray, k: np.ndarray) -> np.ndarray | None:
    """Pixels of the points in front of the camera (None when none is); ``rotation`` is the body frame's."""
    optical = rotation @ BODY_FROM_OPTICAL
    local = (points - position) @ optical
    local = local[local[:, 2] > _NEAR]
    if not len(local):
        return None
    return np.stack([k[0, 0] * local[:, 0] / local[:, 2] + k[0, 2], k[1, 1] * local[:, 1] / local[:, 2] + k[1, 2]],
                    axis=1)


def draw_layout_view(layout: Layout, poses: Mapping[str, RestPose], camera_rotation: np.ndarray,
                     camera_position: np.ndarray, width: int, height: int, fovy: float) -> np.ndarray:
    """An (height, width, 3) uint8 RGB picture of the table and the layout's objects."""
    import cv2

    k = intrinsic_matrix(width, height, fovy)
    picture = np.empty((height, width, 3), dtype=np.uint8)
    picture[:] = BACKGROUND_RGB
    (cx, cy), (sx, sy) = TABLE_CENTRE_XY, TABLE_SIZE_XY
    corners = np.array([[cx + dx * sx / 2, cy + dy * sy / 2, TABLE_TOP_Z] for dx, dy in
                        ((-1, -1), (1, -1), (1, 1), (-1, 1))])
    table = _project(corners, camera_rotation, camera_position, k)
    if table is not None and len(table) >= 3:
        cv2.fillConvexPoly(picture, np.round(table).astype(np.int32), TABLE_RGB, lineType=cv2.LINE_AA)
    order = sorted(layout.objects, key=lambda o: -float(np.linalg.norm(poses[o.name].position - camera_position)))
    for spec in order:
        pixels = _project(_outline(spec, poses[spec.name]), camera_rotation, camera_position, k)
        if pixels is None or len(pixels) < 3 or not np.all(np.abs(pixels) < 1e5):
            continue
        hull = cv2.convexHull(np.round(pixels).astype(np.int32))
        colour = tuple(round(255 * float(c)) for c in spec.color_rgb)
        cv2.fillConvexPoly(picture, hull, colour, lineType=cv2.LINE_AA)
        cv2.polylines(picture, [hull], True, tuple(int(c * 0.6) for c in colour), 1, cv2.LINE_AA)
    return picture
