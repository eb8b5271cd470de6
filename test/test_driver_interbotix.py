"""The Interbotix xs_sdk driver kind (Trossen's ALOHA bench): the preset, its checks, the messages both ways.

Facts checked against upstream (cited in ``rig/driver_config.py`` and ``config/rig/aloha_interbotix.yaml``):
the follower namespaces, the group ``arm`` and its six joints, the gripper commanded as the servo's angle
(0.6197 rad closed, 1.6214 rad open), and the fingers that angle puts at 0.0440 m and 0.0579 m (ALOHA's
FOLLOWER_GRIPPER_POSITION_CLOSE/OPEN, to 0.1 mm) through the linkage of aloha_vx300s.yaml.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from interbotix_xs_msgs.msg import JointGroupCommand, JointSingleCommand

from robofollow_ros.bringup import Choices, apply_choices, load_profile
from robofollow_ros.bringup.profiles import ProfileError
from robofollow_ros.nodes.conversions import MessageError
from robofollow_ros.nodes.driver_messages import (
    CommandPairs,
    arm_from_state,
    command_channels,
    command_messages,
    command_part,
    state_message,
)
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import (
    SERVO_RANGE_RAD,
    driver_config_file,
    driver_presets,
    load_driver_config,
)
from robofollow_ros.robot.urdf_limits import read_joint_limits

PRESET = share_path("config", "rig", "aloha_interbotix.yaml")
ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")


def test_the_aloha_preset_loads_by_its_name_and_its_alias():
    assert driver_config_file("aloha") == driver_config_file("aloha_interbotix") == PRESET
    assert {"aloha", "aloha_interbotix"} <= set(driver_presets())
    limits = read_joint_limits(share_path("urdf", "robofollow_rig.urdf"))  # a motor gripper needs no finger joint
    config = load_driver_config("aloha", limits)
    for arm, ns in (("left", "/follower_left"), ("right", "/follower_right")):
        driver = config.arms[arm]
        assert driver.kind == "interbotix" and driver.group == "arm" and driver.joints == ARM_JOINTS
        assert (driver.command_topic, driver.single_topic, driver.state_topic) == (
            f"{ns}/commands/joint_group", f"{ns}/commands/joint_single", f"{ns}/joint_states")
        g = driver.gripper
        assert (g.joint, g.closed, g.open, g.measures) == ("gripper", 0.6197, 1.6214, "motor")
        assert driver.fingers is not None and (driver.fingers.left, driver.fingers.right) == ("left_finger",
                                                                                               "right_finger")
        # the linkage puts ALOHA's servo angles where ALOHA's finger constants say the fingers are
        assert driver.fingers.finger(g.closed) == pytest.approx(0.0440, abs=1e-4)
        assert driver.fingers.finger(g.open) == pytest.approx(0.0579, abs=1e-4)


def test_an_unknown_preset_name_lists_the_presets():
    with pytest.raises(ValueError) as info:
        driver_config_file("alohaa")
    assert str(info.value).startswith("'alohaa' is neither a driver map file nor a preset under config/rig/ "
                                      "(presets: aloha, aloha_interbotix, arm_drivers,")
    with pytest.raises(ProfileError) as bad:
        apply_choices(load_profile("mock"), Choices(driver_config="alohaa"), lambda name: f"--{name.replace('_', '-')}")
    assert str(bad.value).startswith("--driver-config: 'alohaa' is neither") and "\n" not in str(bad.value)


def test_driver_config_aloha_reaches_every_node_that_drives_or_plays_the_arms():
    chosen = apply_choices(load_profile("mock"), Choices(driver_config="aloha"), lambda name: f"--{name}")
    for node in ("arm_bridge_node", "mock_hardware_node"):
        assert chosen.node(node).parameters["driver_config"] == str(PRESET)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    namespace: /follower_left ", "    group_topic: /l/group ",
     "arms.left.single_topic: missing (give namespace, e.g. /follower_left, or single_topic itself)"),
    ("namespace: /follower_left ", "namespace: follower_left ",
     "arms.left.namespace: 'follower_left' is not an absolute topic name"),
    ("namespace: /follower_left ", "namespace: /follower_left/ ",
     "arms.left.namespace: '/follower_left/' is not a namespace like /follower_left"),
    ("namespace: /follower_right", "namespace: /follower_left",
     "arms.right.group_topic: '/follower_left/commands/joint_group' is also arms.left.group_topic; each arm needs "
     "its own command topics (state topics may be shared)"),
    ("open: 1.6214, measures: motor}   #", "open: 3.5, measures: motor}   #",
     "arms.left.gripper.open: 3.5 lies outside the gripper servo's turn [-3.14159, 3.14159] rad (measures: motor)"),
    ("closed: 0.6197, open: 1.6214, measures: motor}   #", "closed: 1.6214, open: 1.6214, measures: motor}   #",
     "arms.left.gripper: open and closed are both 1.6214"),
    ("measures: motor}   #", "measures: radians}   #",
     "arms.left.gripper.measures: 'radians' is not one of finger, opening, motor"),
    ("    group: arm\n", "    group: arm\n    command_topic: /l/cmd\n",
     "arms.left.command_topic: not a field of a driver of type interbotix (its fields: type, joints, gripper, "
     "namespace, group, group_topic, single_topic, state_topic, fingers)"),
    ("    group: arm\n", "    group: ''\n", "arms.left.group: '' is not a name"),
    ("horn_radius: 0.022, arm_length: 0.036}   #", "horn_radius: 0.022, arm_length: 0.02}   #",
     "arms.left.fingers.arm_length: must be longer than horn_radius (0.022), got 0.02"),
    ("{left: left_finger, right: right_finger, horn_radius: 0.022, arm_length: 0.036}   #",
     "{left: gripper, right: right_finger, horn_radius: 0.022, arm_length: 0.036}   #",
     "arms.left: driver joint names ['gripper'] repeat (joints, gripper.joint and fingers each name one joint)"),
    ("[waist, shoulder, elbow, forearm_roll, wrist_angle, wrist_rotate]   #",
     "[waist, shoulder, elbow, forearm_roll, wrist_angle]   #",
     "arms.left.joints: need six driver joint names, got ['waist', 'shoulder', 'elbow', 'forearm_roll', "
     "'wrist_angle']"),
])
def test_a_bad_field_of_the_preset_is_one_line_naming_file_field_and_value(tmp_path, old, new, message):
    text = PRESET.read_text()
    assert old in text, old
    path = tmp_path / "aloha.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError) as info:
        load_driver_config(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_ros_kind_refuses_the_interbotix_fields(tmp_path):
    text = share_path("config", "rig", "arm_drivers.yaml").read_text()
    path = tmp_path / "drivers.yaml"
    path.write_text(text.replace("    time_from_start: 0.05\n", "    namespace: /follower_left\n", 1))
    with pytest.raises(ValueError) as info:
        load_driver_config(path)
    assert str(info.value) == (f"{path}: arms.left.namespace: not a field of a driver of type joint_trajectory (its "
                               "fields: type, joints, gripper, command_topic, state_topic, time_from_start)")


def test_explicit_topics_override_the_namespace(tmp_path):
    text = PRESET.read_text().replace("    group: arm\n", "    group: arm\n    state_topic: /arms/joint_states\n", 1)
    path = tmp_path / "aloha.yaml"
    path.write_text(text)
    left = load_driver_config(path).arms["left"]
    assert (left.command_topic, left.single_topic, left.state_topic) == (
        "/follower_left/commands/joint_group", "/follower_left/commands/joint_single", "/arms/joint_states")


def test_commands_go_out_as_a_group_then_a_single_command_in_float32_never_beyond_the_target():
    left = load_driver_config("aloha").arms["left"]
    assert command_channels(left) == [("/follower_left/commands/joint_group", JointGroupCommand),
                                      ("/follower_left/commands/joint_single", JointSingleCommand)]
    joints = [0.1, -0.96, 1.16, 0.0, -0.3, math.pi / 2]  # pi/2 has no float32: the nearest is beyond it
    group, single = command_messages(left, joints, 0.25, Time())
    assert group.name == "arm" and single.name == "gripper"
    cmd = [float(v) for v in group.cmd]
    assert cmd == pytest.approx(joints, abs=1e-6)
    assert all(abs(c) <= abs(j) for c, j in zip(cmd, joints, strict=True))  # rounded toward zero
    assert float(single.cmd) == pytest.approx(0.6197 + 0.25 * (1.6214 - 0.6197), abs=1e-6)
    # and back: the player of the driver reads each message's part
    part_joints, none = command_part(left, group)
    assert none is None and part_joints is not None and part_joints.tolist() == cmd
    no_joints, gripper = command_part(left, single)
    assert no_joints is None and gripper == pytest.approx(0.25, abs=1e-6)


def test_a_command_for_another_group_or_joint_is_refused():
    left = load_driver_config("aloha").arms["left"]
    with pytest.raises(MessageError, match="group 'arm_2'"):
        command_part(left, JointGroupCommand(name="arm_2", cmd=[0.0] * 6))
    with pytest.raises(MessageError, match="six finite joint commands"):
        command_part(left, JointGroupCommand(name="arm", cmd=[0.0] * 5))
    with pytest.raises(MessageError, match="joint 'waist'"):
        command_part(left, JointSingleCommand(name="waist", cmd=0.0))


def test_command_pairs_make_whole_targets_in_order():
    pairs = CommandPairs()
    assert pairs.add((np.zeros(6), None)) is None
    assert pairs.add((np.ones(6), None)) is None
    first = pairs.add((None, 0.5))
    assert first is not None and first[0].tolist() == [0.0] * 6 and first[1] == 0.5
    second = pairs.add((None, 0.75))
    assert second is not None and second[0].tolist() == [1.0] * 6 and second[1] == 0.75
    whole = pairs.add((np.full(6, 2.0), 1.0))  # a one-message driver's command passes at once
    assert whole is not None and whole[1] == 1.0


def test_the_joint_state_is_the_xs_sdks_and_reads_back_as_commanded():
    left = load_driver_config("aloha").arms["left"]
    joints = np.array([0.1, -0.96, 1.16, 0.0, -0.3, 0.0])
    msg = state_message([left], {"left": (joints, 0.25)}, Time())
    servo = 0.6197 + 0.25 * (1.6214 - 0.6197)
    assert list(msg.name) == [*ARM_JOINTS, "gripper", "left_finger", "right_finger"]
    assert left.fingers is not None
    finger = left.fingers.finger(servo)
    assert list(msg.position) == pytest.approx([*joints, servo, finger, -finger])
    assert 0.0440 < finger < 0.0579  # metres, between ALOHA's closed and open finger positions
    read_joints, read_gripper = arm_from_state(left, msg)
    assert read_joints.tolist() == pytest.approx(joints.tolist()) and read_gripper == pytest.approx(0.25)


def test_the_servo_range_is_one_turn():
    assert (-math.pi, math.pi) == SERVO_RANGE_RAD


def test_only_an_xs_sdk_map_needs_interbotix_xs_msgs_and_says_where_it_comes_from(monkeypatch):
    monkeypatch.setitem(sys.modules, "interbotix_xs_msgs.msg", None)  # as on a workspace without Trossen's stack
    assert command_channels(load_driver_config("piper_ros2").arms["left"])[0][0] == "/left_piper/joint_ctrl_single"
    with pytest.raises(ValueError) as info:
        command_channels(load_driver_config("aloha").arms["left"])
    assert str(info.value).startswith("left arm: a driver of type interbotix needs the interbotix_xs_msgs package (")
    assert "make setup builds it into the venv (tools/build_ros_msgs.sh)" in str(info.value)
