"""arm_bridge_node over real DDS: mapping to ros2_control-style driver topics, and the safety rules.

The physical arms are the one boundary this machine cannot have: a test node stands in for their
drivers behind the same topics (driver joint states in, driver commands out).
"""

from __future__ import annotations

import json
import math

import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes.arm_bridge_node import ArmBridgeNode
from ros_harness import RosHarness

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


@pytest.fixture
def rig(tmp_path):  # type: ignore[no-untyped-def]
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS)
    with RosHarness() as ros:
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

        def publish_state() -> None:
            left_state.publish(JointState(name=["la1", "la2", "la3", "la4", "la5", "la6", "lg"],
                                          position=[0.1, 0, 0, 0, 0, 0, 0.04]))
            right_state.publish(JointState(name=["ra1", "ra2", "ra3", "ra4", "ra5", "ra6", "rg"],
                                           position=[0, 0, 0, 0, 0, 0.2, 0.01]))

        # The drivers report their state until the bridge republishes it as /joint_states.
        ros.wait_for(lambda: publish_state() or bool(got["joint_states"]), what="/joint_states from the bridge")
        yield ros, got, command, estop


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
    ros.wait_for(lambda: got["left"], what="left command")
    assert got["left"][-1].data[6] == pytest.approx(0.8 * 0.04)  # one 0.2 step towards closed


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
        ros.wait_for(lambda: both.publish(msg) or bool(out), what="/joint_states from one shared topic")
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


def test_the_bridge_refuses_a_driver_map_beyond_the_urdf_finger_range(tmp_path):
    config = tmp_path / "drivers.yaml"
    config.write_text(DRIVERS.replace("closed: 0.0, open: 0.04}", "closed: 0.0, open: 0.045}"))
    with RosHarness() as ros, pytest.raises(ValueError) as info:
        ArmBridgeNode(context=ros.context, parameter_overrides=[Parameter("driver_config", value=str(config))])
    assert str(info.value) == (f"{config}: arms.left.gripper.open: 0.045 lies outside the URDF's left_gripper range "
                               "[0, 0.04] (one finger's travel, measures: finger)")
