"""arm_bridge_node over real DDS: mapping to ros2_control-style driver topics, and the safety rules.

The physical arms are the one boundary this machine cannot have: a test node stands in for their
drivers behind the same topics (driver joint states in, driver commands out).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rclpy.duration import Duration
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.arm_bridge_node import ArmBridgeNode
from ros_harness import RosHarness
from waiting import poll_until

DRIVERS = """
arms:
  left:
    type: forward_command
    command_topic: /test_left/commands
    state_topic: /test_left/joint_states
    joints: [la1, la2, la3, la4, la5, la6]
    gripper: {joint: lg, closed: 0.0, open: 0.04}
  right:
    type: joint_trajectory
    command_topic: /test_right/joint_trajectory
    state_topic: /test_right/joint_states
    joints: [ra1, ra2, ra3, ra4, ra5, ra6]
    gripper: {joint: rg, closed: 0.01, open: 0.07, measures: opening}
"""


@dataclass
class Bench:
    ros: RosHarness
    got: dict[str, list]
    command: Any
    estop: Any
    bridge: ArmBridgeNode
    driver: Any
    publish_state: Callable[..., None]


@pytest.fixture
def bench(tmp_path):  # type: ignore[no-untyped-def]
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS)
    with RosHarness(single_threaded=True) as ros:  # the bridge's executor in its own process (run_node)
        bridge = ArmBridgeNode(
            context=ros.context,
            parameter_overrides=[
                Parameter("driver_config", value=str(config)),
                Parameter("workspace_check", value=False),
                Parameter("watchdog_timeout_s", value=0.1),
                Parameter("max_step_rad", value=0.3),
            ],
        )
        ros.add(bridge)
        driver = ros.node("fake_arm_drivers")
        got = {"left": [], "right": [], "status": [], "joint_states": []}
        driver.create_subscription(Float64MultiArray, "/test_left/commands", ros.collector(got["left"]), 10)
        driver.create_subscription(JointTrajectory, "/test_right/joint_trajectory", ros.collector(got["right"]), 10)
        driver.create_subscription(String, "/robofollow/arm_bridge/status", ros.collector(got["status"]), 10)
        driver.create_subscription(JointState, "/joint_states", ros.collector(got["joint_states"]), 10)
        left_state = driver.create_publisher(JointState, "/test_left/joint_states", 10)
        right_state = driver.create_publisher(JointState, "/test_right/joint_states", 10)
        command = driver.create_publisher(JointState, "/robofollow/joint_command", 10)
        estop = driver.create_publisher(Bool, "/robofollow/estop", 10)

        def publish_state(left: list[float] | None = None, right: list[float] | None = None) -> None:
            left_state.publish(JointState(name=["la1", "la2", "la3", "la4", "la5", "la6", "lg"],
                                          position=left or [0.1, 0, 0, 0, 0, 0, 0.04]))
            right_state.publish(JointState(name=["ra1", "ra2", "ra3", "ra4", "ra5", "ra6", "rg"],
                                           position=right or [0, 0, 0, 0, 0, 0.2, 0.01]))

        # The drivers report their state until the bridge republishes it as /joint_states.
        ros.publish_until(publish_state, lambda: bool(got["joint_states"]), what="/joint_states from the bridge")
        yield Bench(ros, got, command, estop, bridge, driver, publish_state)


@pytest.fixture
def rig(bench):  # type: ignore[no-untyped-def]
    return bench.ros, bench.got, bench.command, bench.estop


def _send(command, values):  # type: ignore[no-untyped-def]
    command.publish(JointState(name=list(JOINT_NAMES), position=[float(v) for v in values]))


def test_driver_states_become_contract_joint_states(rig):
    _, got, _, _ = rig
    msg = got["joint_states"][-1]
    assert list(msg.name) == list(JOINT_NAMES)
    assert msg.position[0] == pytest.approx(0.1) and msg.position[6] == pytest.approx(1.0)  # left open
    assert msg.position[12] == pytest.approx(0.2) and msg.position[13] == pytest.approx(0.0)  # right closed


def test_command_is_mapped_to_each_driver(rig):
    ros, got, command, _ = rig
    target = [0.15, 0, 0, 0, 0, 0, 0.9, 0, 0, 0, 0, 0, 0.25, 0.1]
    _send(command, target)
    ros.wait_for(lambda: got["left"] and got["right"], what="driver commands")
    assert got["left"][-1].data.tolist() == pytest.approx([0.15, 0, 0, 0, 0, 0, 0.036])
    traj = got["right"][-1]
    assert list(traj.joint_names) == ["ra1", "ra2", "ra3", "ra4", "ra5", "ra6", "rg"]
    assert list(traj.points[0].positions) == pytest.approx([0, 0, 0, 0, 0, 0.25, 0.016])  # 0.01 + 0.1 · 0.06


def test_large_gripper_jump_is_clamped_per_step(rig):
    ros, got, command, _ = rig
    _send(command, [0.1, 0, 0, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0.2, 0.0])  # left gripper 1.0 -> 0.0
    # The command, then (100 ms later, under load perhaps before this wakes) the watchdog's hold at the measured
    # 0.04: judge the commanded gripper values, never a position beyond one 0.2 step towards closed.
    def moved() -> list[float]:
        return [m.data[6] for m in got["left"] if m.data[6] != pytest.approx(0.04)]

    ros.wait_for(moved, what="left command that moves the gripper")
    assert moved()[0] == pytest.approx(0.8 * 0.04)  # one 0.2 step towards closed
    assert min(moved()) == pytest.approx(0.8 * 0.04)


def test_out_of_limit_target_is_clamped_and_reported(rig):
    ros, got, command, _ = rig
    target = [0.1, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0]
    target[0] = 0.1 + 0.29  # within the step clamp, but …
    target[7] = -50.0  # … right_joint1 is far outside its URDF limits
    _send(command, target)
    ros.wait_for(lambda: any("right_joint1" in s.data for s in got["status"]), what="clamp report")
    report = json.loads(next(s.data for s in got["status"] if "right_joint1" in s.data))
    assert report["clamped"] and not report["hold"]
    sent = got["right"][-1].points[0].positions[0]
    assert -0.3 - 1e-9 <= sent < 0  # clamped by the step limit towards the (clamped) target


def test_nan_is_rejected_and_the_arm_holds(rig):
    ros, got, command, _ = rig
    target = [0.1, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0]
    target[3] = math.nan
    _send(command, target)
    ros.wait_for(lambda: any("non-finite" in s.data for s in got["status"]), what="NaN report")
    assert got["left"][-1].data.tolist() == pytest.approx([0.1, 0, 0, 0, 0, 0, 0.04])  # measured position


def test_watchdog_holds_after_commands_stop(rig):
    ros, got, command, _ = rig
    _send(command, [0.12, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    ros.wait_for(lambda: any("watchdog" in s.data for s in got["status"]), what="watchdog hold")
    reason = next(json.loads(s.data) for s in got["status"] if "watchdog" in s.data)
    assert reason["hold"]
    age_ms = float(reason["reasons"][0].split("no command for ")[1].split(" ms")[0])
    assert age_ms >= 100  # it waited for the timeout before holding
    assert got["left"][-1].data.tolist() == pytest.approx([0.1, 0, 0, 0, 0, 0, 0.04])


def test_estop_holds_and_blocks_commands(rig):
    ros, got, command, estop = rig
    estop.publish(Bool(data=True))
    ros.wait_for(lambda: any("e-stop" in s.data for s in got["status"]), what="e-stop hold")
    count = len(got["status"])
    _send(command, [0.2, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    ros.wait_for(lambda: len(got["status"]) > count, what="held command report")
    assert "e-stop" in got["status"][-1].data
    assert got["left"][-1].data.tolist() == pytest.approx([0.1, 0, 0, 0, 0, 0, 0.04])


def test_bad_parameter_is_rejected_with_its_name(tmp_path):
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS)
    with RosHarness() as ros, pytest.raises(Exception, match="watchdog_timeout_s"):
        ArmBridgeNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value=str(config)), Parameter("watchdog_timeout_s", value=-1.0)])


def test_one_joint_state_per_round_of_driver_states_stamped_as_the_drivers_measured(tmp_path):
    """Each arm's driver reports on its own; /joint_states is published once both have reported, with the
    newest driver stamp (what the drivers measured, not when the bridge heard of it)."""
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS)
    with RosHarness() as ros:
        ros.add(ArmBridgeNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value=str(config)), Parameter("workspace_check", value=False)]))
        driver = ros.node("fake_arm_drivers")
        out: list = []
        driver.create_subscription(JointState, "/joint_states", ros.collector(out), 10)
        left = driver.create_publisher(JointState, "/test_left/joint_states", 10)
        right = driver.create_publisher(JointState, "/test_right/joint_states", 10)

        def state(names: list[str], value: float, sec: int) -> JointState:
            msg = JointState(name=names, position=[value] * 6 + [0.0])
            msg.header.stamp.sec = sec
            return msg

        lnames = ["la1", "la2", "la3", "la4", "la5", "la6", "lg"]
        rnames = ["ra1", "ra2", "ra3", "ra4", "ra5", "ra6", "rg"]
        ros.wait_for(lambda: left.get_subscription_count() and right.get_subscription_count(), what="the bridge")
        left.publish(state(lnames, 0.1, 5))
        with pytest.raises(TimeoutError):  # half a round: nothing yet (a bounded wait for a negative)
            ros.wait_for(lambda: bool(out), timeout=1.0)
        right.publish(state(rnames, 0.3, 7))
        ros.wait_for(lambda: out, what="/joint_states")
        right.publish(state(rnames, 0.5, 9))  # the other order: the newest stamp still wins
        left.publish(state(lnames, 0.4, 8))
        ros.wait_for(lambda: len(out) >= 2, what="the second round")
    assert [m.header.stamp.sec for m in out] == [7, 9]
    assert out[0].position[0] == pytest.approx(0.1) and out[0].position[7] == pytest.approx(0.3)
    assert out[1].position[0] == pytest.approx(0.4) and out[1].position[7] == pytest.approx(0.5)


def test_drivers_sharing_one_state_topic(tmp_path):
    """One joint_state_broadcaster for both arms: one message carries both, one /joint_states follows."""
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS.replace("/test_left/joint_states", "/both/joint_states")
                      .replace("/test_right/joint_states", "/both/joint_states"))
    with RosHarness() as ros:
        ros.add(ArmBridgeNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value=str(config)), Parameter("workspace_check", value=False)]))
        driver = ros.node("broadcaster")
        out: list = []
        driver.create_subscription(JointState, "/joint_states", ros.collector(out), 10)
        both = driver.create_publisher(JointState, "/both/joint_states", 10)
        msg = JointState(name=["la1", "la2", "la3", "la4", "la5", "la6", "lg", "ra1", "ra2", "ra3", "ra4", "ra5",
                               "ra6", "rg"], position=[0.1] * 6 + [0.04] + [0.2] * 6 + [0.07])
        ros.publish_until(lambda: both.publish(msg), lambda: bool(out), what="/joint_states from one shared topic")
    assert out[0].position[6] == pytest.approx(1.0) and out[0].position[13] == pytest.approx(1.0)
    assert out[0].position[7] == pytest.approx(0.2)


@pytest.mark.parametrize(("limit", "words"), [
    ('lower="nan" upper="2.6"', ["left_joint1", "not finite"]),
    ('upper="2.6"', ["left_joint1", "no lower"]),
    ('lower="2.6" upper="-2.6"', ["left_joint1", "lower 2.6 > upper -2.6"]),
])
def test_the_bridge_refuses_to_start_on_a_joint_limit_it_cannot_enforce(tmp_path, limit, words):
    from robofollow_ros.paths import share_path

    urdf = share_path("urdf", "robofollow_rig.urdf").read_text()
    bad = urdf.replace('<limit lower="-2.6" upper="2.6"', f"<limit {limit}", 1)
    assert bad != urdf
    path = tmp_path / "rig.urdf"
    path.write_text(bad)
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS)
    with RosHarness() as ros, pytest.raises(ValueError) as info:
        ArmBridgeNode(context=ros.context, parameter_overrides=[
            Parameter("driver_config", value=str(config)), Parameter("urdf", value=str(path))])
    for word in words:
        assert word in str(info.value)


# -- arm safety over DDS: the e-stop replay, arms outside their limits, gripper ranges -------------
MEASURED_LEFT = [0.1, 0, 0, 0, 0, 0, 0.04]  # the fixture's left arm: joint1 at 0.1, gripper open


def _tap(bench: Bench, monkeypatch: pytest.MonkeyPatch, arm: str) -> list[list[float]]:
    """Every left-driver command the bridge sends, at the publisher: none can be lost on the way to a test
    reader that falls behind a flood. (The fake driver's DDS copy is checked too.)"""
    sent: list[list[float]] = []
    (publisher,) = bench.bridge._driver_pubs[arm]  # one command channel (an xs_sdk's arm has two)
    publish = publisher.publish

    def tapped(msg: Any) -> None:
        sent.append(list(msg.data))
        publish(msg)

    monkeypatch.setattr(publisher, "publish", tapped)
    return sent


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "unstamped"])
def test_commands_flooded_during_an_estop_are_not_replayed_after_its_release(bench, monkeypatch, stamped):
    """The measured defect: thousands of commands queued while the e-stop was engaged for a second were
    executed after its release (261 of them, up to 2.9 s old; joint 1 travelled 0.5 rad). Each flooded
    command carries a marker (left_joint2 = its index · 1e-4, within a step) and asks left_joint1 to move
    0.29 rad (within the step clamp): a replay would go out unchanged and be recognised."""
    ros, got, driver = bench.ros, bench.got, bench.driver
    sent = _tap(bench, monkeypatch, "left")
    flood = driver.create_publisher(JointState, "/robofollow/joint_command", tp.STATE_STREAM)  # as policy_node
    ros.wait_for(lambda: flood.get_subscription_count() > 0, what="the bridge on the command topic")

    def command(values: list[float], stamp: bool) -> JointState:
        msg = JointState(name=list(JOINT_NAMES), position=values)
        if stamp:
            msg.header.stamp = driver.get_clock().now().to_msg()
        return msg

    bench.estop.publish(Bool(data=True))
    ros.wait_for(lambda: any(json.loads(s.data)["estop"] for s in got["status"]), what="the e-stop hold")
    engaged = time.monotonic()
    count = 0
    while count < 3000 or time.monotonic() - engaged < 1.0:  # thousands, for a second
        marker = (1 + count % 2999) * 1e-4
        flood.publish(command([0.39, marker, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0], stamped))
        count += 1
    bench.estop.publish(Bool(data=False))
    ros.wait_for(lambda: any("e-stop released" in s.data for s in got["status"]), what="the release report")

    fresh = [0.12, -0.05, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0]  # marker -0.05: sent after the release
    ros.publish_until(lambda: flood.publish(command(fresh, stamped)), lambda: any(c[1] == -0.05 for c in sent),
                      timeout=60, what="motion resuming with a command sent after the release")

    assert bench.bridge.safety.refused_since_release > 0  # commands were still queued at the release ...
    replayed = [c for c in sent if c[1] > 0]
    assert not replayed, f"{len(replayed)} of {count} flooded commands executed"  # ... and none executed
    first_fresh = next(i for i, c in enumerate(sent) if c[1] == -0.05)
    assert first_fresh > 0 and all(c == MEASURED_LEFT for c in sent[:first_fresh])  # held: joint 1 never travelled
    assert sent[first_fresh][0] == 0.12
    ros.wait_for(lambda: any(list(c.data)[1] == -0.05 for c in got["left"]), what="the fresh command over DDS")
    assert not [c for c in got["left"] if c.data[1] > 0]  # and what reached the driver's topic agrees


def test_a_command_stamped_before_the_release_is_refused_though_received_after_it(bench, monkeypatch):
    """A publisher's backlog: computed (stamped) before the release, delivered after it."""
    ros, got, driver = bench.ros, bench.got, bench.driver
    sent = _tap(bench, monkeypatch, "left")
    bench.estop.publish(Bool(data=True))
    ros.wait_for(lambda: any(json.loads(s.data)["estop"] for s in got["status"]), what="the e-stop hold")
    bench.estop.publish(Bool(data=False))
    ros.wait_for(lambda: any("e-stop released" in s.data for s in got["status"]), what="the release report")
    old = JointState(name=list(JOINT_NAMES), position=[0.3, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    old.header.stamp = (driver.get_clock().now() - Duration(seconds=5)).to_msg()
    count, before = len(got["status"]), len(sent)
    bench.command.publish(old)
    ros.wait_for(lambda: any("stamped" in s.data for s in got["status"][count:]), what="the refusal")
    assert sent[before:] and all(c == MEASURED_LEFT for c in sent[before:])  # a hold, not the old target
    new = JointState(name=list(JOINT_NAMES), position=[0.3, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    ros.publish_until(lambda: bench.command.publish(_stamped_now(new, driver)), lambda: any(c[0] == 0.3 for c in sent),
                      what="the command stamped after the release")


def _stamped_now(msg: JointState, node: Any) -> JointState:
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


def test_an_arm_measured_outside_its_limits_is_held_within_them_and_reported(bench, monkeypatch, capfd):
    """left_joint1 reads 4.0 (limit 2.6; 1.4 beyond, more than the 0.3 step): the left arm is sent nothing.
    right_joint2 reads 2.1 (limit 2.0; within a step): the right arm holds with that joint at its limit."""
    ros, got = bench.ros, bench.got
    left_sent, right_sent = _tap(bench, monkeypatch, "left"), []
    (right_publisher,) = bench.bridge._driver_pubs["right"]
    right_publish = right_publisher.publish
    monkeypatch.setattr(right_publisher, "publish",
                        lambda msg: right_sent.append(list(msg.points[0].positions)) or right_publish(msg))
    left, right = [4.0, 0, 0, 0, 0, 0, 0.04], [0, 2.1, 0, 0, 0, 0.2, 0.01]
    ros.publish_until(lambda: bench.publish_state(left, right), lambda: got["joint_states"][-1].position[0] == 4.0,
                      what="the bridge measuring the arms outside their limits")
    _send(bench.command, [2.0, 0, 0, 0, 0, 0, 1.0, 0, 1.9, 0, 0, 0, 0.2, 0.0])
    ros.wait_for(lambda: any(json.loads(s.data).get("outside_limits") for s in got["status"]), what="the report")
    report = next(json.loads(s.data) for s in got["status"] if json.loads(s.data).get("outside_limits"))
    assert report["hold"] and report["arms"] == ["right"]
    assert report["outside_limits"] == [
        {"joint": "left_joint1", "value": 4.0, "lower": -2.6, "upper": 2.6, "commanded": False},
        {"joint": "right_joint2", "value": 2.1, "lower": -1.2, "upper": 2.0, "commanded": True}]
    assert left_sent == []  # nothing for the arm far outside: no target of its would be safe
    assert right_sent[-1] == pytest.approx([0, 2.0, 0, 0, 0, 0.2, 0.01], abs=1e-12)  # held, clipped into the limits
    err: list[str] = []  # the log line: stderr sends no notification, so poll it with a deadline
    line = ("left_joint1 measured 4.0000, outside its limits [-2.6000, 2.6000]: 1.4000 beyond it, more than one "
            "step: the left arm is not commanded; right_joint2 measured 2.1000, outside its limits [-1.2000, 2.0000]: "
            "held at its limit")
    assert poll_until(lambda: err.append(capfd.readouterr().err) or line in "".join(err), timeout_s=5)


def test_the_bridge_refuses_a_driver_map_beyond_the_urdf_finger_range(tmp_path):
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS.replace("closed: 0.0, open: 0.04}", "closed: 0.0, open: 0.045}"))
    with RosHarness() as ros, pytest.raises(ValueError) as info:
        ArmBridgeNode(context=ros.context, parameter_overrides=[Parameter("driver_config", value=str(config))])
    assert str(info.value) == (f"{config}: arms.left.gripper.open: 0.045 lies outside the URDF's left_gripper range "
                               "[0, 0.04] (one finger's travel, measures: finger)")


def test_after_a_watchdog_hold_unstamped_commands_are_refused_until_a_stamped_newer_one(bench, monkeypatch):
    """Issue 36's measured defect: 200 unstamped commands sent before a watchdog hold gave 36 and 68 bridge moves
    (0.30 rad) after it. Now every one is held at the measured position until a command stamped after the hold."""
    ros, got, driver = bench.ros, bench.got, bench.driver
    sent = _tap(bench, monkeypatch, "left")
    _send(bench.command, [0.12, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])  # unstamped: fine before a hold
    ros.wait_for(lambda: any(c[0] == 0.12 for c in sent), what="the first command")
    ros.wait_for(lambda: any("watchdog" in s.data for s in got["status"]), what="the watchdog hold")
    rule = bench.bridge.safety.watchdog_rule
    assert rule is not None and rule > 0  # the newest /joint_states stamp when it held
    before = len(sent)
    for _ in range(200):  # the backlog: left_joint1 0.3 rad, within the step clamp, would go out unchanged
        _send(bench.command, [0.3, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    ros.wait_for(lambda: bench.bridge.safety.refused_since_watchdog >= 200, what="200 refusals")
    assert sent[before:] and all(c == MEASURED_LEFT for c in sent[before:])  # holds: the arm never moved
    fresh = JointState(name=list(JOINT_NAMES), position=[0.2, 0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0.2, 0.0])
    ros.publish_until(lambda: bench.command.publish(_stamped_now(fresh, driver)),
                      lambda: any(c[0] == 0.2 for c in sent), what="the command stamped after the hold")
    assert bench.bridge.safety.watchdog_rule is None or bench.bridge.safety.watchdog_rule > rule
