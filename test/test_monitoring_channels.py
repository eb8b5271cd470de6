"""TrialChannels and SceneBuilder: what they log, with which schemas, read back from a real MCAP file."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import cv2
import foxglove
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from mcap.reader import make_reader

from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.channels import MonitorSettings, TrialChannels
from robofollow_ros.monitoring.recorder import open_trial_mcap
from robofollow_ros.monitoring.scene import SceneBuilder
from robofollow_ros.scoring.monitor import StageMonitor
from robofollow_ros.scoring.synthetic import Puppet

TASK = "L0_place_yellow_block_1_behind_red_cylinder"


def _decoder(schema: Any) -> Any:
    """A protobuf class built from the FileDescriptorSet stored in the file (not from our code)."""
    fds = descriptor_pb2.FileDescriptorSet.FromString(schema.data)
    pool = descriptor_pool.DescriptorPool()
    for proto in fds.file:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))


def _read(path: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    with path.open("rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            assert schema is not None, f"{channel.topic}: no schema"
            if channel.message_encoding == "json":
                assert schema.encoding == "jsonschema"
                decoded: Any = json.loads(message.data)
            else:
                assert (channel.message_encoding, schema.encoding) == ("protobuf", "protobuf")
                decoded = _decoder(schema).FromString(message.data)
            out.setdefault(channel.topic, []).append(decoded)
    return out


@pytest.fixture()
def logged(tmp_path: Path, registry: Any) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    task = registry.eval_task(TASK)
    frames = [f.to_dict() for f in Puppet(task).pick("right", "yellow_block_1").hold(3).frames]
    ctx = foxglove.Context()
    channels = TrialChannels(ctx)
    channels.set_scene(SceneBuilder(task, registry.layout_of(task), registry.slot_xy))
    monitor = StageMonitor(task)
    path = tmp_path / "t.mcap"
    writer = open_trial_mcap(path, ctx)
    channels.log_trial({"trial": "t", "task": TASK, "phase": "running"})
    image = np.zeros((240, 320, 3), np.uint8)
    image[:, :, 0] = 200  # red in RGB
    assert channels.log_image("head", image, time_ns=1)
    from robofollow_ros.scoring.frame import frame_from_dict
    for i, raw in enumerate(frames):
        monitor.update(frame_from_dict(raw, i))
        channels.log_frame("t", TASK, i, raw)
        channels.log_joints(np.arange(14) * 0.1)
        channels.log_score(monitor.live())
    channels.log_line("warning", "hello")
    writer.close()
    return _read(path), frames


def test_every_channel_is_recorded_with_its_schema(logged: Any) -> None:
    msgs, frames = logged
    assert {topics.camera_topic("head"), topics.SCENE, topics.TF, topics.JOINT_STATES, topics.SCORE, topics.TRIAL,
            topics.FRAME, topics.LOG} <= set(msgs)
    assert [m["frame"] for m in msgs[topics.FRAME]] == frames
    assert [m["index"] for m in msgs[topics.FRAME]] == list(range(len(frames)))
    score = msgs[topics.SCORE][-1]
    assert score["frame"] == len(frames) - 1 and "stage1_source_select" in score["stages"]
    assert {"intent", "exec", "intent_max"} <= set(score["stages"]["stage1_source_select"])
    joints = msgs[topics.JOINT_STATES][0]
    assert joints["name"][6] == "left_gripper" and joints["by_name"]["right_gripper"] == pytest.approx(1.3)
    log = msgs[topics.LOG][0]
    assert log.message == "hello" and log.level == 3  # Warning


def test_camera_is_a_decodable_jpeg_of_the_image(logged: Any) -> None:
    msgs, _ = logged
    image = msgs[topics.camera_topic("head")][0]
    assert image.format == "jpeg" and image.frame_id == "head_camera"
    bgr = cv2.imdecode(np.frombuffer(image.data, np.uint8), cv2.IMREAD_COLOR)
    assert bgr.shape == (240, 320, 3)
    assert abs(int(bgr[120, 160, 2]) - 200) < 8 and int(bgr[120, 160, 0]) < 8  # still red


def test_scene_has_table_objects_highlights_region_and_ee(logged: Any, registry: Any) -> None:
    msgs, frames = logged
    update = msgs[topics.SCENE][-1]
    ids = {e.id: e for e in update.entities}
    layout = registry.layout_of(registry.eval_task(TASK))
    assert {"table", "ee/left", "ee/right", "region/target", "region/operation_area"} <= set(ids)
    assert {f"object/{n}" for n in layout.names} <= set(ids)
    source, target = ids["object/yellow_block_1"], ids["object/red_cylinder"]
    assert source.texts[0].text == "source: yellow_block_1" and target.texts[0].text == "target: red_cylinder"
    cube = source.cubes[0]
    assert cube.pose.position.z == pytest.approx(frames[-1]["objects"]["yellow_block_1"][2])
    rgb = layout.object("red_cylinder").color_rgb
    colour = target.cylinders[0].color
    assert (colour.r, colour.g, colour.b) == pytest.approx(rgb)
    assert len(ids["region/target"].lines[0].points) > 3  # the "behind" relation sector
    tf = msgs[topics.TF][-1]
    assert {t.child_frame_id for t in tf.transforms} >= {"yellow_block_1", "left_ee", "right_ee"}


def test_cameras_are_rate_limited_per_camera() -> None:
    ctx = foxglove.Context()
    channels = TrialChannels(ctx, MonitorSettings(camera_max_hz=10.0))
    writer = foxglove.open_mcap(io.BytesIO(), context=ctx)  # a sink, so images are encoded
    image = np.zeros((24, 32, 3), np.uint8)
    jitter = [0, 3_000_000, -2_000_000]  # ms-scale arrival jitter must not cost throughput
    stamps = [i * 33_333_334 + jitter[i % 3] + 10_000_000 for i in range(60)]  # 30 Hz for 2 s
    sent = [channels.log_image("head", image, time_ns=t) for t in stamps]
    assert sum(sent) == 20 and sent[0] and not sent[1] and not sent[2] and sent[3]
    assert channels.log_image("left_wrist", image, time_ns=stamps[1])  # cameras limited independently
    fast = TrialChannels(foxglove.Context(), MonitorSettings(camera_max_hz=15.0))
    writer2 = foxglove.open_mcap(io.BytesIO(), context=fast.context)
    sent = [fast.log_image("head", image, time_ns=t) for t in stamps]
    assert sum(sent) == 30  # 15 Hz cap on a jittery 30 Hz stream: every second image
    writer2.close()
    writer.close()


def test_nothing_is_encoded_without_a_sink() -> None:
    channels = TrialChannels(foxglove.Context())
    assert not channels.log_image("head", np.zeros((4, 4, 3), np.uint8))


def test_bad_settings_and_levels_name_the_field() -> None:
    with pytest.raises(ValueError, match="camera_max_hz: must be > 0, got 0"):
        MonitorSettings(camera_max_hz=0)
    with pytest.raises(ValueError, match=r"jpeg_quality: must be in 1\.\.100, got 101"):
        MonitorSettings(jpeg_quality=101)
    with pytest.raises(ValueError, match=r"level: expected one of .* got 'loud'"):
        TrialChannels(foxglove.Context()).log_line("loud", "x")
    with pytest.raises(ValueError, match="camera: unknown camera 'top'"):
        topics.camera_topic("top")


def test_json_schemas_are_valid_json_schema_documents() -> None:
    for schema in (topics.SCORE_SCHEMA, topics.TRIAL_SCHEMA, topics.FRAME_SCHEMA, topics.JOINT_STATES_SCHEMA):
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])
