"""policy_node against a stand-in for the robot side: lock-step row pacing, the observation contract (and the
privileged extension only when asked for), a failing policy failing only its trial, and holding when joint
states go stale at the control rate."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OPTICAL_FRAMES, camera_image_topic
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import image_msg, joint_state_msg, joint_vector, object_markers_msg, stamp_ns
from robofollow_ros.nodes.policy_node import PolicyNode
from ros_harness import RosHarness

SEEN: list[dict[str, Any]] = []


class Recorder:
    """Remembers every observation; answers 3 rows that nudge joint 1."""

    def reset(self) -> None:
        SEEN.clear()

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        SEEN.append(obs)
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32)
        return np.stack([vector + 0.01 * (k + 1) for k in range(3)])


class Broken:
    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> Any:
        raise RuntimeError("model exploded")


RELEASE_SLOW = threading.Event()


class Slow:
    """A model that takes its time on the second call, until the test lets it answer."""

    def __init__(self) -> None:
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        self.calls += 1
        if self.calls == 2:
            RELEASE_SLOW.wait(timeout=30)
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32)
        return np.stack([vector + np.float32(0.01 * (k + 1)) for k in range(2)])


def slow() -> Slow:
    return Slow()


def recorder() -> Recorder:
    return Recorder()


def broken() -> Broken:
    return Broken()


def _trial(trial_id: str, max_steps: int, per_step: int) -> String:
    return String(data=tp.encode({"id": trial_id, "phase": "running", "task": "L0_pickup_red_cylinder",
                                  "instruction": "pick it", "max_steps": max_steps, "actions_per_step": per_step,
                                  "start_stamp_ns": 1000}))


@pytest.fixture
def robot():  # type: ignore[no-untyped-def]
    """A fake lock-step sim: every command is answered with objects, then joint states, one stamp later.

    Spun one callback at a time, as policy_node spins in its own process (``nodes._main.run_node``): rclpy's
    multi-threaded executor busy-waits while the node's callback group is busy (see ``RosHarness``). A CI run
    under it once saw no joint state reach the node for over ``stale_s`` (5 s) mid-trial: a stale-state fault
    after 3 of 4 rows in ``test_rate_mode_holds_while_the_policy_is_stale``, never seen outside CI."""
    with RosHarness(single_threaded=True) as ros:
        side = ros.node("fake_sim")
        got: dict[str, list] = {"commands": [], "status": []}
        answer_first = [10**9]  # commands answered before the fake sim falls silent
        joints = side.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
        objects = side.create_publisher(type(object_markers_msg({}, 0)), "/robofollow/objects", tp.STATE_STREAM)
        trial = side.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        stamp = [1000]

        def publish_state(vector: np.ndarray) -> None:
            poses = {"cube": ([0.1, -0.05, 0.76 + stamp[0] * 1e-9], [1.0, 0.0, 0.0, 0.0])}
            objects.publish(object_markers_msg(poses, stamp[0]))
            joints.publish(joint_state_msg(vector, stamp[0]))

        def on_command(msg: JointState) -> None:
            got["commands"].append(msg)
            if len(got["commands"]) > answer_first[0]:
                ros.notify()
                return
            stamp[0] += 4_000_000
            publish_state(joint_vector(msg))
            ros.notify()

        side.create_subscription(JointState, "/robofollow/joint_command", on_command, tp.STATE_STREAM)
        side.create_subscription(String, tp.TOPIC_POLICY_STATUS, ros.collector(got["status"]), tp.LATCHED)
        got["answer_first"] = answer_first
        yield ros, got, trial, publish_state


def _done(got):  # type: ignore[no-untyped-def]
    states = [json.loads(m.data) for m in got["status"]]
    return next((s for s in states if s["state"] == "done"), None)


def test_lockstep_sends_each_row_after_the_previous_state_and_adds_privileged_obs_when_asked(robot):
    ros, got, trial, publish_state = robot
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[
        Parameter("policy", value="test_node_policy:recorder"), Parameter("privileged", value=True)]))
    trial.publish(_trial("t1", max_steps=2, per_step=2))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: bool(SEEN), what="first predict")
    ros.wait_for(lambda: _done(got) is not None, what="policy done")
    done = _done(got)
    assert (done["steps"], done["rows"], done["error"]) == (2, 4, None)
    assert len(got["commands"]) == 4  # only the first actions_per_step rows of each chunk
    first, second = SEEN
    assert first["instruction"] == "pick it"
    assert first["privileged"]["task_id"] == "L0_pickup_red_cylinder"
    assert set(first["privileged"]["objects"]) == {"cube"}
    assert first["privileged"]["object_quats"]["cube"] == [1.0, 0.0, 0.0, 0.0]
    assert first["observation"]["head_camera"]["rgb"] is None  # no camera in this graph
    # the second observation is the state after row 2, with the objects of that very stamp
    np.testing.assert_allclose(second["joint_action"]["vector"][0], 0.02, atol=1e-6)
    assert second["privileged"]["objects"]["cube"][2] == pytest.approx(0.76 + (1000 + 2 * 4_000_000) * 1e-9, abs=1e-12)
    assert done["last_stamp_ns"] == stamp_ns(got["commands"][-1].header.stamp) + 4_000_000


SPY = "robofollow_ros.policy.drills.spy:spy"
#: The documented observation, every key path down to the leaves (docs/protocols.md).
CONTRACT = {"observation.head_camera.rgb", "observation.left_camera.rgb", "observation.right_camera.rgb",
            "joint_action.vector", "instruction"}
PRIVILEGED = {"privileged.task_id", "privileged.objects.cube", "privileged.object_quats.cube"}


def _spied(robot, record, *parameters: Parameter) -> list[set[str]]:  # type: ignore[no-untyped-def]
    """Run one two-call trial through policy_node; the key paths the spy saw at each call."""
    from robofollow_ros.policy.drills.spy import read_record

    ros, got, trial, publish_state = robot
    ros.add(PolicyNode(context=ros.context, parameter_overrides=list(parameters)))
    trial.publish(_trial("spy", max_steps=2, per_step=1))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: _done(got) is not None, timeout=30,
                      what="policy done")
    assert _done(got)["error"] is None and _done(got)["steps"] == 2  # the spy wrote before each call returned
    return [set(line["keys"]) for line in read_record(str(record))]


def test_behind_the_ros_graph_a_policy_is_handed_the_contract_and_nothing_else(robot, tmp_path):
    record = tmp_path / "seen.jsonl"
    seen = _spied(robot, record, Parameter("policy", value=SPY),
                  Parameter("policy_kwargs", value=json.dumps({"record": str(record)})))
    assert seen == [CONTRACT, CONTRACT]  # no privileged by default, though /robofollow/objects is published


def test_behind_the_ros_graph_privileged_true_hands_it_over(robot, tmp_path):
    record = tmp_path / "seen.jsonl"
    seen = _spied(robot, record, Parameter("policy", value=SPY), Parameter("privileged", value=True),
                  Parameter("policy_kwargs", value=json.dumps({"record": str(record)})))
    assert seen == [CONTRACT | PRIVILEGED] * 2


@pytest.mark.parametrize("privileged", [False, True])
def test_policy_node_forwards_privileged_over_tcp_only_when_asked(robot, tmp_path, privileged):
    """A served model behind policy_node's tcp:// client: the contract, plus privileged only with the flag."""
    from robofollow_ros.policy.drills.spy import SpyPolicy
    from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer

    record = tmp_path / "seen.jsonl"
    with RoboFollowTcpServer(lambda: SpyPolicy(str(record)), "127.0.0.1", 0) as server:
        server.start()
        flag = [Parameter("privileged", value=True)] if privileged else []  # the default: not forwarded
        seen = _spied(robot, record, Parameter("policy", value=f"tcp://127.0.0.1:{server.address[1]}"), *flag)
    assert seen == [CONTRACT | (PRIVILEGED if privileged else set())] * 2


def test_a_raising_policy_fails_its_trial_with_the_reason(robot):
    ros, got, trial, publish_state = robot
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[Parameter("policy", value="test_node_policy:broken")]))
    trial.publish(_trial("t2", max_steps=3, per_step=2))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: _done(got) is not None, what="policy done")
    done = _done(got)
    assert done["steps"] == 0 and "model exploded" in done["error"] and not got["commands"]


def test_rate_mode_holds_the_measured_position_when_joint_states_go_stale(robot):
    ros, got, trial, publish_state = robot
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[
        # stale_s well above the stalls of a loaded test process, which runs every node on one lock
        # (a full local run once saw the answered states stop for 1 s after 9 commands)
        Parameter("mode", value="rate"), Parameter("stale_s", value=3.0), Parameter("privileged", value=False),
        Parameter("control_hz", value=100.0)]))
    measured = np.full(14, 0.25)
    got["answer_first"][0] = 20  # the fake sim answers 20 commands with states, then falls silent
    trial.publish(_trial("t3", max_steps=100000, per_step=5))
    ros.publish_until(lambda: publish_state(measured), lambda: len(got["commands"]) > 0, what="first command")
    ros.wait_for(lambda: _done(got) is not None, timeout=30, what="stale hold")
    done = _done(got)
    # reported as what it is, the graph falling behind, not as the policy's error (trial_faults.FAULT_STALE)
    assert done["fault"] == "stale-state" and "stale" in done["fault_reason"] and done["error"] is None
    assert len(got["commands"]) > 20
    hold = joint_vector(got["commands"][-1])
    np.testing.assert_allclose(hold, joint_vector(got["commands"][19]))  # the last measured vector


def test_rate_mode_holds_while_the_policy_is_stale(robot):
    ros, got, trial, publish_state = robot
    RELEASE_SLOW.clear()
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[
        Parameter("policy", value="test_node_policy:slow"), Parameter("mode", value="rate"),
        Parameter("privileged", value=False), Parameter("control_hz", value=100.0), Parameter("stale_s", value=5.0),
        Parameter("policy_stale_s", value=0.5)]))
    measured = np.full(14, 0.3)
    trial.publish(_trial("t4", max_steps=2, per_step=2))
    # the fake arm reports `measured` until the first command, then the state each command leads to
    ros.wait_for(lambda: (not got["commands"] and publish_state(measured)) or len(got["commands"]) >= 3,
                 timeout=30, what="two rows, then a hold while the second predict hangs")
    sent = [joint_vector(c) for c in got["commands"]]
    # rows always differ; a command equal to the one before it is the hold of the state that row reached
    assert any(np.array_equal(sent[i], sent[i - 1]) for i in range(1, len(sent)))
    assert _done(got) is None  # the trial goes on: a slow model is held, not failed
    RELEASE_SLOW.set()
    ros.publish_until(lambda: publish_state(measured), lambda: _done(got) is not None, timeout=30, what="policy done")
    assert _done(got)["error"] is None and _done(got)["rows"] == 4


def test_a_best_effort_camera_driver_feeds_the_policy(robot):
    """Camera drivers (realsense2_camera, usb_cam ...) often publish best effort: the default sensor-data
    subscription must match them, or a policy on the rig would see no picture at all."""
    ros, got, trial, publish_state = robot
    policy = ros.add(PolicyNode(context=ros.context, parameter_overrides=[
        Parameter("policy", value="test_node_policy:recorder"), Parameter("mode", value="rate"),
        Parameter("privileged", value=False), Parameter("control_hz", value=100.0), Parameter("stale_s", value=5.0)]))
    camera = ros.node("best_effort_camera")
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    publishers = {c: camera.create_publisher(Image, camera_image_topic(c), best_effort) for c in CAMERA_NAMES}
    picture = np.zeros((240, 320, 3), dtype=np.uint8)
    picture[100:140, 150:170] = (200, 30, 30)

    def tick() -> None:  # the camera driver at its own rate, stamped with its clock (after the trial start)
        for c, pub in publishers.items():
            pub.publish(image_msg(picture, 10**9, CAMERA_OPTICAL_FRAMES[c]))

    camera.create_timer(0.02, tick)
    ros.wait_for(lambda: len(policy.cache.images(0)) == len(CAMERA_NAMES), timeout=30,
                 what="every camera's picture in the policy node")
    trial.publish(_trial("t5", max_steps=2, per_step=1))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: _done(got) is not None, timeout=30,
                      what="policy done")
    assert _done(got)["error"] is None
    for obs in SEEN:
        for key in ("head_camera", "left_camera", "right_camera"):
            assert np.array_equal(obs["observation"][key]["rgb"], picture), key


def test_policy_check_names_an_unreachable_address(robot):
    import socket

    ros, _, _, _ = robot
    with socket.socket() as unused:  # a port nobody listens on: bound, never listening
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        ros.add(PolicyNode(context=ros.context, parameter_overrides=[
            Parameter("policy", value=f"tcp://127.0.0.1:{port}")]))
        client = ros.node("checker").create_client(Trigger, tp.SERVICE_POLICY_CHECK)
        assert client.wait_for_service(timeout_sec=10)
        reply = client.call_async(Trigger.Request())
        ros.wait_for(reply.done, timeout=30, what="the check's answer")
    assert not reply.result().success
    assert f"tcp://127.0.0.1:{port}" in reply.result().message and "refused" in reply.result().message


STALL = [Parameter("policy", value="robofollow_ros.policy.drills.scripted:dying"),
         Parameter("policy_kwargs", value='{"mode": "sleep", "sleep_s": 3600.0}')]


def _done_of(got, trial_id: str):  # type: ignore[no-untyped-def]
    states = [json.loads(m.data) for m in got["status"]]
    return next((s for s in states if s["state"] == "done" and s["trial_id"] == trial_id), None)


def test_a_stalled_policy_fails_its_trial_at_the_policy_timeout_and_the_next_trial_gets_a_fresh_one(robot):
    ros, got, trial, publish_state = robot
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[*STALL, Parameter("policy_timeout_s", value=0.5)]))
    for trial_id in ("s1", "s2"):
        trial.publish(_trial(trial_id, max_steps=3, per_step=2))
        ros.wait_for(lambda t=trial_id: publish_state(np.zeros(14)) or _done_of(got, t) is not None, timeout=30,
                     what=f"trial {trial_id} to fail on the timeout")
        # robofollow eval's reason; for s2 too: a reused policy, still stuck in s1's call, would answer "busy"
        assert _done_of(got, trial_id)["error"] == "PolicyTimeoutError: policy predict: no answer within 0.5 s"
        assert _done_of(got, trial_id)["steps"] == 0 and not got["commands"]


def test_a_trial_a_fault_stopped_abandons_the_call_in_flight_without_blaming_the_policy(robot):
    ros, got, trial, publish_state = robot
    node = ros.add(PolicyNode(context=ros.context, parameter_overrides=[*STALL]))  # the default timeout: 300 s
    trial.publish(_trial("s3", max_steps=3, per_step=2))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: node._predict_since is not None, timeout=30,
                      what="a predict in flight")
    stopping = json.loads(_trial("s3", 3, 2).data) | {"phase": "stopping", "fault": "e-stop"}
    trial.publish(String(data=tp.encode(stopping)))
    ros.wait_for(lambda: _done_of(got, "s3") is not None, timeout=30, what="the stopped trial to end")
    assert _done_of(got, "s3")["error"] is None and _done_of(got, "s3")["steps"] == 0
    assert node.policy.stuck  # the call runs on in its thread; the next trial would get a fresh policy


def test_a_trial_its_time_budget_stopped_lets_the_call_in_flight_answer_or_time_out(robot):
    """The trial's time budget is not a fault: a stalled call still fails the trial at its own timeout, as in
    robofollow eval (it is not abandoned and scored as if the policy had done nothing wrong)."""
    ros, got, trial, publish_state = robot
    node = ros.add(PolicyNode(context=ros.context, parameter_overrides=[*STALL, Parameter("policy_timeout_s",
                                                                                          value=2.0)]))
    trial.publish(_trial("s4", max_steps=3, per_step=2))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: node._predict_since is not None, timeout=30,
                      what="a predict in flight")
    stopping = json.loads(_trial("s4", 3, 2).data) | {"phase": "stopping"}
    trial.publish(String(data=tp.encode(stopping)))
    ros.wait_for(lambda: _done_of(got, "s4") is not None, timeout=30, what="the stopped trial to end")
    assert _done_of(got, "s4")["error"] == "PolicyTimeoutError: policy predict: no answer within 2 s"


def test_a_stalled_remote_policy_fails_its_trial_at_the_policy_timeout_too(robot):
    """The same bound behind ``robofollow serve``'s wire: policy_node's guard speaks, not the socket."""
    from robofollow_ros.policy.drills.scripted import FaultyPolicy
    from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer

    ros, got, trial, publish_state = robot
    hung = FaultyPolicy("hang", hang_s=60)
    with RoboFollowTcpServer(hung, "127.0.0.1", 0) as server:
        server.start()
        try:
            ros.add(PolicyNode(context=ros.context, parameter_overrides=[
                Parameter("policy", value=f"tcp://127.0.0.1:{server.address[1]}"),
                Parameter("policy_timeout_s", value=1.0)]))
            trial.publish(_trial("r1", max_steps=3, per_step=2))
            ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: _done_of(got, "r1") is not None, timeout=30,
                              what="the remote trial to fail on the timeout")
            assert _done_of(got, "r1")["error"] == "PolicyTimeoutError: policy predict: no answer within 1 s"
        finally:
            hung.release.set()  # let the server's stuck call end before the server closes


#: (monotonic time, chunk number) of each call that reached :class:`Stepped` (after the latency: wait).
STEPPED_CALLS: list[tuple[float, int]] = []


class Stepped:
    """Chunk n (from 1) puts joint 0 at 0.1·n on every row and keeps the other observed joints: a merged
    row is then told apart from any chunk's own rows by its joint 0 alone."""

    def __init__(self) -> None:
        self.n = 0

    def reset(self) -> None:
        self.n = 0
        STEPPED_CALLS.clear()

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        import time

        self.n += 1
        STEPPED_CALLS.append((time.monotonic(), self.n))
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).copy()
        vector[0] = np.float32(0.1 * self.n)
        return np.repeat(vector[None, :], 30, axis=0)


def stepped() -> Stepped:
    return Stepped()


@pytest.mark.exclusive  # counts starved control ticks in real time: run alone (make test)
def test_realtime_rate_mode_keeps_rows_flowing_while_a_predict_is_in_flight_and_merges_the_overlap(robot):
    """30 rows a chunk at 50 Hz, the next one requested with 15 rows (300 ms) still queued, a 100 ms model (a
    3x margin, so that a loaded CI machine does not starve the arm; each row overlaps two chunks at most):
    the arm never runs dry after the first chunk, commands reach the robot while each later call is in flight,
    the overlapping rows are sent merged (weight 0.5: halfway between two chunks), and the done report carries
    the executor's settings and counters."""
    ros, got, trial, publish_state = robot
    latency_s = 0.1
    ros.add(PolicyNode(context=ros.context, parameter_overrides=[
        Parameter("policy", value="latency:100:test_node_policy:stepped"), Parameter("mode", value="rate"),
        Parameter("execution", value="realtime"), Parameter("merge", value="weighted"),
        Parameter("weight", value=0.5), Parameter("threshold", value=15), Parameter("privileged", value=False),
        Parameter("control_hz", value=50.0), Parameter("stale_s", value=5.0)]))
    trial.publish(_trial("rt1", max_steps=4, per_step=30))
    ros.publish_until(lambda: publish_state(np.zeros(14)), lambda: _done(got) is not None, timeout=30,
                      what="the real-time trial to end")
    done = _done(got)
    stats = done["realtime"]
    assert done["error"] is None
    assert done["execution"]["executor"] == "realtime" and done["execution"]["merge"] == "weighted"
    assert done["execution"]["weight"] == 0.5 and done["execution"]["threshold"] == 15
    assert stats["requests"] == 5 and stats["chunks"] == 4 and done["steps"] == 4  # the 5th ends the trial
    assert stats["starved_ticks"] == 0  # after the first chunk, a row on every tick
    assert stats["hold_ticks"] == stats["idle_in_flight_ticks"] >= 1  # only the cold start held
    assert stats["merged_rows"] > 0 and stats["late_chunks"] == 0
    assert all(latency >= latency_s for latency in stats["latencies_s"])
    # The done report and the last commands travel on different topics: wait for every command, then count.
    ros.wait_for(lambda: len(got["commands"]) >= stats["rows_sent"] + stats["hold_ticks"], timeout=10,
                 what="every command the done report counts")
    assert done["rows"] == stats["rows_sent"] == len(got["commands"]) - stats["hold_ticks"]
    # Every later call was in flight while rows went out: the executor counts, at the source, each tick it had
    # nothing to send while a call ran (idle_in_flight_ticks: here only the cold start, asserted above). The
    # arrival times at a test subscriber are not a measure of it: delivery may lag behind the call in a long run.
    assert len(STEPPED_CALLS) >= stats["chunks"]  # every chunk came from a call of the model behind the wait
    joint0 = [round(float(joint_vector(c)[0]), 4) for c in got["commands"]]
    chunks = {round(0.1 * n, 4) for n in range(1, 5)}
    # A merged row is halfway (weight 0.5) between a queued row and the new chunk's row. A queued row is usually a
    # chunk's own; on a loaded machine a late call can meet rows that were merged already (0.25 and 0.4 -> 0.325).
    reachable = chunks | {0.0}
    for _ in range(3):
        reachable |= {round((a + c) / 2, 4) for a in reachable for c in chunks if a < c}
    merged = set(joint0) - chunks - {0.0}
    assert set(joint0) <= reachable  # holds of the measured 0, chunk rows, rows merged at weight 0.5
    assert merged  # the overlap was sent merged
    assert joint0 == sorted(joint0)  # and never went back
