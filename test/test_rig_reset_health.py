"""The ROS-free rules under reset verification (``rig.reset_check``) and the health checks (``rig.health``):
what counts as in place, which way the operator is told to move an object, and which class each failure has."""

from __future__ import annotations

import math

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes.trial_faults import FAULT_ESTOP, FAULT_HEALTH, FAULT_RESET, FAULT_TIMEOUT, Fault, fault_result
from robofollow_ros.paths import share_path
from robofollow_ros.rig.health import HALT, RECORD_AND_CONTINUE, HealthInputs, HealthSettings, check_health, worst_class
from robofollow_ros.rig.reset_check import (
    MISPLACED,
    MISSING,
    OK,
    UNCONFIRMED,
    Seen,
    check_reset,
    expected_poses,
    yaw_error,
)
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.urdf_limits import read_joint_limits


def _layout(task_id: str):  # type: ignore[no-untyped-def]
    registry = default_registry()
    task = registry.eval_task(task_id)
    layout = registry.layout_of(task)
    return layout, expected_poses(layout, task.seed(1))


def _as_seen(expected):  # type: ignore[no-untyped-def]
    return {n: Seen(tuple(p.position), tuple(p.quat_wxyz)) for n, p in expected.items()}


def test_a_table_laid_out_as_the_layout_passes_and_one_moved_object_is_named_with_the_way_back():
    layout, expected = _layout("L0_pickup_red_cylinder")
    seen = _as_seen(expected)
    assert check_reset(layout, expected, seen).ok
    name = layout.objects[0].name
    x, y, z = expected[name].position
    seen[name] = Seen((x + 0.03, y - 0.01, z))  # 3 cm to the right, 1 cm toward the robot
    report = check_reset(layout, expected, seen)
    assert not report.ok and [o.name for o in report.wrong] == [name] and report.wrong[0].status == MISPLACED
    assert report.wrong[0].distance_m == pytest.approx(math.hypot(0.03, 0.01))
    (line,) = report.lines()
    assert line.startswith(f"{name}: 3.2 cm off; move it 3.0 cm left (-x) and 1.0 cm away from the robot (+y)"), line
    seen[name] = Seen((x + 0.012, y, z))  # within 1.5 cm
    assert check_reset(layout, expected, seen).ok
    assert not check_reset(layout, expected, seen, tolerance_m=0.01).ok


def test_missing_doubtful_and_extra_objects_fail_the_check():
    layout, expected = _layout("L0_pickup_red_cylinder")
    first, second = layout.objects[0].name, layout.objects[1].name
    seen = _as_seen(expected)
    del seen[first]
    seen[second] = Seen(tuple(expected[second].position), confidence=0.3)  # a pose perception doubts
    seen["purple_teapot"] = Seen((0.1, 0.1, 0.76))
    report = check_reset(layout, expected, seen, blobs=[("green", (0.2, -0.1, 0.75))])
    statuses = {o.name: o.status for o in report.objects}
    # Issue 37: a pose seen without confidence is not "missing" but unconfirmed, and the line says so.
    assert statuses[first] == MISSING and statuses[second] == UNCONFIRMED
    assert all(s == OK for n, s in statuses.items() if n not in (first, second))
    assert [e.what for e in report.extra] == ["purple_teapot", "unknown green object"]
    assert report.as_dict()["missing"] == [first] and report.as_dict()["unconfirmed"] == [second]
    assert any(line.startswith(f"cannot confirm {second}: seen at confidence 0.30") for line in report.lines())
    assert report.as_dict()["extra"] == [e.what for e in report.extra]
    assert any("take it off the table" in line for line in report.lines())
    hidden = dict(_as_seen(expected), **{first: Seen(tuple(expected[first].position), visible=False)})
    assert not check_reset(layout, expected, hidden).ok  # a kept pose of an object not in view shows nothing


def test_yaw_matters_for_the_scene3_bars_only_and_modulo_their_half_turn():
    layout, expected = _layout("L0_r_pick2_via4_to6_short_front")
    bar = next(o for o in layout.objects if o.shape == "box").name
    seen = _as_seen(expected)

    def turned(deg: float) -> Seen:
        half = math.radians(deg) / 2
        return Seen(tuple(expected[bar].position), (math.cos(half), 0.0, 0.0, math.sin(half)))

    seen[bar] = turned(15.0)
    report = check_reset(layout, expected, seen)
    assert [o.name for o in report.wrong] == [bar] and report.wrong[0].yaw_error_deg == pytest.approx(-15.0)
    assert "turn it 15 deg clockwise seen from above" in report.lines()[0]
    seen[bar] = turned(180.0 + 5.0)  # a bar is the same after a half turn
    assert check_reset(layout, expected, seen).ok
    assert not check_reset(layout, expected, seen, yaw_tolerance_deg=4.0).ok
    assert check_reset(layout, expected, seen, yaw_shapes=(), yaw_tolerance_deg=4.0).ok
    assert yaw_error(0.0, math.pi / 2 - 0.1, math.pi / 2) == pytest.approx(-0.1)


def _settings(checks=("limits", "home", "drivers", "cameras", "calibration")):  # type: ignore[no-untyped-def]
    limits = read_joint_limits(share_path("urdf", "robofollow_rig.urdf"))
    return HealthSettings(tuple(checks), {n: v.lower for n, v in limits.items()},
                          {n: v.upper for n, v in limits.items()}, RigKinematics().home_vector().tolist(),
                          driver_max_age_s=0.5, camera_min_hz=10.0)


def _healthy(**changes):  # type: ignore[no-untyped-def]
    values = {"joints": RigKinematics().home_vector(), "joints_age_s": 0.01,
              "camera_hz": {"head": 30.0, "left_wrist": 30.0, "right_wrist": 30.0}, "calibration": lambda: None}
    values.update(changes)
    return HealthInputs(**values)


def test_each_health_failure_has_its_class_and_a_line_for_the_operator():
    settings = _settings()
    assert check_health(settings, _healthy()) == []
    joints = RigKinematics().home_vector()
    i = JOINT_NAMES.index("left_joint2")
    joints[i] = settings.upper["left_joint2"] + 0.2
    (limit, home) = check_health(settings, _healthy(joints=joints))
    assert (limit.check, limit.failure_class) == ("limits", HALT) and "left_joint2" in limit.reason
    assert limit.action.endswith("then call /robofollow/trial/start")
    assert (home.check, home.failure_class) == ("home", HALT)
    assert [f.check for f in check_health(settings, _healthy(joints=joints), after=True)] == ["limits"]  # no home after
    (stale,) = check_health(settings, _healthy(joints_age_s=3.2))
    assert (stale.check, stale.failure_class) == ("drivers", HALT) and "3.2 s old" in stale.reason
    (never,) = check_health(settings, _healthy(joints=None, joints_age_s=None))
    assert never.check == "drivers" and "no /joint_states" in never.reason
    slow, dead = check_health(settings, _healthy(camera_hz={"head": 4.0, "left_wrist": None, "right_wrist": 30.0}))
    assert slow.check == dead.check == "cameras"
    assert {(f.reason.split()[1], f.failure_class) for f in (slow, dead)} == {("head", RECORD_AND_CONTINUE),
                                                                            ("left_wrist", HALT)}
    (calib,) = check_health(settings, _healthy(calibration=lambda: "calibration/rig: no head.yaml"))
    assert (calib.check, calib.failure_class) == ("calibration", HALT)
    assert worst_class([slow]) == RECORD_AND_CONTINUE and worst_class([slow, dead]) == HALT
    assert worst_class([]) is None
    assert check_health(_settings(("cameras",)), _healthy(joints_age_s=99.0)) == []  # only the checks asked for
    with pytest.raises(ValueError, match="health_checks: 'vibes'"):
        _settings(("vibes",))


def test_every_fault_carries_its_class_into_results():
    assert Fault(FAULT_ESTOP, "x").failure_class == HALT
    assert Fault(FAULT_TIMEOUT, "x").failure_class == RECORD_AND_CONTINUE
    assert Fault(FAULT_RESET, "x").failure_class == RECORD_AND_CONTINUE
    assert Fault(FAULT_HEALTH, "x", RECORD_AND_CONTINUE).failure_class == RECORD_AND_CONTINUE
    entry = fault_result({"intent_score": 1.0, "exec_score": 1.0, "completion_ok": True, "phases": []},
                         Fault(FAULT_HEALTH, "before the trial: drivers: stale", HALT))
    assert (entry["fault"], entry["failure_class"]) == ("health", "halt")
    with pytest.raises(ValueError, match="failure class: 'panic'"):
        Fault(FAULT_HEALTH, "x", "panic")
