"""``robofollow record`` as a user runs it during a teleoperated session: a subprocess records a real graph of
publishers (no trial manager) into one ROS 2 bag until SIGINT; rosbags reads every message back."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.ws_client import FoxgloveProbe
from ros_harness import RosHarness

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     history=HistoryPolicy.KEEP_LAST)
STREAM = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                    history=HistoryPolicy.KEEP_LAST)
URDF = "<robot name='teleop_rig'><link name='world'/></robot>"
N = 20


def _line(proc: subprocess.Popen[str], timeout: float) -> str:
    box: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: box.put(proc.stdout.readline() if proc.stdout else ""), daemon=True).start()
    return box.get(timeout=timeout)


def test_record_writes_the_graph_into_a_ros2_bag_until_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "teleop.mcap"
    proc = subprocess.Popen([*ROBOFOLLOW, "record", str(out), "--serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        line = _line(proc, 120)
        match = re.search(r"ws://127\.0\.0\.1:(\d+)", line)
        assert match, f"no live address in {line!r}: {proc.stderr.read() if proc.poll() is not None else ''}"
        probe = FoxgloveProbe(f"ws://127.0.0.1:{match[1]}")
        asyncio.run_coroutine_threadsafe(probe.connect(), loop).result(30)
        asyncio.run_coroutine_threadsafe(probe.wait_for(lambda: len(probe.channels) > 5, 20, "ads"), loop).result(30)
        asyncio.run_coroutine_threadsafe(probe.subscribe([topics.JOINT_STATES]), loop).result(30)
        with RosHarness() as ros:
            node = ros.node("teleop_graph")
            node.create_publisher(String, "/robot_description", LATCHED).publish(String(data=URDF))
            static = TransformStamped(child_frame_id="left_base")
            static.header.frame_id = "world"
            node.create_publisher(TFMessage, "/tf_static", LATCHED).publish(TFMessage(transforms=[static]))
            joints = node.create_publisher(JointState, "/joint_states", STREAM)
            commands = node.create_publisher(JointState, "/robofollow/joint_command", STREAM)
            image = node.create_publisher(Image, "/cameras/head/image_raw", STREAM)
            info = node.create_publisher(CameraInfo, "/cameras/head/camera_info", STREAM)
            ros.wait_for(lambda: all(p.get_subscription_count() > 0 for p in (joints, commands, image, info)), 60,
                         "the recorder to subscribe")
            frame = Image(height=24, width=32, encoding="rgb8", step=96, data=np.full(24 * 96, 90, np.uint8).tobytes())
            frame.header.frame_id = "head_camera_optical"
            info.publish(CameraInfo(header=frame.header, width=32, height=24, k=[30.0, 0, 16, 0, 30, 12, 0, 0, 1]))
            image.publish(frame)
            for i in range(N):
                commands.publish(JointState(name=list(JOINT_NAMES), position=[0.01 * i] * 14))
                joints.publish(JointState(name=list(JOINT_NAMES), position=[0.01 * i] * 14))

            def last_seen() -> bool:
                return any(abs(probe.decode(m).position[0] - 0.01 * (N - 1)) < 1e-9
                           for m in probe.messages(topics.JOINT_STATES))

            # the recorder logs each message to the file before the live view: seen live = in the file
            asyncio.run_coroutine_threadsafe(probe.wait_for(last_seen, 30, "the last joint state"), loop).result(40)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        asyncio.run_coroutine_threadsafe(probe.wait_closed(10), loop).result(15)
        assert probe.close_frame_received  # the live view was closed with a close frame
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        loop.call_soon_threadsafe(loop.stop)

    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    got: dict[str, list[object]] = {}
    with Reader(out) as reader:
        for connection, _, raw in reader.messages():
            got.setdefault(connection.topic, []).append(store.deserialize_cdr(raw, connection.msgtype))
    assert [m.data for m in got["/robot_description"]] == [URDF]  # type: ignore[attr-defined]
    assert got["/tf_static"][0].transforms[0].child_frame_id == "left_base"  # type: ignore[attr-defined]
    assert [round(m.position[0], 6) for m in got["/joint_states"]] == [round(0.01 * i, 6) for i in range(N)]  # type: ignore[attr-defined]
    assert len(got["/robofollow/joint_command"]) == N
    assert got["/cameras/head/image_raw/compressed"][0].header.frame_id == "head_camera_optical"  # type: ignore[attr-defined]
    assert got["/cameras/head/camera_info"][0].k[2] == 16.0  # type: ignore[attr-defined]


def test_a_taken_port_exits_6(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*ROBOFOLLOW, "record", str(tmp_path / "a.mcap"), "--serve", "--port", str(port),
                               "--duration", "1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 6 and f"--port: cannot serve on {port}" in done.stderr, done.stderr


def test_bad_arguments_exit_2_naming_the_field(tmp_path: Path) -> None:
    existing = tmp_path / "x.mcap"
    existing.write_bytes(b"")
    for args, words in ((["y.txt"], "must end in .mcap"), ([str(existing)], "exists"),
                        ([str(tmp_path / "z.mcap"), "--duration", "0"],
                         "argument --duration: must be a number > 0 and <= 604800 seconds, got '0'")):
        done = subprocess.run([*ROBOFOLLOW, "record", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_duration_that_elapses_ends_cleanly_with_status_0(tmp_path: Path) -> None:
    out = tmp_path / "short.mcap"
    done = subprocess.run([*ROBOFOLLOW, "record", str(out), "--duration", "0.5"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    # rclpy's executor used to be shut down under its own running callbacks: a line at exit, every time
    assert "never retrieved" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"wrote {out}" and out.stat().st_size > 0


def test_a_signal_that_cuts_a_duration_short_is_128_plus_the_signal(tmp_path: Path) -> None:
    out = tmp_path / "cut.mcap"
    proc = subprocess.Popen([*ROBOFOLLOW, "record", str(out), "--duration", "600"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "recording the graph into" in _line(proc, 120)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert "never retrieved" not in stderr and "Traceback" not in stderr, stderr
    assert f"stopped by signal {int(signal.SIGINT)} before --duration 600 s elapsed; wrote {out}" in stdout
    from rosbags.rosbag2 import Reader

    with Reader(out) as reader:  # closed whole: summary and the rosbag2 metadata record
        assert reader.duration >= 0


def test_a_full_disk_is_one_line_and_exit_5(tmp_path: Path) -> None:
    from test_rundir_safety import _tmpfs

    with _tmpfs(tmp_path / "fs", "1m") as fs:
        with open(fs / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:  # fill the filesystem to the last byte
                fh.write(os.urandom(65536))
        out = fs / "teleop.mcap"
        done = subprocess.run([*ROBOFOLLOW, "record", str(out), "--duration", "0.5"], capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 5, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"robofollow record: error: FILE: cannot write {out} (No space left on device); the recording ends where "
        "the write failed"], done.stderr
