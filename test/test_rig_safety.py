"""The arm-command safety filter: limits, step clamp, workspace, NaN, e-stop and watchdog; the driver map's
gripper ranges against the URDF. The generated streams are in ``test_rig_safety_properties.py``.

The measured defects and the driver maps are checked on both shipped rigs, each with its own limits
(``rig_joint_limits``, as the arm bridge reads them) and only the driver maps that belong to it
(``rig_driver_maps``: the one its YAML names, the rest of ``config/rig/`` being the built-in rig's). The workspace
box is each rig's own (``RigConfig.workspace``), checked on the rig's forward kinematics."""

from __future__ import annotations

import re

import numpy as np
import pytest

from robofollow_ros.contract import GRIPPER_INDEX, JOINT_NAMES
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import MOTOR, SERVO_RANGE_RAD, GripperMapping, load_driver_config
from robofollow_ros.rig.safety import SafetyConfig, SafetyFilter
from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, RigKinematics
from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG, RigConfigError, load_rig_config
from robofollow_ros.robot.rig_model import BUILT_IN_WORKSPACE
from robofollow_ros.robot.urdf_limits import JointLimit, read_joint_limits
from shipped_rigs import LIMITS as RIG_LIMITS
from shipped_rigs import RIGS, rig_driver_maps

LIMITS = {name: JointLimit(-1.0, 1.0, 3.0) for name in JOINT_NAMES if not name.endswith("_gripper")}


def make_filter(**kwargs) -> SafetyFilter:  # type: ignore[no-untyped-def]
    tool_points = kwargs.pop("tool_points", None)
    f = SafetyFilter(SafetyConfig(joint_limits=LIMITS, **kwargs), tool_points)
    f.update_measured(np.zeros(14))
    return f


def test_small_command_passes_unchanged():
    f = make_filter()
    q = np.full(14, 0.01)
    decision = f.filter(q, now=0.0)
    assert decision is not None and not decision.hold and not decision.clamped
    np.testing.assert_allclose(decision.command, q)


def test_out_of_limit_target_is_clamped_and_reported():
    f = make_filter(max_step_rad=10.0)
    q = np.zeros(14)
    q[0] = 2.5
    decision = f.filter(q, now=0.0)
    assert decision is not None and decision.clamped and not decision.hold
    assert decision.command[0] == pytest.approx(1.0)
    assert any("left_joint1" in r and "outside" in r for r in decision.reasons)


def test_large_step_is_clamped_towards_the_target():
    f = make_filter(max_step_rad=0.05)
    q = np.zeros(14)
    q[8] = 0.5
    decision = f.filter(q, now=0.0)
    assert decision.command[8] == pytest.approx(0.05)
    assert any("right_joint2" in r and "step" in r for r in decision.reasons)


def test_nan_command_holds_the_measured_position():
    f = make_filter()
    f.update_measured(np.full(14, 0.2))
    q = np.zeros(14)
    q[GRIPPER_INDEX["right"]] = np.nan
    decision = f.filter(q, now=0.0)
    assert decision.hold and "right_gripper" in decision.reasons[0]
    np.testing.assert_allclose(decision.command, np.full(14, 0.2))


def test_wrong_length_holds():
    decision = make_filter().filter(np.zeros(7), now=0.0)
    assert decision.hold and "expected 14 values" in decision.reasons[0]


def test_nothing_is_sent_before_a_measurement():
    f = SafetyFilter(SafetyConfig(joint_limits=LIMITS))
    assert f.filter(np.zeros(14), now=0.0) is None


def test_workspace_box_holds_when_a_tool_point_leaves_it():
    def tool_points(arm, q):  # type: ignore[no-untyped-def]
        return np.array([q[0] if arm == "left" else 0.0, 0.0, 0.9])

    f = make_filter(tool_points=tool_points, workspace_min=(-0.5, -0.5, 0.75), workspace_max=(0.03, 0.5, 1.2))
    assert not f.filter(np.full(14, 0.02), now=0.0).hold
    f.update_measured(np.full(14, 0.02))
    decision = f.filter(np.full(14, 0.06), now=0.01)
    assert decision.hold and "left tool point" in decision.reasons[0]


def test_watchdog_holds_once_after_the_timeout():
    f = make_filter(watchdog_timeout_s=0.1)
    f.filter(np.full(14, 0.01), now=10.0)
    assert f.watchdog(now=10.05) is None
    decision = f.watchdog(now=10.101)
    assert decision is not None and decision.hold and "watchdog" in decision.reasons[0]
    assert f.watchdog(now=10.2) is None  # one hold per stall
    assert not f.filter(np.full(14, 0.01), now=10.3, stamp=10.29).hold  # stamped after the hold: executes
    assert f.watchdog(now=10.45).hold


def test_after_a_watchdog_hold_a_backlog_stamped_before_it_is_refused_until_a_newer_command():
    """A lost link's backlog (reliable DDS delivers it in a burst when the host comes back) carries the stamps of
    the states before the silence: refused, however late it is received; the first command stamped after the
    newest state of the hold executes and lifts the rule."""
    f = make_filter(watchdog_timeout_s=0.1)
    assert not f.filter(np.full(14, 0.01), now=10.0, stamp=9.98).hold
    assert f.watchdog(now=10.2, state_stamp=10.19).hold  # the link went silent; states went on to 10.19
    for stamp in (9.99, 10.0, 10.19):  # computed from states before or at the hold, delivered now
        decision = f.filter(np.full(14, 0.02), now=13.0, stamp=stamp)
        assert decision.hold and "backlog delivered late" in decision.reasons[0], decision.reasons
    assert f.refused_since_watchdog == 3
    fresh = f.filter(np.full(14, 0.02), now=13.1, stamp=13.08)
    assert not fresh.hold
    np.testing.assert_allclose(fresh.command, np.full(14, 0.02))
    # A hold without a state stamp takes the node's clock at the hold.
    g = make_filter(watchdog_timeout_s=0.1)
    g.filter(np.full(14, 0.01), now=0.0)
    assert g.watchdog(now=0.2).hold
    assert g.filter(np.full(14, 0.01), now=0.3, stamp=0.05).hold
    assert not g.filter(np.full(14, 0.01), now=0.3, stamp=0.25).hold


def test_after_a_watchdog_hold_unstamped_commands_are_refused_until_a_newer_stamped_one_executes():
    """The attack measured in issue 36: 200 unstamped commands queued before the hold moved the arms 0.30 rad."""
    f = make_filter(watchdog_timeout_s=0.1)
    f.update_measured(np.zeros(14))
    assert not f.filter(np.full(14, 0.01), now=10.0).hold  # unstamped is fine before any hold
    assert f.watchdog(now=10.2, state_stamp=10.19).hold
    for _ in range(200):  # the unstamped backlog, delivered after the hold
        decision = f.filter(np.full(14, 0.04), now=11.0)
        assert decision.hold and "command without a stamp after a watchdog hold" in decision.reasons[0]
        np.testing.assert_array_equal(decision.command, np.zeros(14))  # held where measured: no motion
    assert f.refused_since_watchdog == 200
    assert f.watchdog_rule == 10.19
    # A newer-stamped command refused for another reason leaves the rule in force.
    bad = np.full(14, 0.01)
    bad[3] = np.nan
    assert f.filter(bad, now=11.1, stamp=11.0).hold
    assert f.filter(np.full(14, 0.01)[:7], now=11.1, stamp=11.0).hold
    assert f.watchdog_rule == 10.19
    assert f.filter(np.full(14, 0.04), now=11.2).hold  # still refused
    assert not f.filter(np.full(14, 0.02), now=11.3, stamp=11.25).hold  # computed after the hold: executes
    assert f.watchdog_rule is None
    assert not f.filter(np.full(14, 0.03), now=11.35).hold  # the rule is lifted: unstamped passes again


def test_a_command_refused_by_the_workspace_does_not_lift_the_watchdog_rule_a_takeover_does():
    def tool_points(arm: str, q: np.ndarray) -> np.ndarray:
        return np.array([q[0], 0.0, 1.0])

    f = make_filter(watchdog_timeout_s=0.1, tool_points=tool_points, workspace_min=(-0.5, -0.5, 0.75),
                    workspace_max=(0.03, 0.5, 1.2))
    assert not f.filter(np.zeros(14), now=0.0).hold
    assert f.watchdog(now=0.5, state_stamp=0.45).hold
    out_of_box = f.filter(np.full(14, 0.05), now=0.6, stamp=0.55)
    assert out_of_box.hold and "workspace" in out_of_box.reasons[0]
    assert f.watchdog_rule == 0.45 and f.filter(np.zeros(14), now=0.7).hold
    f.lift_watchdog_rule()  # a takeover: the operator's explicit act
    assert not f.filter(np.zeros(14), now=0.8).hold


def test_estop_holds_until_released_and_a_new_command_arrives():
    f = make_filter()
    f.set_estop(True, now=0.0, received=100.0)
    decision = f.filter(np.full(14, 0.01), now=0.0)
    assert decision.hold and "e-stop" in decision.reasons[0]
    f.set_estop(False, now=5.0, received=105.0)
    assert f.watchdog(now=5.0) is None  # no stale hold replayed after release
    assert not f.filter(np.full(14, 0.01), now=5.0, received=105.001).hold


# -- the measured defects, each first reproduced here (on the built-in rig; the numbers in the docstrings are
# its limits), on both rigs ------------------------------------------------------------------------------------
@pytest.fixture(params=RIGS)
def rig(request) -> str:  # type: ignore[no-untyped-def]
    return str(request.param)


def rig_filter(rig: str, **kwargs) -> SafetyFilter:  # type: ignore[no-untyped-def]
    return SafetyFilter(SafetyConfig(joint_limits=RIG_LIMITS[rig], **kwargs))


def test_the_step_clamp_never_pushes_a_target_beyond_the_limits(rig):
    """left_joint1 measured at 4.0 rad (limit 2.6) and a 2.0 command: it went out as 3.95."""
    upper = RIG_LIMITS[rig]["left_joint1"].upper
    f = rig_filter(rig)
    measured = np.zeros(14)
    measured[0] = upper + 1.4
    f.update_measured(measured)
    q = np.zeros(14)
    q[0] = upper - 0.6
    decision = f.filter(q, now=0.0)
    assert decision is not None and decision.hold
    assert decision.arms == ("right",)  # 1.4 rad beyond: more than a step, so the left arm is sent nothing
    assert decision.command[0] <= upper
    assert [(o.joint, o.value, o.upper, o.commanded) for o in decision.outside_limits] == [
        ("left_joint1", upper + 1.4, upper, False)]
    assert any(f"left_joint1 measured {upper + 1.4:.4f}" in r and f"{upper:.4f}" in r for r in decision.reasons)
    np.testing.assert_array_equal(decision.command[7:], measured[7:])  # the right arm holds where it is


@pytest.mark.parametrize("path", ["hold", "estop", "watchdog"])
def test_holds_stay_within_the_limits_with_the_arm_measured_outside_them(path, rig):
    """The hold and e-stop paths sent the measured 4.0 verbatim."""
    upper, lower = RIG_LIMITS[rig]["left_joint1"].upper, RIG_LIMITS[rig]["right_joint2"].lower
    f = rig_filter(rig)
    f.update_measured(np.zeros(14))
    assert not f.filter(np.zeros(14), now=0.0).hold
    measured = np.zeros(14)
    measured[0] = upper + 0.03  # beyond the tolerance, within a step: held at the limit
    measured[8] = lower - 2.8  # right_joint2: far beyond, the right arm is sent nothing
    f.update_measured(measured)
    if path == "estop":
        f.set_estop(True, now=0.05)
        decision = f.hold("e-stop engaged")
    elif path == "watchdog":
        decision = f.watchdog(now=1.0)
    else:
        decision = f.hold("test")
    assert decision is not None and decision.hold
    assert decision.command[0] == upper and decision.command[8] == lower
    assert decision.arms == ("left",)
    assert {o.joint: o.commanded for o in decision.outside_limits} == {"left_joint1": True, "right_joint2": False}


def test_a_joint_at_its_limit_within_the_tolerance_still_follows_commands_back_inside(rig):
    upper = RIG_LIMITS[rig]["left_joint1"].upper
    f = rig_filter(rig, limit_tolerance_rad=0.01)
    measured = np.zeros(14)
    measured[0] = upper + 0.005  # a reading just past the limit the arm was sent to
    f.update_measured(measured)
    q = np.zeros(14)
    q[0] = upper - 0.6
    decision = f.filter(q, now=0.0)
    assert not decision.hold and decision.arms == ("left", "right")
    assert decision.command[0] == pytest.approx(upper + 0.005 - 0.05)
    q[0] = upper + 0.4  # further out: clamped to the limit, never beyond
    assert f.filter(q, now=0.01).command[0] == upper


def test_commands_received_before_an_estop_release_never_execute_after_it(rig):
    """The bridge replayed hundreds of commands queued during the e-stop once it was released."""
    f = rig_filter(rig)
    f.update_measured(np.zeros(14))
    q = np.full(14, 0.01)
    f.set_estop(True, now=10.0, received=1000.0)
    f.set_estop(False, now=11.0, received=1001.0)
    queued = f.filter(q, now=11.1, received=1000.5)  # taken from the queue after the release
    assert queued.hold and "received before the e-stop release" in queued.reasons[0]
    stamped_old = f.filter(q, now=11.1, stamp=10.9, received=1001.1)  # arrived late, computed before
    assert stamped_old.hold and "stamped" in stamped_old.reasons[0]
    at_release = f.filter(q, now=11.1, stamp=11.0, received=1001.1)  # from the state at the release instant
    assert at_release.hold
    assert f.refused_since_release == 3
    unknown = f.filter(q, now=11.1)  # no stamp and no reception time: nothing shows it is new
    assert unknown.hold and "unstamped" in unknown.reasons[0]
    fresh = f.filter(q, now=11.1, received=1001.2)  # unstamped, received after the release
    assert not fresh.hold
    assert not f.filter(q, now=11.2, stamp=11.15).hold  # stamped after it, reception unknown
    late = f.filter(q, now=11.3, stamp=10.5, received=1001.3)  # the rule stays in force after motion resumed
    assert late.hold


def test_a_release_without_an_engaged_estop_is_no_release(rig):
    f = rig_filter(rig)
    f.update_measured(np.zeros(14))
    f.set_estop(False, now=5.0, received=500.0)  # a panel repeating "not engaged"
    assert f.release is None
    assert not f.filter(np.zeros(14), now=5.1, stamp=1.0, received=400.0).hold


def test_default_driver_map_and_presets_keep_the_grippers_within_the_urdf_finger_range(rig):
    """Every shipped map, against the finger range of the rig it belongs to (loading it checked its ends)."""
    limits = RIG_LIMITS[rig]
    for _, config in rig_driver_maps()[rig]:
        for arm, driver in config.arms.items():
            low, high = (SERVO_RANGE_RAD if driver.gripper.measures == MOTOR  # a servo angle: within its turn
                         else (limits[f"{arm}_gripper"].lower, limits[f"{arm}_gripper"].upper))
            for g in np.linspace(0.0, 1.0, 101):
                value = driver.gripper.to_driver(float(g))
                assert low <= (value if driver.gripper.measures == MOTOR else driver.gripper.to_finger(value)) <= high


def test_each_rigs_own_map_opens_the_gripper_fully(rig):
    """The map a rig's bridge speaks by default: a finger-measured gripper opens to the rig's finger limit (the
    built-in rig's 0.04 m), a servo-angle one to its map's open angle, read back as fully open."""
    spec = load_rig_config(rig).driver_config or share_path("config", "rig", "arm_drivers.yaml")
    config = load_driver_config(spec, RIG_LIMITS[rig])
    for arm, driver in config.arms.items():
        g = driver.gripper
        if g.measures == MOTOR:
            assert g.to_driver(1.0) == g.open and g.to_normalised(g.to_driver(1.0)) == 1.0
        else:
            assert g.to_finger(g.to_driver(1.0)) == RIG_LIMITS[rig][f"{arm}_gripper"].upper
    if rig == "robofollow":
        assert {arm: d.gripper.to_driver(1.0) for arm, d in config.arms.items()} == {"left": 0.04, "right": 0.04}


def test_the_built_in_rigs_map_is_refused_on_the_aloha_naming_its_finger_range():
    """A map is checked against the rig it drives: 0..0.04 m of one finger lies outside the ALOHA's slide
    (0.021..0.057 m), so the built-in rig's map cannot be run on the ALOHA by mistake."""
    path = share_path("config", "rig", "arm_drivers.yaml")
    with pytest.raises(ValueError) as info:
        load_driver_config(path, RIG_LIMITS["aloha"])
    assert str(info.value) == (f"{path}: arms.left.gripper.closed: 0.0 lies outside the URDF's left_gripper range "
                               "[0.021, 0.057] (one finger's travel, measures: finger)")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("open: 0.04}", "open: 0.045}",
     "arms.left.gripper.open: 0.045 lies outside the URDF's left_gripper range [0, 0.04] (one finger's travel, "
     "measures: finger)"),
    ("closed: 0.0,", "closed: -0.001,",
     "arms.left.gripper.closed: -0.001 lies outside the URDF's left_gripper range [0, 0.04] (one finger's travel, "
     "measures: finger)"),
    ("open: 0.04}", "open: 0.09, measures: opening}",
     "arms.left.gripper.open: 0.09 lies outside the URDF's left_gripper range [0, 0.08] (the opening between the "
     "jaws, measures: opening)"),
    ("open: 0.04}", "open: 0.04, measures: degrees}",
     "arms.left.gripper.measures: 'degrees' is not one of finger, opening, motor"),
])
def test_a_driver_map_beyond_the_urdf_finger_range_is_refused_naming_file_field_and_value(tmp_path, old, new, message):
    text = share_path("config", "rig", "arm_drivers.yaml").read_text()
    path = tmp_path / "drivers.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError) as info:
        load_driver_config(path, RIG_LIMITS["robofollow"])
    assert str(info.value) == f"{path}: {message}"


def test_the_gripper_mapping_never_leaves_closed_open_whatever_the_rounding():
    mapping = GripperMapping("g", 0.013, 0.037)
    values = [mapping.to_driver(float(g)) for g in np.linspace(0.0, 1.0, 10_001)]
    assert min(values) >= 0.013 and max(values) <= 0.037 and mapping.to_driver(1.0) == 0.037


@pytest.mark.parametrize(("field", "value"), [("max_step_rad", 0.0), ("watchdog_timeout_s", float("nan"))])
def test_bad_config_is_named(field, value):
    with pytest.raises(ValueError, match=field):
        SafetyConfig(joint_limits=LIMITS, **{field: value})


def test_missing_joint_limits_are_named():
    with pytest.raises(ValueError, match="right_joint6"):
        SafetyConfig(joint_limits={k: v for k, v in LIMITS.items() if k != "right_joint6"})


def test_limits_read_from_urdf_text():
    urdf = """<robot name="r"><link name="a"/><link name="b"/>
      <joint name="left_joint1" type="revolute"><parent link="a"/><child link="b"/>
      <limit lower="-2.6" upper="2.6" velocity="3.1" effort="10"/></joint></robot>"""
    limits = read_joint_limits(urdf)
    assert limits["left_joint1"] == JointLimit(-2.6, 2.6, 3.1)
    with pytest.raises(ValueError, match="urdf"):
        read_joint_limits("<robot>")


# -- the workspace box is the rig's ------------------------------------------------------------------------------
def test_each_rig_brings_its_workspace_box_and_the_built_in_keeps_the_old_default():
    built_in, aloha = load_rig_config("robofollow"), load_rig_config("aloha")
    assert built_in.workspace == BUILT_IN_WORKSPACE == ((-0.6, -0.6, 0.745), (0.6, 0.4, 1.4))
    assert aloha.workspace == ((-0.38, -0.40, 0.745), (0.38, 0.21, 1.31))
    kinematics = RigKinematics(aloha)  # home lies inside the ALOHA's box
    for arm, pose in kinematics.tcp_poses(aloha.home_vector()).items():
        assert np.all(np.asarray(aloha.workspace_min) < pose.position), arm
        assert np.all(pose.position < np.asarray(aloha.workspace_max)), arm


def test_on_the_aloha_the_bridge_holds_a_command_whose_tcp_leaves_the_aloha_box():
    """What the arm bridge builds on the ALOHA (its limits, its kinematics' TCPs, its YAML's box): a target the
    arm can reach, inside the built-in rig's box but beyond the ALOHA's (the left TCP 0.3 m across the table),
    is held; the same target is followed under the built-in box, and home is followed under the ALOHA's."""
    rig = load_rig_config("aloha")
    kinematics = RigKinematics(rig)

    def tool_points(arm: str, q: np.ndarray) -> np.ndarray:
        return np.asarray(kinematics.tcp_poses(q)[arm].position)

    home = rig.home_vector()
    ik = kinematics.ik("left", np.array([-0.1, 0.3, 0.9]), np.array(TOP_DOWN_QUAT_WXYZ), seed=home[0:6])
    assert ik.success
    far = kinematics.arm_vector(home, "left", ik.joints)
    assert rig.workspace_max[1] < tool_points("left", far)[1] < BUILT_IN_WORKSPACE[1][1]

    def bridge(box: tuple[tuple[float, float, float], tuple[float, float, float]]) -> SafetyFilter:
        f = SafetyFilter(SafetyConfig(joint_limits=RIG_LIMITS["aloha"], max_step_rad=10.0, workspace_min=box[0],
                                      workspace_max=box[1]), tool_points)
        f.update_measured(home)
        return f

    assert not bridge(rig.workspace).filter(home, now=0.0).hold
    assert not bridge(BUILT_IN_WORKSPACE).filter(far, now=0.0).hold
    decision = bridge(rig.workspace).filter(far, now=0.0)
    assert decision is not None and decision.hold and "left tool point" in decision.reasons[0], decision.reasons
    np.testing.assert_array_equal(decision.command, home)  # held where it is


@pytest.mark.parametrize(("value", "message"), [
    ("{min: [0, 0, 1], max: [1, 1, 1]}", "field 'workspace' must have min < max on every axis"),
    ("{min: [0, 0], max: [1, 1, 2]}", "field 'workspace.min' must list 3 numbers"),
    ("{min: [0, 0, 0], max: [1, 1, 2], centre: [0, 0, 0]}", "field 'workspace' has unknown keys ['centre']"),
])
def test_a_bad_workspace_box_is_refused_naming_the_field(tmp_path, value, message):
    text = DEFAULT_RIG_CONFIG.read_text(encoding="utf-8").replace(
        "urdf: ../../urdf/robofollow_rig.urdf", f"urdf: {share_path('urdf', 'robofollow_rig.urdf')}")
    path = tmp_path / "rig.yaml"
    path.write_text(f"{text}\nworkspace: {value}\n", encoding="utf-8")
    with pytest.raises(RigConfigError, match=re.escape(message)):
        load_rig_config(path)
