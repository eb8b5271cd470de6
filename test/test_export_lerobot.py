"""``robofollow export-lerobot``: ROS 2 bags (MCAP, CDR) written by an independent writer (rosbags), shaped
like a robofollow recording or a ``ros2 bag record`` on the rig, become a dataset the reader accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from robofollow_ros.contract import JOINT_NAMES
from test_learning_pipeline import read_independently

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
SEC = 1_000_000_000
pytestmark = pytest.mark.timeout(300)


def joints_at(t: float) -> np.ndarray:
    return np.array([0.1 * (i + 1) * np.sin(t) for i in range(14)], dtype=np.float64)


def picture(t: float, width: int = 64, height: int = 48) -> np.ndarray:
    """A flat picture whose red level encodes the time (4 levels per second)."""
    img = np.zeros((height, width, 3), np.uint8)
    img[..., 0] = int(t * 40) % 256
    return img


def write_bag(path: Path, trials: bool, seconds: float = 4.0, head_from: float = 0.0) -> None:
    """Joints and commands at 50 Hz, cameras at 15 Hz (the head camera only from ``head_from`` s on), and
    with ``trials`` two trials: "a" running 0.5..1.7 s, "b" 2.0..3.5 s."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    JointState, Header, Time = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Header"], \
        ts.types["builtin_interfaces/msg/Time"]
    Compressed, Image, String = (ts.types["sensor_msgs/msg/CompressedImage"], ts.types["sensor_msgs/msg/Image"],
                                 ts.types["std_msgs/msg/String"])
    shuffled = list(reversed(JOINT_NAMES))  # the export must reorder by name
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        c_js = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=ts)
        c_cmd = writer.add_connection("/robofollow/joint_command", JointState.__msgtype__, typestore=ts)
        c_head = writer.add_connection("/cameras/head/image_raw/compressed", Compressed.__msgtype__, typestore=ts)
        c_left = writer.add_connection("/cameras/left_wrist/image_raw/compressed", Compressed.__msgtype__, typestore=ts)
        c_right = writer.add_connection("/cameras/right_wrist/image_raw", Image.__msgtype__, typestore=ts)
        c_trial = writer.add_connection("/robofollow/trial", String.__msgtype__, typestore=ts)
        c_instr = writer.add_connection("/robofollow/instruction", String.__msgtype__, typestore=ts)
        events = []

        def header(t: float) -> object:
            return Header(stamp=Time(sec=int(t), nanosec=int((t % 1) * 1e9)), frame_id="")

        def joint_msg(t: float, values: np.ndarray) -> object:
            order = [JOINT_NAMES.index(n) for n in shuffled]
            return JointState(header=header(t), name=shuffled, position=values[order].copy(),
                              velocity=np.zeros(0), effort=np.zeros(0))

        for k in range(int(seconds * 50)):  # joints and commands at 50 Hz
            t = 0.01 + k / 50
            events.append((t, c_js, joint_msg(t, joints_at(t))))
            events.append((t, c_cmd, joint_msg(t, joints_at(t + 0.1))))
        for k in range(int(seconds * 15)):  # cameras at 15 Hz
            t = 0.005 + k / 15
            jpeg = cv2.imencode(".png", cv2.cvtColor(picture(t), cv2.COLOR_RGB2BGR))[1]
            for conn in (c_head, c_left) if t >= head_from else (c_left,):
                events.append((t, conn, Compressed(header=header(t), format="png", data=jpeg.reshape(-1))))
            events.append((t, c_right, Image(header=header(t), height=48, width=64, encoding="rgb8", is_bigendian=0,
                                             step=64 * 3, data=picture(t).reshape(-1))))
        events.append((0.0, c_instr, String(data="Use your left arm to pick up the red cube.")))
        if trials:
            for t, payload in [(0.0, {"id": "a", "phase": "resetting"}),
                               (0.5, {"id": "a", "phase": "running", "instruction": "Pick up the red cube."}),
                               (1.7, {"id": "a", "phase": "scoring"}), (1.8, {"id": "a", "phase": "done"}),
                               (2.0, {"id": "b", "phase": "running", "instruction": "Push the blue cube."}),
                               (3.5, {"id": "b", "phase": "scoring"})]:
                events.append((t, c_trial, String(data=json.dumps(payload))))
        for t, conn, msg in sorted(events, key=lambda e: e[0]):
            writer.write(conn, int(t * SEC), ts.serialize_cdr(msg, conn.msgtype))


def export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOFOLLOW, "export-lerobot", *args], capture_output=True, text=True, timeout=240)


def test_trials_in_a_bag_become_episodes_of_their_running_phase(tmp_path: Path) -> None:
    write_bag(tmp_path / "run", trials=True)
    proc = export(str(tmp_path / "run"), "--output", str(tmp_path / "ds"), "--fps", "10")
    assert proc.returncode == 0, proc.stderr
    report = read_independently(tmp_path / "ds")
    assert report["errors"] == []
    assert report["tasks"] == ["Pick up the red cube.", "Push the blue cube."]
    assert report["episode_lengths"] == [12, 15]  # 0.5..1.7 s and 2.0..3.5 s at 10 Hz
    from robofollow_ros.datasets.reader import load_dataset

    data = load_dataset(tmp_path / "ds")
    t = 0.5 + np.arange(12) / 10
    np.testing.assert_allclose(data.state[:12], np.stack([joints_at(x - 0.01) for x in t]), atol=0.02)
    np.testing.assert_allclose(data.action[:11], data.state[1:12] + 0.0, atol=0.25)
    np.testing.assert_allclose(data.action[:12], np.stack([joints_at(x + 0.1 + 0.1 - 0.01) for x in t]), atol=0.02)
    red = data.images["right_wrist"][:12, 0, 0, 0].astype(int)
    expected = np.array([picture(np.floor((x - 0.005) * 15) / 15 + 0.005)[0, 0, 0] for x in t], dtype=int)
    assert np.abs(red - expected).max() <= 3  # the frame in effect at each time (sample and hold), lossy video


def test_a_teleop_bag_without_trials_is_one_episode_with_the_instruction_topic(tmp_path: Path) -> None:
    write_bag(tmp_path / "teleop", trials=False, seconds=2.0)
    proc = export(str(tmp_path / "teleop"), "--output", str(tmp_path / "ds"), "--vcodec", "h264")
    assert proc.returncode == 0, proc.stderr
    report = read_independently(tmp_path / "ds")
    assert report["errors"] == [] and report["episodes"] == 1
    assert report["tasks"] == ["Use your left arm to pick up the red cube."]


def test_an_episode_whose_camera_starts_late_is_refused_not_cut_short(tmp_path: Path) -> None:
    """A camera that covers less than 90 % of a trial's frames (its first image came late) is one line naming the
    bag, the trial and the camera, exit 2 -- not an episode silently shorter than the trial."""
    write_bag(tmp_path / "late", trials=True, head_from=1.4)  # trial a: frames 0.5..1.6 s, the head from 1.405 s
    proc = export(str(tmp_path / "late"), "--output", str(tmp_path / "ds"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert str(tmp_path / "late") in proc.stderr and "trial a" in proc.stderr and "head" in proc.stderr
    assert "2 of 12 frames" in proc.stderr
    assert not (tmp_path / "ds" / "meta" / "info.json").exists()

    from robofollow_ros.datasets.bags import episodes_from_bag

    write_bag(tmp_path / "slightly_late", trials=True, head_from=0.5)  # from 0.538 s: 11 of 12 frames
    lengths = [ep.state.shape[0] for ep in episodes_from_bag(tmp_path / "slightly_late", 10)]
    assert lengths == [11, 15]


def test_bad_bags_are_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "junk.mcap").write_bytes(b"not a bag")
    proc = export(str(tmp_path / "junk.mcap"), "--output", str(tmp_path / "ds"))
    assert proc.returncode == 2 and "not a readable ROS 2 bag" in proc.stderr and len(proc.stderr.splitlines()) == 1
    proc = export(str(tmp_path / "missing"), "--output", str(tmp_path / "ds"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_a_control_rate_eval_recording_exports_like_a_collected_demonstration(tmp_path: Path, registry) -> None:  # type: ignore[no-untyped-def]
    """``eval --record --record-rate 10`` → ``export-lerobot`` → the independent reader. The recording samples the
    trial every 0.1 s of robot time (sim time: it stands still while rendering and the policy run): the joint
    states, the set-point the stepper drove the arms to, and the three cameras at that state. So each frame's
    images are of its own state (no frame held over from a policy call), and each action is the next frame's
    set-point, as ``robofollow collect`` records them (not the policy's far waypoint)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    task = "L0_pickup_red_cylinder"
    proc = subprocess.run([*ROBOFOLLOW, "eval", "--policy", "oracle", "--tasks", task, "--rounds", "1",
                           "--max-steps", "1", "--actions-per-step", "8", "--output", str(tmp_path / "run"),
                           "--record", "--record-rate", "10"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bag = next((tmp_path / "run" / "mcap").glob("*.mcap"))
    proc = export(str(bag), "--output", str(tmp_path / "ds"))
    assert proc.returncode == 0, proc.stderr

    stamps, states, heads = [], [], []
    head_topic = "/cameras/head/image_raw/compressed"
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        for conn, _t, raw in reader.messages(connections=[c for c in reader.connections
                                                          if c.topic in ("/joint_states", head_topic)]):
            msg = reader.deserialize(raw, conn.msgtype)
            if conn.topic == head_topic:
                bgr = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
                heads.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)[::4, ::4])
                continue
            stamps.append(msg.header.stamp.sec * SEC + msg.header.stamp.nanosec)
            states.append(np.asarray(msg.position))
    assert np.all(np.diff(stamps) == SEC // 10)  # one sample every 0.1 s of robot time, from the start
    assert len(states) > 20, "the oracle's eight rows take the robot seconds"

    report = read_independently(tmp_path / "ds", tmp_path / "arrays.npz")
    assert report["errors"] == [] and report["episodes"] == 1
    assert report["episode_lengths"] == [len(states) - 1]  # every sample a frame; the last one gives the action
    assert report["video_frames"]["observation.images.head"] == [len(states) - 1]
    assert report["tasks"] == [registry.eval_task(task).instruction]
    data = np.load(tmp_path / "arrays.npz")
    state, action = data["observation.state"], data["action"]
    np.testing.assert_allclose(state, np.stack(states[:-1]), atol=1e-6)  # exactly the recorded samples
    lag = np.abs(action[:-1] - state[1:]).max(axis=1)
    assert np.median(lag) < 0.02, f"actions are {np.median(lag):.3f} rad from the next state (collect: < 0.01)"
    # each frame's head picture is the one taken at its own state (the nearest of all the recorded pictures),
    # not one held over from an earlier moment
    assert len(heads) == len(states)
    recorded = np.stack(heads).astype(np.int16)
    for k, frame in enumerate(data["observation.images.head"].astype(np.int16)):
        distance = np.abs(recorded - frame).mean(axis=(1, 2, 3))
        assert distance[k] <= distance.min() + 0.1, f"frame {k} shows picture {int(distance.argmin())}"
    meta = json.loads((tmp_path / "ds" / "meta" / "robofollow.json").read_text())
    assert [e["trial"] for e in meta["episodes"]] == [bag.stem]
