"""foxglove_node in a real rclpy graph: test publishers stand in for the rest of the graph (the ROS contract:
robot description, TF, cameras with camera_info, trial streams), a Foxglove protocol client watches, the
Foxglove services reach a stub trial manager, and the trial's recording is a ROS 2 bag that rosbags reads
and that replays to the published result."""

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
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.replay import comparable, read_recording, rescore
from robofollow_ros.monitoring.server import TRIAL_SERVICES
from robofollow_ros.monitoring.ws_client import FoxgloveProbe
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.foxglove_node import FoxgloveNode, image_to_rgb
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor
from robofollow_ros.scoring.synthetic import Puppet
from ros_harness import RosHarness

TASK = "L0_place_yellow_block_1_behind_red_cylinder"
URDF = "<robot name='test_rig'><link name='world'/></robot>"


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
        _run(probe.wait_for(lambda: len(probe.channels) >= len(topics.TOPICS) and
                            len(probe.services) == len(TRIAL_SERVICES), 10, "advertisements"), loop)
        _run(probe.subscribe(), loop)
        _run(probe.wait_for(lambda: node.channels.live.channels[topics.SCORE].has_sinks(), 10, "subscriptions"), loop)

        pub = ros.node("test_publishers")
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
        pub.create_publisher(String, "/robot_description", latched).publish(String(data=URDF))
        static = TransformStamped(child_frame_id="head_camera_optical")
        static.header.frame_id = "head_camera"
        pub.create_publisher(TFMessage, "/tf_static", latched).publish(TFMessage(transforms=[static]))
        info_pub = pub.create_publisher(CameraInfo, "/cameras/head/camera_info", qos_profile_sensor_data)
        trial_pub = pub.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        score_pub = pub.create_publisher(String, "/robofollow/score", tp.LATCHED)
        frame_pub = pub.create_publisher(String, topics.FRAME, tp.FRAME_STREAM)
        image_pub = pub.create_publisher(Image, "/cameras/head/image_raw", qos_profile_sensor_data)
        joint_pub = pub.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
        tf_pub = pub.create_publisher(TFMessage, "/tf", tp.STATE_STREAM)
        obj_pub = pub.create_publisher(MarkerArray, "/robofollow/objects", tp.STATE_STREAM)
        _run(probe.wait_for(lambda: bool(probe.messages("/robot_description") and probe.messages("/tf_static")), 20,
                            "the latched robot model forwarded"), loop)
        assert probe.decode(probe.messages("/robot_description")[0]).data == URDF
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
        image = Image(height=240, width=320, encoding="rgb8", step=960, data=rgb.tobytes())
        image.header.frame_id = "head_camera_optical"
        image.header.stamp.sec = 42
        info = CameraInfo(width=320, height=240, k=[200.0, 0, 160, 0, 200, 120, 0, 0, 1])
        info.header = image.header
        info_pub.publish(info)
        image_pub.publish(image)
        joint_pub.publish(JointState(name=list(JOINT_NAMES), position=[0.5] * 14))
        transform = TransformStamped(child_frame_id="left_base")
        transform.header.frame_id = "world"
        tf_pub.publish(TFMessage(transforms=[transform]))

        def scored() -> bool:
            return any(json.loads(probe.decode(m).data).get("final") for m in probe.messages(topics.SCORE))

        _run(probe.wait_for(lambda: all(probe.messages(t) for t in (
            topics.camera_topic("head"), topics.calibration_topic("head"), topics.JOINT_STATES, topics.TF,
            topics.SCENE, topics.FRAME)) and scored(), 20, "every stream"), loop)
        jpeg = probe.decode(probe.messages(topics.camera_topic("head"))[0])
        assert jpeg.format == "jpeg" and jpeg.header.frame_id == "head_camera_optical" and jpeg.header.stamp.sec == 42
        calibration = probe.decode(probe.messages(topics.calibration_topic("head"))[0])
        assert calibration.frame_id == "head_camera_optical" and list(calibration.K)[:3] == [200.0, 0.0, 160.0]
        joints = probe.decode(probe.messages(topics.JOINT_STATES)[0])
        assert list(joints.position) == [0.5] * 14
        children = {t.child_frame_id for m in probe.messages(topics.TF) for t in probe.decode(m).transforms}
        assert "left_base" in children
        scene = probe.decode(probe.messages(topics.SCENE)[-1])
        assert "object/red_cylinder" in {m.ns for m in scene.markers}

        start = _run(probe.call_service("/robofollow/trial/start", {}), loop)
        assert start == {"success": True, "message": "start handled"}
        stop = _run(probe.call_service("/robofollow/trial/stop", {}), loop)
        assert stop == {"success": False, "message": "stop handled"}
        assert calls == ["start", "stop"]
        missing = _run(probe.call_service("/robofollow/trial/next", {}), loop)  # no trial manager serves it
        assert missing["success"] is False and "not available" in missing["message"]

        trial_pub.publish(String(data=json.dumps({**trial, "phase": "done"})))
        ros.wait_for(lambda: not node.session.recording_open, 10, "the recording to close")
    finally:
        _run(probe.close(), loop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    rec = read_recording(node.session.recording)
    assert rec.truncated is None and rec.trial == "ros_trial_1" and len(rec.frames) == len(frames)
    assert rec.live_result is not None and comparable(rescore(rec)) == comparable(rec.live_result)
    # the recording is a ROS 2 bag with what the graph carried (robot model re-logged at the trial's start)
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(node.session.recording) as reader:
        got: dict[str, Any] = {c.topic: store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages()}
    assert got["/robot_description"].data == URDF
    assert got["/tf_static"].transforms[0].child_frame_id == "head_camera_optical"
    assert got["/cameras/head/camera_info"].k[2] == 160.0
    assert got["/cameras/head/image_raw/compressed"].header.frame_id == "head_camera_optical"


def test_node_serves_the_descriptions_meshes_to_viewers_and_nothing_else(graph: Any, tmp_path: Path) -> None:
    """The description from the graph names its mesh by file://; viewers get it by package:// from the node."""
    ros, node, _calls = graph
    mesh = tmp_path / "meshes" / "link.stl"
    mesh.parent.mkdir()
    mesh.write_bytes(b"solid link\nendsolid link\n")
    urdf = (f"<robot name='lab arm'><link name='l'><visual><geometry><mesh filename='file://{mesh}'/></geometry>"
            "</visual></link></robot>")
    uri = "package://robofollow_rig/lab_arm/link.stl"
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    probe = FoxgloveProbe(f"ws://127.0.0.1:{node.server.port}")
    try:
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
        ros.node("test_publishers").create_publisher(String, "/robot_description", latched).publish(String(data=urdf))
        ros.wait_for(lambda: uri in node.channels.assets.files, 20, "the description forwarded")
        _run(probe.connect(), loop)
        _run(probe.wait_for(lambda: topics.ROBOT_DESCRIPTION in {c["topic"] for c in probe.channels.values()}, 10,
                            "advertisements"), loop)
        _run(probe.subscribe([topics.ROBOT_DESCRIPTION]), loop)
        _run(probe.wait_for(lambda: bool(probe.messages(topics.ROBOT_DESCRIPTION)), 10, "the description"), loop)
        assert probe.decode(probe.messages(topics.ROBOT_DESCRIPTION)[-1]).data == urdf.replace(f"file://{mesh}", uri)
        assert "assets" in probe.server_info["capabilities"]
        assert _run(probe.fetch_asset(uri), loop) == mesh.read_bytes()
        for other in (f"file://{mesh}", "package://robofollow_rig/lab_arm/../../../etc/passwd",
                      "package://robofollow_rig/lab_arm/other.stl"):
            with pytest.raises(LookupError, match="not a file of the current robot description"):
                _run(probe.fetch_asset(other), loop)
    finally:
        _run(probe.close(), loop)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def test_bad_parameters_and_images_are_rejected_with_the_field() -> None:
    from robofollow_ros.nodes._params import ParameterError

    bad_port = r"'port' = 70000 rejected: must be in 0\.\.65535"
    with RosHarness() as ros, pytest.raises(ParameterError, match=bad_port):
        FoxgloveNode(context=ros.context, parameter_overrides=[Parameter("port", value=70000)])
    with pytest.raises(ValueError, match="image encoding: expected rgb8 or bgr8, got 'mono8'"):
        image_to_rgb(Image(height=1, width=1, encoding="mono8", step=1, data=b"\x00"))
    bgr = Image(height=1, width=2, encoding="bgr8", step=8, data=bytes([1, 2, 3, 4, 5, 6, 0, 0]))
    assert image_to_rgb(bgr).tolist() == [[[3, 2, 1], [6, 5, 4]]]
