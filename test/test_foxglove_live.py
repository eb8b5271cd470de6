"""A real Foxglove protocol client (websockets, foxglove.sdk.v1) watches a SAPIEN trial live, gets the robot
model although it connected late, sees each camera's calibration, calls services and is closed properly."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import cv2
import numpy as np
import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.recorder import TrialRecorder
from robofollow_ros.monitoring.replay import comparable, read_recording, rescore
from robofollow_ros.monitoring.server import start_monitor_server
from robofollow_ros.monitoring.ws_client import SUBPROTOCOL, FoxgloveProbe

TASK = "L0_place_yellow_block_1_behind_red_cylinder"
T = TypeVar("T")


class ProbeThread:
    """The client on its own event loop, as a viewer on another machine would be."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.probe = FoxgloveProbe(url)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.run(self.probe.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture()
def live(tmp_path: Path) -> Iterator[tuple[TrialRecorder, ProbeThread, list[str]]]:
    recorder = TrialRecorder(tmp_path / "mcap")
    calls: list[str] = []

    def control(name: str) -> Any:
        def call() -> tuple[bool, str]:
            calls.append(name)
            if name == "stop":
                raise RuntimeError("no trial running")
            return True, f"{name} ok"
        return call

    server = start_monitor_server(recorder.channels, port=0, controls={
        "/robofollow/trial/start": control("start"), "/robofollow/trial/stop": control("stop")})
    client = ProbeThread(f"ws://127.0.0.1:{server.port}")
    try:
        yield recorder, client, calls
    finally:
        client.close()
        server.stop()
        recorder.close()


def test_client_sees_a_sim_trial_live_and_the_recording_matches(live: Any, registry: Any) -> None:
    from robofollow_ros.policy.spec import load_policy
    from robofollow_ros.sim.world import SimWorld

    recorder, client, _ = live
    probe = client.probe
    task = registry.eval_task(TASK)
    world = SimWorld(render=True)
    try:
        # the first trial runs before anyone watches: its robot model is sent before the viewer connects
        run_episode(world, load_policy("oracle", {}), task, task.seed(1), EpisodeSettings(1, 5),
                    observer=recorder.for_trial("before", 1))
        client.run(probe.connect())
        client.run(probe.wait_for(lambda: len(probe.channels) >= len(topics.TOPICS), 10, "channel advertisements"))
        assert probe.server_info["op"] == "serverInfo" and "services" in probe.server_info["capabilities"]
        assert probe._ws.subprotocol == SUBPROTOCOL
        ads = {c["topic"]: c for c in probe.channels.values()}
        for name, topic in topics.TOPICS.items():
            if not name.endswith("/camera_info"):  # live calibration is foxglove's own type (below)
                assert (ads[name]["encoding"], ads[name]["schemaEncoding"]) == ("cdr", "ros2msg")
                assert ads[name]["schemaName"] == topic.type_name
        for camera in ("head", "left_wrist", "right_wrist"):
            calibration = ads[topics.calibration_topic(camera)]
            assert (calibration["schemaName"], calibration["encoding"]) == ("foxglove.CameraCalibration", "protobuf")
        client.run(probe.subscribe())
        channels = recorder.channels
        client.run(probe.wait_for(lambda: channels.live.channels[topics.SCORE].has_sinks(), 10,
                                  "the server to register the subscriptions"))
        client.run(probe.wait_for(lambda: probe.messages(topics.ROBOT_DESCRIPTION) and probe.messages(topics.TF_STATIC),
                                  10, "the latched robot model, re-sent on subscription"))
        trial = "live_trial"
        result = run_episode(world, load_policy("oracle", {}), task, task.seed(1), EpisodeSettings(2, 10),
                             observer=recorder.for_trial(trial, 1))
    finally:
        world.close()
    def done() -> bool:
        return any(json.loads(probe.decode(m).data)["phase"] == "done" for m in probe.messages(topics.TRIAL))

    client.run(probe.wait_for(done, 20, "the trial's done state"))

    assert "<robot" in probe.decode(probe.messages(topics.ROBOT_DESCRIPTION)[0]).data
    images = probe.messages(topics.camera_topic("head"))
    assert images, "no camera image delivered"
    jpeg = probe.decode(images[0])
    assert jpeg.format == "jpeg" and jpeg.header.frame_id == "head_camera_optical"
    assert cv2.imdecode(np.frombuffer(bytes(jpeg.data), np.uint8), cv2.IMREAD_COLOR).shape == (240, 320, 3)
    for camera in ("head", "left_wrist", "right_wrist"):
        calibration = probe.decode(probe.messages(topics.calibration_topic(camera))[-1])
        assert calibration.frame_id == f"{camera}_camera_optical" and (calibration.width, calibration.height) == (
            320, 240) and calibration.K[2] == 160.0
    links = {t.child_frame_id for m in probe.messages(topics.TF) for t in probe.decode(m).transforms}
    assert {"left_link1", "right_link6", "right_finger_a", "object/yellow_block_1"} <= links
    scene = probe.decode(probe.messages(topics.SCENE)[-1])
    ns = {m.ns for m in scene.markers}
    assert {"table", "object/yellow_block_1", "object/red_cylinder", "region/target", "ee/right"} <= ns
    scores = [json.loads(probe.decode(m).data) for m in probe.messages(topics.SCORE)]
    scores = scores[[i for i, s in enumerate(scores) if s["frame"] == 0][-1]:]  # this trial's
    assert scores[-1]["final"] is True and scores[-1]["intent"] == result["intent_score"]
    assert [s["frame"] for s in scores[:-1]] == list(range(result["frames"]))
    assert probe.decode(probe.messages(topics.STAGES)[-1]).data[0] == result["intent_score"]
    assert probe.messages(topics.JOINT_STATES) and probe.messages(topics.ROSOUT) and probe.messages(topics.STATUS)

    rec = read_recording(recorder.path_of(trial))  # the same trial went to MCAP at the same time
    assert rec.truncated is None and len(rec.frames) == result["frames"]
    assert comparable(rescore(rec)) == comparable(result)


def test_services_call_the_trial_controls(live: Any) -> None:
    _, client, calls = live
    probe = client.probe
    client.run(probe.connect())
    client.run(probe.wait_for(lambda: len(probe.services) == 2, 10, "service advertisements"))
    assert probe.services["/robofollow/trial/start"]["type"] == "std_srvs/srv/Trigger"
    assert client.run(probe.call_service("/robofollow/trial/start", {})) == {"success": True, "message": "start ok"}
    stop = client.run(probe.call_service("/robofollow/trial/stop", {}))
    assert stop["success"] is False and "no trial running" in stop["message"]
    assert calls == ["start", "stop"]


def test_stopping_the_server_sends_every_viewer_a_close_frame() -> None:
    from robofollow_ros.monitoring.channels import TrialChannels

    server = start_monitor_server(TrialChannels(), port=0)
    client = ProbeThread(f"ws://127.0.0.1:{server.port}")
    try:
        client.run(client.probe.connect())
        client.run(client.probe.wait_for(lambda: bool(client.probe.channels), 10, "advertisements"))
        server.stop()
        client.run(client.probe.wait_closed(10))
        # a close frame arrived (the SDK's has no status code: 1005); a dropped socket would read 1006
        assert client.probe.close_frame_received and client.probe.close_code == 1005
    finally:
        client.close()


def test_bad_server_arguments_name_the_field() -> None:
    from robofollow_ros.monitoring.channels import TrialChannels

    with pytest.raises(ValueError, match=r"port: must be in 0\.\.65535, got 70000"):
        start_monitor_server(TrialChannels(), port=70000)
    with pytest.raises(ValueError, match="controls: unknown service '/robofollow/trial/jump'"):
        start_monitor_server(TrialChannels(), port=0, controls={"/robofollow/trial/jump": lambda: (True, "")})
