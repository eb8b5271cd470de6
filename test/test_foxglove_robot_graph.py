"""The robot in Foxglove from the real sim graph: what robot_state_node and sim_node publish is what the
recorder writes and the live server shows.

``robofollow bringup sim`` runs one trial from a terminal (so the live view stays up afterwards); a
Foxglove client then finds the robot's channels and gets the latched robot model and static TF; the
trial's MCAP is read with the independent ``rosbags`` reader as a ROS 2 bag, and its link TF is checked
against the URDF (parsed here with ElementTree) and the recorded joint states: every moving link of both
arms, named as the URDF names it, in its URDF parent, placed as the joint's origin and axis say for the
measured position. A rendered trial's pictures and calibrations carry the cameras' optical frames, which
/tf_static places as REP 103 says and where the pictures show the objects.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.monitoring.ws_client import FoxgloveProbe
from test_bringup_linger import Terminal

TASK = "L0_pickup_red_cylinder"
URDF = Path(__file__).resolve().parents[1] / "urdf" / "robofollow_rig.urdf"
CAMERAS = ("head", "left_wrist", "right_wrist")


def _bringup(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "robofollow_ros.cli", "bringup", "sim", "--tasks", TASK, "--rounds", "1",
            "--max-steps", "1", "--foxglove-port", "0", "--output", str(tmp_path / "run"), *extra]


# -- the URDF, read independently ---------------------------------------------------------------------
def _rpy_matrix(rpy: list[float]) -> np.ndarray:
    r, p, y = rpy
    rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx  # URDF: fixed-axis roll, pitch, yaw


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def _urdf_joints() -> dict[str, dict[str, Any]]:
    joints = {}
    for joint in ET.parse(URDF).getroot().iter("joint"):
        origin = joint.find("origin")
        axis = joint.find("axis")
        joints[joint.get("name")] = {
            "type": joint.get("type"), "parent": joint.find("parent").get("link"),
            "child": joint.find("child").get("link"),
            "xyz": [float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()],
            "rpy": [float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()],
            "axis": [float(v) for v in (axis.get("xyz") if axis is not None else "1 0 0").split()]}
    return joints


def _quat_matrix(q: Any) -> np.ndarray:
    x, y, z, w = q.x, q.y, q.z, q.w
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _stamp(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _read_bag(path: Path) -> dict[str, list[Any]]:
    """Every message of the bag by topic, deserialized by rosbags (the independent ROS 2 reader)."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    out: dict[str, list[Any]] = {}
    with Reader(path) as reader:
        for connection, _t, raw in reader.messages():
            out.setdefault(connection.topic, []).append(store.deserialize_cdr(raw, connection.msgtype))
    return out


def _run_lingering(tmp_path: Path, *extra: str) -> tuple[FoxgloveProbe, str]:
    """Bring the graph up from a terminal, wait for the trial's end, connect a viewer; stop with Ctrl-C."""
    term = Terminal(_bringup(tmp_path, *extra))
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def run(coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout)

    try:
        port = term.wait_for(r"Foxglove: connect to ws://127\.0\.0\.1:(\d+)", 600)[1]
        term.wait_for(r"trials done; the Foxglove view stays up", 900)
        probe = FoxgloveProbe(f"ws://127.0.0.1:{port}")
        run(probe.connect())
        run(probe.wait_for(lambda: {"/robot_description", "/tf_static"} <= {c["topic"] for c in
                                                                            probe.channels.values()}, 30, "ads"))
        run(probe.subscribe(["/robot_description", "/tf_static"]))
        run(probe.wait_for(lambda: bool(probe.messages("/robot_description") and probe.messages("/tf_static")),
                           30, "the latched robot model and static TF"))
        term.proc.send_signal(signal.SIGINT)
        assert term.proc.wait(timeout=120) == 0, term.text[-3000:]
        return probe, term.text
    finally:
        term.close()
        loop.call_soon_threadsafe(loop.stop)


def test_the_sim_graph_shows_and_records_the_robot_as_the_urdf_says(tmp_path: Path) -> None:
    probe, _ = _run_lingering(tmp_path, "--no-render", "--policy", "oracle", "--actions-per-step", "3")
    urdf_text = URDF.read_text(encoding="utf-8")
    joints = _urdf_joints()
    moving = {j["child"]: j for j in joints.values() if j["type"] != "fixed"}
    fixed = {(j["parent"], j["child"]) for j in joints.values() if j["type"] == "fixed"}
    assert {c for c in moving if c.startswith("left_")} and {c for c in moving if c.startswith("right_")}

    # live: the robot's channels, and the latched model and static TF for a viewer that came late
    topics = {c["topic"]: c for c in probe.channels.values()}
    assert {"/robot_description", "/tf", "/tf_static", "/joint_states"} <= set(topics)
    assert probe.decode(probe.messages("/robot_description")[-1]).data == urdf_text
    live_static = {(t.header.frame_id, t.child_frame_id) for m in probe.messages("/tf_static")
                   for t in probe.decode(m).transforms}
    assert fixed <= live_static

    # recorded: one ROS 2 bag per trial
    paths = sorted((tmp_path / "run" / "mcap").glob("*.mcap"))
    assert len(paths) == 1
    bag = _read_bag(paths[0])
    assert [m.data for m in bag["/robot_description"]] == [urdf_text]
    static = {(t.header.frame_id, t.child_frame_id) for m in bag["/tf_static"] for t in m.transforms}
    assert fixed <= static
    assert {(f"{c}_camera", f"{c}_camera_optical") for c in CAMERAS} <= static
    assert len(bag["/robofollow/joint_command"]) == 3  # one policy call, three rows

    states = {_stamp(m.header): dict(zip(m.name, m.position, strict=True)) for m in bag["/joint_states"]}
    assert len(states) == 4  # the start state and one per row
    links: dict[int, dict[str, Any]] = {}
    for msg in bag["/tf"]:
        for tf in msg.transforms:
            if tf.header.frame_id != "world":  # world -> object/<name> are the sim's ground truth
                links.setdefault(_stamp(tf.header), {})[tf.child_frame_id] = tf
    assert set(links) == set(states), "link TF for every recorded joint state, with its stamp"
    for stamp, by_child in links.items():
        assert set(by_child) == set(moving), f"every moving URDF link at {stamp}"
        for child, tf in by_child.items():
            joint = moving[child]
            assert tf.header.frame_id == joint["parent"]
            name = next(n for n, j in joints.items() if j["child"] == child)
            if joint["type"] != "revolute":
                continue  # fingers: the gripper's normalised value maps onto them (rig config)
            expected = _rpy_matrix(joint["rpy"]) @ _axis_angle(np.asarray(joint["axis"]), states[stamp][name])
            translation = tf.transform.translation
            np.testing.assert_allclose([translation.x, translation.y, translation.z], joint["xyz"], atol=1e-9)
            np.testing.assert_allclose(_quat_matrix(tf.transform.rotation), expected, atol=1e-9)
    first, last = states[min(states)], states[max(states)]
    assert any(abs(last[n] - first[n]) > 1e-3 for n in first if "_joint" in n), "the oracle moved an arm"


def test_a_rendered_trial_shows_the_objects_where_the_optical_frames_put_them(tmp_path: Path) -> None:
    import cv2

    probe, _ = _run_lingering(tmp_path, "--policy", "oracle", "--actions-per-step", "1")
    for camera in CAMERAS:  # live: each camera's picture and its calibration in Foxglove's own type
        assert probe.topic_channel(f"/cameras/{camera}/camera_info")["schemaName"] == "foxglove.CameraCalibration"
        probe.topic_channel(f"/cameras/{camera}/image_raw/compressed")

    bag = _read_bag(next((tmp_path / "run" / "mcap").glob("*.mcap")))
    static = {(t.header.frame_id, t.child_frame_id): t.transform for m in bag["/tf_static"] for t in m.transforms}
    for camera in CAMERAS:
        optical = f"{camera}_camera_optical"
        images, infos = bag[f"/cameras/{camera}/image_raw/compressed"], bag[f"/cameras/{camera}/camera_info"]
        assert images and infos
        assert {m.header.frame_id for m in images} == {m.header.frame_id for m in infos} == {optical}
        # REP 103: the optical frame looks along the camera body's +x, its x to the right (-y), y down (-z)
        rotation = _quat_matrix(static[(f"{camera}_camera", optical)].rotation)
        np.testing.assert_allclose(rotation[:, 2], [1, 0, 0], atol=1e-9)
        np.testing.assert_allclose(rotation[:, 0], [0, -1, 0], atol=1e-9)
        np.testing.assert_allclose(rotation[:, 1], [0, 0, -1], atol=1e-9)

    # The head camera's first picture shows each object at the pixel that TF and camera_info project it to.
    image_msg, info = bag["/cameras/head/image_raw/compressed"][0], bag["/cameras/head/camera_info"][0]
    rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(bytes(image_msg.data), np.uint8), cv2.IMREAD_COLOR),
                       cv2.COLOR_BGR2RGB)
    mount = static[("world", "head_camera")]
    to_optical = static[("head_camera", "head_camera_optical")]
    world_from_optical = _quat_matrix(mount.rotation) @ _quat_matrix(to_optical.rotation)
    origin = np.array([mount.translation.x, mount.translation.y, mount.translation.z])
    k = np.asarray(info.k).reshape(3, 3)
    objects = {t.child_frame_id: t.transform.translation for m in bag["/tf"] for t in m.transforms
               if t.header.frame_id == "world" and _stamp(t.header) == _stamp(image_msg.header)}
    colours = {"object/large_red_cylinder": 0, "object/large_blue_cube": 2}  # the layout's red and blue objects
    assert set(colours) <= set(objects)
    for frame, channel in colours.items():
        point = objects[frame]
        local = world_from_optical.T @ (np.array([point.x, point.y, point.z]) - origin)
        assert local[2] > 0, f"{frame} is in front of the head camera"
        u, v = (k @ (local / local[2]))[:2]
        patch = rgb[int(v) - 1:int(v) + 2, int(u) - 1:int(u) + 2].reshape(-1, 3).astype(float).mean(axis=0)
        others = [patch[i] for i in range(3) if i != channel]
        assert patch[channel] > max(others) + 30, f"{frame} at pixel ({u:.0f}, {v:.0f}) looks {patch}"
