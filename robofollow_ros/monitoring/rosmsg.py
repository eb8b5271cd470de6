"""ROS 2 messages without ROS: build them, serialize them to CDR and describe their types.

Recordings are ROS 2 bags and the live view speaks the same types, but the headless evaluator has
no rclpy (the core sits below the nodes). ``rosbags`` carries the message definitions of ROS 2 Jazzy (the
release the venv's wheels are) in pure Python: it serializes CDR, prints the ``ros2msg`` definition text a
bag stores as schema, and computes the RIHS01 type hash (tested equal to the hashes of the installed ROS wheels).

Everything here builds messages as ``rosbags`` dataclasses; ``encode`` turns one into bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

#: The ROS distribution whose message definitions we write (and that the ROS wheels are).
ROS_DISTRO = "jazzy"


@lru_cache(maxsize=1)
def typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_JAZZY)


@dataclass(frozen=True)
class RosType:
    """What a bag stores about a message type: name, complete ros2msg definition, type hash."""

    name: str
    definition: str
    type_hash: str


@cache
def ros_type(name: str) -> RosType:
    store = typestore()
    if name not in store.types:
        raise ValueError(f"message type: unknown ROS 2 type {name!r}")
    definition, _md5 = store.generate_msgdef(name, ros_version=2)
    return RosType(name, definition, store.hash_rihs01(name))


def encode(msg: Any) -> bytes:
    """CDR bytes (with the 4-byte encapsulation header) of a message built here."""
    return bytes(typestore().serialize_cdr(msg, msg.__msgtype__))


def decode(data: bytes | memoryview, type_name: str) -> Any:
    return typestore().deserialize_cdr(data, type_name)


Floats = Sequence[float] | np.ndarray


def _t(name: str) -> Any:
    return typestore().types[name]


# -- std / builtin ----------------------------------------------------------------------------------
def stamp(time_ns: int) -> Any:
    return _t("builtin_interfaces/msg/Time")(sec=int(time_ns // 1_000_000_000), nanosec=int(time_ns % 1_000_000_000))


def header(time_ns: int, frame_id: str = "") -> Any:
    return _t("std_msgs/msg/Header")(stamp=stamp(time_ns), frame_id=frame_id)


def string(text: str) -> Any:
    return _t("std_msgs/msg/String")(data=text)


def float64_array(values: Sequence[float], label: str = "") -> Any:
    dim = _t("std_msgs/msg/MultiArrayDimension")(label=label, size=len(values), stride=len(values))
    layout = _t("std_msgs/msg/MultiArrayLayout")(dim=[dim], data_offset=0)
    return _t("std_msgs/msg/Float64MultiArray")(layout=layout, data=np.asarray(values, dtype=np.float64))


# -- robot ---------------------------------------------------------------------------------------------
def joint_state(time_ns: int, names: Sequence[str], positions: Sequence[float] | np.ndarray) -> Any:
    empty = np.zeros(0, dtype=np.float64)
    return _t("sensor_msgs/msg/JointState")(header=header(time_ns), name=list(names),
                                            position=np.asarray(positions, dtype=np.float64).reshape(-1),
                                            velocity=empty, effort=empty)


def transform(time_ns: int, parent: str, child: str, xyz: Floats, quat_wxyz: Floats) -> Any:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return _t("geometry_msgs/msg/TransformStamped")(
        header=header(time_ns, parent), child_frame_id=child,
        transform=_t("geometry_msgs/msg/Transform")(translation=vector3(xyz),
                                                    rotation=_t("geometry_msgs/msg/Quaternion")(x=x, y=y, z=z, w=w)))


def tf_message(transforms: Iterable[Any]) -> Any:
    return _t("tf2_msgs/msg/TFMessage")(transforms=list(transforms))


# -- cameras -------------------------------------------------------------------------------------------
def compressed_image(time_ns: int, frame_id: str, data: bytes, fmt: str = "jpeg") -> Any:
    return _t("sensor_msgs/msg/CompressedImage")(header=header(time_ns, frame_id), format=fmt,
                                                 data=np.frombuffer(data, dtype=np.uint8))


def camera_info(time_ns: int, frame_id: str, width: int, height: int, k: np.ndarray) -> Any:
    """A distortion-free pinhole camera (plumb_bob with zero coefficients), P = [K | 0]."""
    k = np.asarray(k, dtype=np.float64).reshape(3, 3)
    roi = _t("sensor_msgs/msg/RegionOfInterest")(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    return _t("sensor_msgs/msg/CameraInfo")(
        header=header(time_ns, frame_id), height=int(height), width=int(width), distortion_model="plumb_bob",
        d=np.zeros(5), k=k.reshape(9), r=np.eye(3).reshape(9), p=np.hstack([k, np.zeros((3, 1))]).reshape(12),
        binning_x=0, binning_y=0, roi=roi)


# -- markers -------------------------------------------------------------------------------------------
def vector3(xyz: Floats) -> Any:
    return _t("geometry_msgs/msg/Vector3")(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def point(xyz: Sequence[float]) -> Any:
    return _t("geometry_msgs/msg/Point")(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def pose(xyz: Sequence[float], quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> Any:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return _t("geometry_msgs/msg/Pose")(position=point(xyz), orientation=_t("geometry_msgs/msg/Quaternion")(
        x=x, y=y, z=z, w=w))


def colour(rgb: Sequence[float], alpha: float = 1.0) -> Any:
    return _t("std_msgs/msg/ColorRGBA")(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=float(alpha))


def marker(time_ns: int, frame_id: str, ns: str, marker_id: int, kind: str, *, xyz: Sequence[float] = (0, 0, 0),
           quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0), scale: Sequence[float] = (1.0, 1.0, 1.0),
           rgba: Sequence[float] = (1.0, 1.0, 1.0, 1.0), points: Sequence[Sequence[float]] = (),
           text: str = "", action: str = "ADD") -> Any:
    """A visualization_msgs/Marker; ``kind`` names the type constant (CUBE, SPHERE, LINE_STRIP, ...)."""
    cls = _t("visualization_msgs/msg/Marker")
    return cls(header=header(time_ns, frame_id), ns=ns, id=int(marker_id), type=getattr(cls, kind),
               action=getattr(cls, action), pose=pose(xyz, quat_wxyz), scale=vector3(scale),
               color=colour(rgba[:3], rgba[3]), lifetime=_t("builtin_interfaces/msg/Duration")(sec=0, nanosec=0),
               frame_locked=False, points=[point(p) for p in points], colors=[], texture_resource="",
               texture=compressed_image(0, "", b"", ""), uv_coordinates=[], text=text, mesh_resource="",
               mesh_file=_t("visualization_msgs/msg/MeshFile")(filename="", data=np.zeros(0, dtype=np.uint8)),
               mesh_use_embedded_materials=False)


def marker_array(markers: Iterable[Any]) -> Any:
    return _t("visualization_msgs/msg/MarkerArray")(markers=list(markers))


# -- logs and states --------------------------------------------------------------------------------------
#: rcl_interfaces/Log levels (the ones ``/rosout`` carries).
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "fatal": 50}


def log(time_ns: int, level: str, name: str, text: str) -> Any:
    if level not in LOG_LEVELS:
        raise ValueError(f"level: expected one of {sorted(LOG_LEVELS)}, got {level!r}")
    return _t("rcl_interfaces/msg/Log")(stamp=stamp(time_ns), level=LOG_LEVELS[level], name=name, msg=text,
                                        file="", function="", line=0)


def diagnostic_status(level: str, name: str, message: str, hardware_id: str, values: dict[str, str]) -> Any:
    cls = _t("diagnostic_msgs/msg/DiagnosticStatus")
    kv = _t("diagnostic_msgs/msg/KeyValue")
    return cls(level=getattr(cls, level), name=name, message=message, hardware_id=hardware_id,
               values=[kv(key=k, value=v) for k, v in values.items()])


def diagnostic_array(time_ns: int, statuses: Iterable[Any]) -> Any:
    return _t("diagnostic_msgs/msg/DiagnosticArray")(header=header(time_ns), status=list(statuses))
