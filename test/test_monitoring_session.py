"""LiveSession: one MCAP per trial from message streams, without rclpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.replay import read_recording, rescore
from robofollow_ros.monitoring.session import LiveSession
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor
from robofollow_ros.scoring.synthetic import Puppet

TASK = "L0_pickup_yellow_block_1_left"


def _trial(session: LiveSession, trial_id: str, run_dir: Path, registry: Any) -> dict[str, Any]:
    task = registry.eval_task(TASK)
    session.on_trial({"id": trial_id, "task": TASK, "phase": "resetting", "run_dir": str(run_dir)})
    session.on_trial({"id": trial_id, "task": TASK, "phase": "running", "run_dir": str(run_dir)})
    monitor = StageMonitor(task)
    for i, raw in enumerate(f.to_dict() for f in Puppet(task).pick("left", "yellow_block_1").frames):
        session.on_frame({"trial": trial_id, "task": TASK, "index": i, "frame": raw})
        monitor.update(frame_from_dict(raw, i))
        session.on_score(monitor.live())
    result = monitor.result()
    session.on_score({**monitor.live(), "final": True, "trial_id": trial_id, "result": result})
    return result


def test_each_trial_gets_its_own_file_with_static_tf_and_result(tmp_path: Path, registry: Any) -> None:
    channels = TrialChannels()
    session = LiveSession(channels, registry=registry)
    # the graph latches these once; every recording must still start with them
    channels.send(topics.TF_STATIC, rosmsg.tf_message([rosmsg.transform(0, "world", "left_base", (0, 0, 0),
                                                                        (1, 0, 0, 0))]))
    channels.send(topics.ROBOT_DESCRIPTION, rosmsg.string("<robot name='r'/>"))
    first = _trial(session, "t1", tmp_path, registry)
    second = _trial(session, "t2", tmp_path, registry)  # a new id closes t1's file
    session.on_trial({"id": "t2", "task": TASK, "phase": "done"})
    assert not session.recording_open
    for name, expected in (("t1", first), ("t2", second)):
        rec = read_recording(tmp_path / "mcap" / f"{name}.mcap")
        assert rec.truncated is None and rec.trial == name
        assert rec.topics["/tf_static"] == rec.topics["/robot_description"] == 1  # in each file
        assert rec.live_result == expected and rescore(rec) == expected
        assert rec.topics["/robofollow/trial"] >= 2


def test_forced_directory_and_recording_off(tmp_path: Path, registry: Any) -> None:
    forced = LiveSession(TrialChannels(), record_dir=tmp_path / "forced", registry=registry)
    _trial(forced, "t1", tmp_path / "run", registry)
    forced.close()
    assert (tmp_path / "forced" / "t1.mcap").is_file() and not (tmp_path / "run").exists()
    off = LiveSession(TrialChannels(), record=False, registry=registry)
    _trial(off, "t1", tmp_path / "off", registry)
    off.close()
    assert not (tmp_path / "off").exists()


def test_unknown_task_still_records_but_warns(tmp_path: Path, registry: Any) -> None:
    session = LiveSession(TrialChannels(), record_dir=tmp_path, registry=registry)
    session.on_trial({"id": "x", "task": "no_such_task", "phase": "running"})
    session.close()
    rec = read_recording(tmp_path / "x.mcap")
    assert rec.topics["/rosout"] >= 1 and rec.task == "no_such_task"


def test_streams_out_of_order_across_topics_still_give_complete_recordings(tmp_path: Path, registry: Any) -> None:
    """A separate-process recorder can see the next trial start before this trial's tail, and frames
    before their trial's state: every recording must still hold exactly its own trial."""
    task = registry.eval_task(TASK)
    session = LiveSession(TrialChannels(), registry=registry)
    trials = {}
    for trial_id in ("t1", "t2"):
        monitor = StageMonitor(task)
        msgs = []
        for i, raw in enumerate(f.to_dict() for f in Puppet(task).pick("left", "yellow_block_1").frames):
            monitor.update(frame_from_dict(raw, i))
            msgs.append({"trial": trial_id, "task": TASK, "index": i, "frame": raw})
        final = {**monitor.live(), "final": True, "trial_id": trial_id, "frames": monitor.frame_count,
                 "result": monitor.result()}
        trials[trial_id] = (msgs, final)
    state = {"task": TASK, "run_dir": str(tmp_path)}
    t1_frames, t1_final = trials["t1"]
    t2_frames, t2_final = trials["t2"]
    session.on_frame(t1_frames[0])  # a frame before its trial's state
    session.on_trial({**state, "id": "t1", "phase": "running"})
    for msg in t1_frames[1:-3]:
        session.on_frame(msg)
    session.on_trial({**state, "id": "t1", "phase": "done"})
    session.on_trial({**state, "id": "t2", "phase": "running"})  # next trial before t1's tail
    session.on_frame(t2_frames[0])
    for msg in t1_frames[-3:]:
        session.on_frame(msg)
    session.on_score(t1_final)  # t1 complete: t2 starts from what was held
    for msg in t2_frames[1:]:
        session.on_frame(msg)
    session.on_score(t2_final)
    session.on_trial({**state, "id": "t2", "phase": "done"})
    assert not session.recording_open
    for name, (msgs, final) in trials.items():
        rec = read_recording(tmp_path / "mcap" / f"{name}.mcap")
        assert rec.trial == name and len(rec.frames) == len(msgs)
        assert rec.live_result == final["result"] and rescore(rec) == final["result"]


def test_a_trials_recording_waits_for_its_last_states(tmp_path: Path, registry: Any) -> None:
    """On the graph the joint states and TF lag behind the trial's own messages (other publishers, other
    callbacks): the recording closes only once each stamped state stream reached the trial's end stamp,
    or once one passed it (its last message was lost; what comes next belongs to the next trial)."""
    channels = TrialChannels()
    session = LiveSession(channels, registry=registry)
    names = [f"j{i}" for i in range(14)]

    def state(stamp: int) -> None:  # what foxglove_node does with every forwarded joint state and link TF
        session.on_state("/joint_states", stamp, lambda: channels.send(
            topics.JOINT_STATES, rosmsg.joint_state(stamp, names, [0.0] * 14), stamp))
        session.on_state("/tf links", stamp, lambda: channels.send(
            topics.TF, rosmsg.tf_message([rosmsg.transform(stamp, "left_base", "left_link1", (0, 0, 0),
                                                           (1, 0, 0, 0))]), stamp))

    session.on_trial({"id": "t1", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})
    state(10)  # the start state
    result = _trial(session, "t1", tmp_path, registry)
    session.on_trial({"id": "t1", "task": TASK, "phase": "scoring", "end_stamp_ns": 30})
    session.on_trial({"id": "t1", "task": TASK, "phase": "done", "end_stamp_ns": 30})
    assert session.recording_open  # every frame and the final score are in, the states at 20 and 30 are not
    state(20)
    assert session.recording_open
    state(30)
    assert not session.recording_open
    rec = read_recording(tmp_path / "mcap" / "t1.mcap")
    assert rec.topics["/joint_states"] == rec.topics["/tf"] == 3 and rescore(rec) == result

    session.on_trial({"id": "t2", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})
    state(40)
    _trial(session, "t2", tmp_path, registry)
    session.on_trial({"id": "t2", "task": TASK, "phase": "done", "end_stamp_ns": 50})
    assert session.recording_open
    session.on_trial({"id": "t3", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})  # held
    state(60)  # t2's state at 50 never came: t3's first state closes t2 and goes into t3's file
    assert read_recording(tmp_path / "mcap" / "t2.mcap").topics["/joint_states"] == 1  # only its start
    session.close()
    assert read_recording(tmp_path / "mcap" / "t3.mcap").topics["/joint_states"] == 1


def _image_stamps(bag: Path, camera: str = "head") -> list[int]:
    """Header stamps of a camera's images, read back with rosbags."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    topic = topics.camera_topic(camera)
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        msgs = [reader.deserialize(raw, c.msgtype) for c, _t, raw in
                reader.messages(connections=[c for c in reader.connections if c.topic == topic])]
    return [m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in msgs]  # type: ignore[attr-defined]


def test_each_trial_starts_its_camera_streams_afresh(tmp_path: Path, registry: Any) -> None:
    """The camera rate cap is a schedule per camera; a new trial starts it again, so the previous trial's last
    image a moment ago (foxglove_node logs at receive time) cannot drop the new trial's first image."""
    channels = TrialChannels()  # 15 Hz cap
    session = LiveSession(channels, registry=registry)
    image = np.zeros((48, 64, 3), np.uint8)
    wall = 1_000_000_000_000
    session.on_trial({"id": "t1", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})
    assert channels.log_image("head", image, time_ns=wall, stamp_ns=100)
    _trial(session, "t1", tmp_path, registry)
    session.on_trial({"id": "t1", "task": TASK, "phase": "done"})
    assert not session.recording_open
    session.on_trial({"id": "t2", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})
    assert channels.log_image("head", image, time_ns=wall + 20_000_000, stamp_ns=200)  # 20 ms later
    session.close()
    assert _image_stamps(tmp_path / "mcap" / "t1.mcap") == [100]
    assert _image_stamps(tmp_path / "mcap" / "t2.mcap") == [200]


def test_the_next_trials_first_images_wait_for_its_recording(tmp_path: Path, registry: Any) -> None:
    """Images stamped after the ended trial's end, while its recording still waits for its tail, are the next
    trial's start: they go into the next trial's recording, not the previous one. The recording does not wait
    for images (a camera need not send one at the trial's end stamp)."""
    channels = TrialChannels()
    session = LiveSession(channels, registry=registry)
    image = np.zeros((48, 64, 3), np.uint8)

    def picture(stamp: int) -> None:  # what foxglove_node does with every camera image (log time: receive time)
        session.on_stamped(stamp, lambda: channels.log_image("head", image, time_ns=stamp * 1_000_000,
                                                             stamp_ns=stamp, frame_id="head_camera_optical"))

    session.on_trial({"id": "t1", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})
    picture(100)
    task = registry.eval_task(TASK)
    session.on_trial({"id": "t1", "task": TASK, "phase": "running", "run_dir": str(tmp_path)})
    monitor = StageMonitor(task)
    for i, raw in enumerate(f.to_dict() for f in Puppet(task).pick("left", "yellow_block_1").frames):
        session.on_frame({"trial": "t1", "task": TASK, "index": i, "frame": raw})
        monitor.update(frame_from_dict(raw, i))
    session.on_trial({"id": "t1", "task": TASK, "phase": "done", "end_stamp_ns": 300})
    session.on_trial({"id": "t2", "task": TASK, "phase": "resetting", "run_dir": str(tmp_path)})  # held
    picture(400)  # t2's first picture
    assert session.recording_open  # t1 still waits for its final score
    session.on_score({**monitor.live(), "final": True, "trial_id": "t1", "frames": monitor.frame_count,
                      "result": monitor.result()})
    assert session.recording_open  # t2's now
    picture(500)
    session.on_trial({"id": "t2", "task": TASK, "phase": "done", "end_stamp_ns": 500})
    session.on_score({**monitor.live(), "final": True, "trial_id": "t2", "frames": 0, "result": monitor.result()})
    assert not session.recording_open  # the images did not hold it open
    assert _image_stamps(tmp_path / "mcap" / "t1.mcap") == [100]
    assert _image_stamps(tmp_path / "mcap" / "t2.mcap") == [400, 500]
