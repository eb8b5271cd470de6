"""Messages ↔ core types: stamps, joint vectors, images, TF transforms and object markers.

Kept free of node state so every node converts the same way, and exactly: poses travel as float64
in ``geometry_msgs`` and joint values as float64 in ``sensor_msgs/JointState``, so the scorer and the
policy see the very numbers the simulator produced (the headless-equals-ROS guarantee rests on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.contract import ACTION_DIM, JOINT_NAMES, WORLD_FRAME

#: A vector argument: a list or a NumPy array of floats.
Floats = Sequence[float] | np.ndarray

NS_PER_S = 1_000_000_000
#: TF child frame of a ground-truth object: ``object/<name>`` (a frame per layout object).
OBJECT_FRAME_PREFIX = "object/"


class MessageError(ValueError):
    """A message does not carry what the contract says (wrong joint names, wrong image size, ...)."""


# -- time --------------------------------------------------------------------------------------------
def stamp_ns(stamp: Time) -> int:
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def time_msg(ns: int) -> Time:
    return Time(sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))


# -- joints ------------------------------------------------------------------------------------------
def joint_state_msg(vector: Floats, ns: int) -> JointState:
    msg = JointState(name=list(JOINT_NAMES), position=[float(v) for v in vector])
    msg.header.stamp = time_msg(ns)
    return msg


def joint_vector(msg: JointState) -> np.ndarray:
    """The 14-vector of a JointState: by name when names are given, else in contract order."""
    if not msg.name:
        vector = np.asarray(msg.position, dtype=np.float64)
        if vector.shape != (ACTION_DIM,):
            raise MessageError(f"joint state: {vector.size} unnamed positions; expected {ACTION_DIM}")
        return vector
    if len(msg.name) != len(msg.position):
        raise MessageError(f"joint state: {len(msg.name)} names but {len(msg.position)} positions")
    index = dict(zip(msg.name, msg.position, strict=True))
    missing = [n for n in JOINT_NAMES if n not in index]
    if missing:
        raise MessageError(f"joint state: missing joints {', '.join(missing)}")
    return np.array([index[name] for name in JOINT_NAMES], dtype=np.float64)


# -- images ------------------------------------------------------------------------------------------
def image_msg(pixels: np.ndarray, ns: int, frame_id: str) -> Image:
    """rgb8 for uint8 (H, W, 3); 32FC1 for float32 (H, W) depth in metres."""
    msg = Image()
    msg.header.stamp = time_msg(ns)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    if pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3:
        msg.encoding, msg.step = "rgb8", msg.width * 3
    elif pixels.dtype == np.float32 and pixels.ndim == 2:
        msg.encoding, msg.step = "32FC1", msg.width * 4
    else:
        raise MessageError(f"image: unsupported pixels {pixels.dtype} {pixels.shape}")
    msg.data = np.ascontiguousarray(pixels).tobytes()
    return msg


def image_array(msg: Image) -> np.ndarray:
    """uint8 (H, W, 3) of an rgb8 (or bgr8) image message."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise MessageError(f"image: encoding {msg.encoding!r}; expected rgb8")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    rgb = rows[:, : msg.width * 3].reshape(msg.height, msg.width, 3)
    return rgb[..., ::-1].copy() if msg.encoding == "bgr8" else rgb


def camera_info_msg(info: Mapping[str, Any], ns: int) -> CameraInfo:
    """A CameraInfo from a camera_info YAML body (``calibration/sim/<camera>.yaml``)."""
    msg = CameraInfo()
    msg.header.stamp = time_msg(ns)
    msg.header.frame_id = str(info["frame_id"])
    msg.width, msg.height = int(info["image_width"]), int(info["image_height"])
    msg.distortion_model = str(info["distortion_model"])
    msg.d = [float(v) for v in info["distortion_coefficients"]["data"]]
    msg.k = [float(v) for v in info["camera_matrix"]["data"]]
    msg.r = [float(v) for v in info["rectification_matrix"]["data"]]
    msg.p = [float(v) for v in info["projection_matrix"]["data"]]
    return msg


# -- poses -------------------------------------------------------------------------------------------
def transform_msg(parent: str, child: str, position: Floats, quat_wxyz: Floats,
                  ns: int) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = time_msg(ns)
    msg.header.frame_id = parent
    msg.child_frame_id = child
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = (float(v) for v in position)
    r.w, r.x, r.y, r.z = (float(v) for v in quat_wxyz)
    return msg


def object_frame(name: str) -> str:
    return f"{OBJECT_FRAME_PREFIX}{name}"


def objects_from_transforms(transforms: Iterable[TransformStamped]
                            ) -> dict[int, dict[str, tuple[list[float], list[float]]]]:
    """Ground-truth object poses in ``world`` found in a TF message, grouped by stamp (ns)."""
    out: dict[int, dict[str, tuple[list[float], list[float]]]] = {}
    for tf in transforms:
        if tf.header.frame_id != WORLD_FRAME or not tf.child_frame_id.startswith(OBJECT_FRAME_PREFIX):
            continue
        t, r = tf.transform.translation, tf.transform.rotation
        out.setdefault(stamp_ns(tf.header.stamp), {})[tf.child_frame_id[len(OBJECT_FRAME_PREFIX):]] = (
            [t.x, t.y, t.z], [r.w, r.x, r.y, r.z])
    return out


def object_markers_msg(poses: Mapping[str, tuple[Floats, Floats]], ns: int) -> MarkerArray:
    """``/robofollow/objects``: one marker per object, ``ns`` = object name, pose in ``world``."""
    markers = []
    for i, (name, (position, quat)) in enumerate(poses.items()):
        m = Marker(ns=name, id=i, type=Marker.SPHERE, action=Marker.ADD)
        m.header.stamp = time_msg(ns)
        m.header.frame_id = WORLD_FRAME
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in position)
        m.pose.orientation.w, m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z = (
            float(v) for v in quat)
        m.scale.x = m.scale.y = m.scale.z = 0.03
        m.color.a = 1.0
        markers.append(m)
    return MarkerArray(markers=markers)


def objects_from_markers(msg: MarkerArray) -> tuple[int, dict[str, list[float]], dict[str, list[float]]]:
    """(stamp ns, positions, quaternions w-first) of the tracked objects; deleted markers are skipped."""
    positions: dict[str, list[float]] = {}
    quats: dict[str, list[float]] = {}
    stamp = 0
    for m in msg.markers:
        if m.action != Marker.ADD or not m.ns:
            continue
        if m.header.frame_id not in ("", WORLD_FRAME):
            raise MessageError(f"objects: marker {m.ns!r} is in frame {m.header.frame_id!r}; expected world")
        stamp = max(stamp, stamp_ns(m.header.stamp))
        p, q = m.pose.position, m.pose.orientation
        positions[m.ns] = [p.x, p.y, p.z]
        quats[m.ns] = [q.w, q.x, q.y, q.z]
    return stamp, positions, quats
