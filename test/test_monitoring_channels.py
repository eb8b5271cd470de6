"""A headless trial recording is a ROS 2 bag: read back by independent readers (rosbags, mcap_ros2, rclpy).

Nothing here decodes with our own code: ``rosbags`` opens the file as a ROS 2 bag, ``mcap_ros2``
decodes every message from the schema text stored in the file, and rclpy deserializes every message
with the ROS typesupport of the installed wheels; the type hashes are compared with the hashes the
ROS build wrote into the wheels' type descriptions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from robofollow_ros.contract import CAMERA_OPTICAL_FRAMES, JOINT_NAMES
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.channels import MonitorSettings, TrialChannels
from robofollow_ros.monitoring.recorder import TrialRecorder
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor
from robofollow_ros.scoring.synthetic import Puppet

SEC = 1_000_000_000
TASK = "L0_place_yellow_block_1_behind_red_cylinder"
VENV = Path(__file__).resolve().parents[1] / ".venv"


class HomeWorld:
    """What the recorder reads from a world: its rig and the measured joint vector (home, then moving)."""

    def __init__(self) -> None:
        from robofollow_ros.robot.rig_config import load_rig_config

        self.rig = load_rig_config()
        self.vector = self.rig.home_vector()

    def joint_vector(self) -> np.ndarray:
        return self.vector


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    from robofollow_ros.benchmark import default_registry

    registry = default_registry()
    task = registry.eval_task(TASK)
    frames = [f.to_dict() for f in Puppet(task).pick("right", "yellow_block_1").hold(3).frames]
    recorder = TrialRecorder(tmp_path_factory.mktemp("rec"), registry=registry)
    world = HomeWorld()
    observer = recorder.for_trial("t", 1)
    observer.on_start(task, 7, world)
    image = np.zeros((240, 320, 3), np.uint8)
    image[:, :, 0] = 200  # red in RGB
    observer.on_observation({"observation": {"head_camera": {"rgb": image}}})
    monitor = StageMonitor(task)
    for i, raw in enumerate(frames):
        world.vector = world.vector.copy()
        world.vector[7] += 0.01  # right_joint1 turns: link1's transform must follow
        observer.on_command(world.vector)
        monitor.update(frame_from_dict(raw, i))
        observer.on_frame(i, raw, monitor.live())
    observer.on_end(monitor.result(), monitor.live())
    return recorder.path_of("t"), frames, monitor.result()


def _mcap(path: Path) -> list[tuple[Any, Any, Any, Any]]:
    """(schema, channel, message, decoded) for every message, decoded by mcap_ros2 from the stored schema."""
    with path.open("rb") as f:
        return [(s, c, m, d) for s, c, m, d in make_reader(f, decoder_factories=[DecoderFactory()])
                .iter_decoded_messages()]


def test_rosbags_opens_it_as_a_ros2_bag_and_deserializes_every_message(recording: Any) -> None:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    path, frames, _ = recording
    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(path) as reader:
        counts: dict[str, int] = {}
        for connection, _stamp, raw in reader.messages():
            store.deserialize_cdr(raw, connection.msgtype)
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
        assert sum(counts.values()) == reader.message_count
        types = {c.topic: c.msgtype for c in reader.connections}
        qos = {c.topic: c.ext.offered_qos_profiles[0] for c in reader.connections}
    assert types[topics.JOINT_STATES] == "sensor_msgs/msg/JointState"
    assert types[topics.TF] == types[topics.TF_STATIC] == "tf2_msgs/msg/TFMessage"
    assert types[topics.ROBOT_DESCRIPTION] == "std_msgs/msg/String"
    assert types[topics.camera_topic("head")] == "sensor_msgs/msg/CompressedImage"
    assert counts[topics.JOINT_STATES] == counts[topics.TF] == counts[topics.FRAME] == len(frames)
    assert counts[topics.ROBOT_DESCRIPTION] == counts[topics.TF_STATIC] == 1
    assert counts[topics.JOINT_COMMAND] == len(frames) and counts[topics.RESULT] == 1
    assert qos[topics.TF_STATIC].durability.name == "TRANSIENT_LOCAL"  # latched again on `ros2 bag play`
    assert qos[topics.JOINT_STATES].durability.name == "VOLATILE"


def test_every_message_decodes_from_the_schema_in_the_file_and_with_ros_typesupport(recording: Any) -> None:
    import importlib

    from rclpy.serialization import deserialize_message

    path, _, _ = recording
    decoded = _mcap(path)
    assert decoded and all(s.encoding == "ros2msg" and c.message_encoding == "cdr" for s, c, _, _ in decoded)
    for schema, channel, message, theirs in decoded:
        package, _, kind = schema.name.split("/")
        ros = deserialize_message(message.data, getattr(importlib.import_module(f"{package}.msg"), kind))
        if channel.topic == topics.JOINT_STATES:  # the two decoders agree
            assert list(ros.position) == list(theirs.position) and list(ros.name) == list(theirs.name)
    with path.open("rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"


def test_type_hashes_are_those_of_the_installed_ros_interfaces(recording: Any) -> None:
    path, _, _ = recording
    with path.open("rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    schemas = summary.schemas
    checked = 0
    for channel in summary.channels.values():
        name = schemas[channel.schema_id].name
        package, _, kind = name.split("/")
        files = list(VENV.glob(f"**/share/{package}/msg/{kind}.json"))
        assert files, f"no type description for {name} in the venv"
        description = json.loads(files[0].read_text())
        wanted = {h["type_name"]: h["hash_string"] for h in description["type_hashes"]}[name]
        assert channel.metadata["topic_type_hash"] == wanted, name
        checked += 1
    assert checked >= 10


def test_rosbag2_metadata_record_matches_the_file(recording: Any) -> None:
    """What rosbag2's MCAP storage reads for `ros2 bag info`: the `rosbag2` record and the channel QoS."""
    path, _, _ = recording
    with path.open("rb") as f:
        reader = make_reader(f)
        records = [m for m in reader.iter_metadata() if m.name == "rosbag2"]
        summary = reader.get_summary()
    assert summary is not None and summary.statistics is not None and len(records) == 1
    meta = yaml.safe_load(records[0].metadata["serialized_metadata"])
    assert meta["version"] == 9 and meta["storage_identifier"] == "mcap" and meta["ros_distro"] == "jazzy"
    assert meta["message_count"] == summary.statistics.message_count
    by_topic = {t["topic_metadata"]["name"]: t for t in meta["topics_with_message_count"]}
    for channel_id, channel in summary.channels.items():
        entry = by_topic[channel.topic]
        assert entry["message_count"] == summary.statistics.channel_message_counts.get(channel_id, 0)
        assert entry["topic_metadata"]["type"] == summary.schemas[channel.schema_id].name
        profiles = yaml.safe_load(channel.metadata["offered_qos_profiles"])
        assert profiles == entry["topic_metadata"]["offered_qos_profiles"]
        assert profiles[0]["reliability"] == "reliable" and profiles[0]["liveliness"] == "automatic"
    span = meta["duration"]["nanoseconds"]
    assert span == summary.statistics.message_end_time - summary.statistics.message_start_time


def test_robot_is_described_and_its_links_move_with_the_joints(recording: Any) -> None:
    path, frames, _ = recording
    by_topic: dict[str, list[Any]] = {}
    for _, channel, _, msg in _mcap(path):
        by_topic.setdefault(channel.topic, []).append(msg)
    urdf = by_topic[topics.ROBOT_DESCRIPTION][0].data
    assert urdf.startswith("<?xml") or "<robot" in urdf
    static = {(t.header.frame_id, t.child_frame_id) for t in by_topic[topics.TF_STATIC][0].transforms}
    assert {("world", "left_base"), ("world", "right_base"), ("head_camera", "head_camera_optical"),
            ("right_link6", "right_tcp")} <= static
    first, last = by_topic[topics.TF][0], by_topic[topics.TF][-1]
    link1 = [next(t for t in m.transforms if t.child_frame_id == "right_link1") for m in (first, last)]
    assert link1[0].header.frame_id == "right_base"
    # quaternion of a yaw about z: the angle grew by 0.01 rad per frame
    angles = [2 * np.arctan2(t.transform.rotation.z, t.transform.rotation.w) for t in link1]
    assert angles[1] - angles[0] == pytest.approx(0.01 * (len(frames) - 1), abs=1e-6)
    objects = {t.child_frame_id for t in last.transforms if t.header.frame_id == "world"}
    assert {"object/yellow_block_1", "object/red_cylinder"} <= objects
    joints = by_topic[topics.JOINT_STATES][-1]
    assert list(joints.name) == list(JOINT_NAMES) and len(joints.position) == 14


def test_camera_is_a_jpeg_in_the_optical_frame_with_its_calibration(recording: Any) -> None:
    path, _, _ = recording
    msgs = {c.topic: d for _, c, _, d in _mcap(path)}
    image, info = msgs[topics.camera_topic("head")], msgs[topics.calibration_topic("head")]
    assert image.format == "jpeg" and image.header.frame_id == CAMERA_OPTICAL_FRAMES["head"]
    bgr = cv2.imdecode(np.frombuffer(bytes(image.data), np.uint8), cv2.IMREAD_COLOR)
    assert bgr.shape == (240, 320, 3) and abs(int(bgr[120, 160, 2]) - 200) < 8  # still red
    assert info.header.frame_id == image.header.frame_id
    assert (info.header.stamp.sec, info.header.stamp.nanosec) == (image.header.stamp.sec, image.header.stamp.nanosec)
    assert (info.width, info.height) == (320, 240) and info.k[2] == 160 and info.k[5] == 120


def test_scene_score_and_states_are_what_the_panels_read(recording: Any, registry: Any) -> None:
    path, frames, result = recording
    by_topic: dict[str, list[Any]] = {}
    for _, channel, _, msg in _mcap(path):
        by_topic.setdefault(channel.topic, []).append(msg)
    markers = by_topic[topics.SCENE][-1].markers
    assert markers[0].action == 3  # DELETEALL, then this frame's markers
    ns = {m.ns for m in markers}
    assert {"table", "object/yellow_block_1", "object/red_cylinder", "region/target", "ee/right"} <= ns
    labels = [m.text for m in markers if m.type == 9]
    assert "source: yellow_block_1" in labels and "target: red_cylinder" in labels
    stage_values = by_topic[topics.STAGES][-1].data
    assert stage_values[0] == pytest.approx(result["intent_score"]) and len(stage_values) == 8
    assert stage_values[2] == pytest.approx(result["phases"][0]["intent_score"])
    status = by_topic[topics.STATUS][-1].status
    assert [s.name for s in status] == ["trial", "stage 1", "stage 2", "stage 3", "completion"]
    assert status[0].message == "done" and status[1].hardware_id == "stage1_source_select"
    assert status[1].message == "done" and status[2].message == "missed"  # picked, never placed
    assert status[4].message == "incomplete"
    scores = [json.loads(m.data) for m in by_topic[topics.SCORE]]
    assert scores[-1]["final"] is True and [s["frame"] for s in scores[:-1]] == list(range(len(frames)))
    phases = [json.loads(m.data)["phase"] for m in by_topic[topics.TRIAL]]
    assert phases == ["running", "done"]
    assert any("started" in m.msg for m in by_topic[topics.ROSOUT])


def test_cameras_are_rate_limited_per_camera(tmp_path: Path) -> None:
    channels = TrialChannels(MonitorSettings(camera_max_hz=10.0))
    channels.open_recording(tmp_path / "a.mcap")  # a sink, so images are encoded
    image = np.zeros((24, 32, 3), np.uint8)
    jitter = [0, 3_000_000, -2_000_000]  # ms-scale arrival jitter must not cost throughput
    stamps = [i * 33_333_334 + jitter[i % 3] + 10_000_000 for i in range(60)]  # 30 Hz for 2 s
    sent = [channels.log_image("head", image, time_ns=t) for t in stamps]
    assert sum(sent) == 20 and sent[0] and not sent[1] and not sent[2] and sent[3]
    assert channels.log_image("left_wrist", image, time_ns=stamps[1])  # cameras limited independently
    channels.close_recording()
    fast = TrialChannels(MonitorSettings(camera_max_hz=15.0))
    fast.open_recording(tmp_path / "b.mcap")
    assert sum(fast.log_image("head", image, time_ns=t) for t in stamps) == 30  # every second image
    fast.close_recording()


def test_the_camera_schedule_starts_again_with_a_recording_a_clock_going_back_or_a_sample(tmp_path: Path) -> None:
    """Each trial's clock starts anew (the headless trial clock: its wall start + sim time): its first image must
    not wait for the schedule of the previous trial, whose sim time may have run ahead of the wall clock."""
    channels = TrialChannels(MonitorSettings(camera_max_hz=10.0))
    image = np.zeros((24, 32, 3), np.uint8)
    channels.open_recording(tmp_path / "a.mcap")
    assert channels.log_image("head", image, time_ns=50 * SEC)
    assert not channels.log_image("head", image, time_ns=50 * SEC + 50_000_000)  # 50 ms later: capped
    assert channels.log_image("head", image, time_ns=50 * SEC + 50_000_000, limit=False)  # a sample asked for
    channels.open_recording(tmp_path / "b.mcap")  # the next trial, its clock 20 s behind the last one's
    assert channels.log_image("head", image, time_ns=30 * SEC)
    assert not channels.log_image("head", image, time_ns=30 * SEC + 50_000_000)
    assert channels.log_image("head", image, time_ns=10 * SEC)  # the clock went back within one recording
    channels.close_recording()


def test_nothing_is_encoded_without_a_listener() -> None:
    channels = TrialChannels()
    assert not channels.log_image("head", np.zeros((4, 4, 3), np.uint8))
    assert not channels.wants(topics.SCENE)


def test_bad_settings_and_levels_name_the_field() -> None:
    with pytest.raises(ValueError, match="camera_max_hz: must be > 0, got 0"):
        MonitorSettings(camera_max_hz=0)
    with pytest.raises(ValueError, match=r"jpeg_quality: must be in 1\.\.100, got 101"):
        MonitorSettings(jpeg_quality=101)
    with pytest.raises(ValueError, match=r"level: expected one of .* got 'loud'"):
        TrialChannels().log_line("loud", "x")
    with pytest.raises(ValueError, match="camera: unknown camera 'top'"):
        topics.camera_topic("top")
    with pytest.raises(ValueError, match="topic /joint_states: carries sensor_msgs/msg/JointState, got a std_msgs"):
        TrialChannels().publish(topics.JOINT_STATES, "std_msgs/msg/String", b"")
