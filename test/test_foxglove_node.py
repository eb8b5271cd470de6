"""foxglove_node in a real rclpy graph: test publishers feed it, a Foxglove protocol client watches, the
Foxglove services reach a stub trial manager, and the trial's MCAP replays to the published result."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from geometry_msgs.msg import TransformStamped
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.replay import comparable, read_recording, rescore
from robofollow_ros.monitoring.ws_client import FoxgloveProbe
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.foxglove_node import FoxgloveNode, image_to_rgb
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor
from robofollow_ros.scoring.synthetic import Puppet
from ros_harness import RosHarness

TASK = "L0_place_yellow_block_1_behind_red_cylinder"


@pytest.fixture()
def graph(tmp_path: Path) -> Iterator[tuple[RosHarness, FoxgloveNode, list[str]]]:
    with RosHarness() as ros:
        node = ros.add(FoxgloveNode(context=ros.context, parameter_overrides=[
            Parameter("port", value=0), Parameter("output_dir", value=str(tmp_path / "mcap"))]))
        manager = ros.node("stub_trial_manager")
        calls: list[str] = []

        def handler(name: str) -> Any:
            def handle(_req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
                calls.append(name)
                res.success, res.message = name == "start", f"{name} handled"
                return res
            return handle

        manager.create_service(Trigger, "/robofollow/trial/start", handler("start"))
        manager.create_service(Trigger, "/robofollow/trial/stop", handler("stop"))
        yield ros, node, calls  # type: ignore[misc]


def _run(coro: Any, loop: asyncio.AbstractEventLoop) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(60)


def test_node_streams_the_graph_to_foxglove_and_records_the_trial(graph: Any, registry: Any) -> None:
    ros, node, calls = graph
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    probe = FoxgloveProbe(f"ws://127.0.0.1:{node.server.port}")
    try:
        _run(probe.connect(), loop)
        _run(probe.wait_for(lambda: len(probe.channels) >= 11 and len(probe.services) == 4, 10, "advertisements"), loop)
        _run(probe.subscribe(), loop)
        _run(probe.wait_for(lambda: node.channels.score.has_sinks(), 10, "subscriptions"), loop)

        pub = ros.node("test_publishers")
        trial_pub = pub.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        score_pub = pub.create_publisher(String, "/robofollow/score", tp.LATCHED)
        frame_pub = pub.create_publisher(String, topics.FRAME, tp.FRAME_STREAM)
        image_pub = pub.create_publisher(Image, "/cameras/head/image_raw", qos_profile_sensor_data)
        joint_pub = pub.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
        tf_pub = pub.create_publisher(TFMessage, "/tf", tp.STATE_STREAM)
        obj_pub = pub.create_publisher(MarkerArray, "/robofollow/objects", tp.STATE_STREAM)
        trial = {"id": "ros_trial_1", "task": TASK, "scene": "scene1", "level": "L0", "phase": "running"}
        trial_pub.publish(String(data=json.dumps(trial)))
        ros.wait_for(lambda: node.session.trial_id == "ros_trial_1", 10, "the trial state")

        task = registry.eval_task(TASK)
        frames = [f.to_dict() for f in Puppet(task).pick("right", "yellow_block_1").hold(2).frames]
        monitor = StageMonitor(task)
        marker = Marker(ns="yellow_block_1")
        marker.pose.position.x = 0.1
        obj_pub.publish(MarkerArray(markers=[marker]))
        for i, raw in enumerate(frames):
            frame_pub.publish(String(data=json.dumps({"trial": "ros_trial_1", "task": TASK, "index": i, "frame": raw})))
            monitor.update(frame_from_dict(raw, i))
            score_pub.publish(String(data=json.dumps({**monitor.live(), "trial_id": "ros_trial_1"})))
        ros.wait_for(lambda: node.session._frame_index == len(frames), 10, "every frame")
        final = {**monitor.live(), "final": True, "trial_id": "ros_trial_1", "result": monitor.result()}
        score_pub.publish(String(data=json.dumps(final)))
        rgb = np.zeros((240, 320, 3), np.uint8)
        rgb[:, :, 1] = 180
        image_pub.publish(Image(height=240, width=320, encoding="rgb8", step=960, data=rgb.tobytes()))
        joint_pub.publish(JointState(name=list(JOINT_NAMES), position=[0.5] * 14))
        transform = TransformStamped(child_frame_id="left_base")
        transform.header.frame_id = "world"
        tf_pub.publish(TFMessage(transforms=[transform]))

        _run(probe.wait_for(lambda: all(probe.messages(t) for t in (
            topics.camera_topic("head"), topics.JOINT_STATES, topics.TF, topics.SCENE, topics.FRAME))
            and any(probe.decode(m).get("final") for m in probe.messages(topics.SCORE)), 20, "every stream"), loop)
        image = probe.decode(probe.messages(topics.camera_topic("head"))[0])
        assert image.format == "jpeg" and image.frame_id == "head_camera"
        joints = probe.decode(probe.messages(topics.JOINT_STATES)[0])
        assert joints["by_name"]["right_gripper"] == 0.5
        children = {t.child_frame_id for m in probe.messages(topics.TF) for t in probe.decode(m).transforms}
        assert "left_base" in children
        scene = probe.decode(probe.messages(topics.SCENE)[-1])
        assert "object/red_cylinder" in {e.id for e in scene.entities}

        start = _run(probe.call_service("/robofollow/trial/start", {}), loop)
        assert start == {"success": True, "message": "start handled"}
        stop = _run(probe.call_service("/robofollow/trial/stop", {}), loop)
        assert stop == {"success": False, "message": "stop handled"}
        assert calls == ["start", "stop"]
        missing = _run(probe.call_service("/robofollow/trial/next", {}), loop)  # no trial manager serves it
        assert missing["success"] is False and "not available" in missing["message"]

        trial_pub.publish(String(data=json.dumps({**trial, "phase": "done"})))
        ros.wait_for(lambda: node.session._writer is None, 10, "the recording to close")
    finally:
        _run(probe.close(), loop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    rec = read_recording(node.session.recording)
    assert rec.truncated is None and rec.trial == "ros_trial_1" and len(rec.frames) == len(frames)
    assert rec.live_result is not None and comparable(rescore(rec)) == comparable(rec.live_result)


def test_bad_parameters_and_images_are_rejected_with_the_field() -> None:
    from rclpy.exceptions import InvalidParameterValueException

    bad_port = r"port = 70000: must be in 0\.\.65535"
    with RosHarness() as ros, pytest.raises(InvalidParameterValueException, match=bad_port):
        FoxgloveNode(context=ros.context, parameter_overrides=[Parameter("port", value=70000)])
    with pytest.raises(ValueError, match="image encoding: expected rgb8 or bgr8, got 'mono8'"):
        image_to_rgb(Image(height=1, width=1, encoding="mono8", step=1, data=b"\x00"))
    bgr = Image(height=1, width=2, encoding="bgr8", step=8, data=bytes([1, 2, 3, 4, 5, 6, 0, 0]))
    assert image_to_rgb(bgr).tolist() == [[[3, 2, 1], [6, 5, 4]]]
