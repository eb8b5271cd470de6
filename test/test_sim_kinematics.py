"""FK agrees with the physics scene on every shipped rig (the built-in one and the ALOHA bench from gym-aloha's
files); IK reaches every layout object top-down with the task's arm on the built-in rig (the ALOHA's reach is a
measurement: bench/rig_reach.py, docs/rigs.md)."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.contract import ARM_SLICE
from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, RigKinematics, top_down_grasp_tcp_z
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.sim.world import SimWorld

PRE_GRASP = 0.08
LIFT = 0.10


@pytest.fixture(scope="module")
def kin() -> RigKinematics:
    return RigKinematics()


@pytest.fixture(scope="module", params=["robofollow", "aloha"])
def any_kin(request: pytest.FixtureRequest) -> RigKinematics:
    from robofollow_ros.robot.rig_config import load_rig_config

    return RigKinematics(load_rig_config(request.param))


def test_top_down_quaternion_points_the_approach_axis_down(any_kin: RigKinematics) -> None:
    kin = any_kin
    rotation = quat_to_matrix(np.array(TOP_DOWN_QUAT_WXYZ))
    assert np.allclose(rotation[:, 0], [0, 0, -1])  # TCP +x (approach) straight down
    assert np.allclose(rotation[:, 1], [-1, 0, 0])  # fingers open along world x
    result = kin.ik("left", np.array([-0.05, -0.1, 0.8]), np.array(TOP_DOWN_QUAT_WXYZ))
    pose = kin.tcp_poses(kin.arm_vector(kin.home_vector(), "left", result.joints))["left"]
    assert np.allclose(pose.rotation[:, 0], [0, 0, -1], atol=1e-3)


def test_fk_matches_the_simulated_links(registry, any_kin: RigKinematics) -> None:  # type: ignore[no-untyped-def]
    kin = any_kin
    world = SimWorld(render=False, rig=kin.rig)
    world.reset(registry.layout("scene1", "default"), 5)
    target = kin.home_vector()
    target[ARM_SLICE["left"]] += [0.3, 0.4, -0.2, 0.5, -0.3, 0.6]
    target[ARM_SLICE["right"]] += [-0.2, 0.3, 0.3, -0.4, 0.2, -0.5]
    world.execute(target)
    world.idle(100)
    measured = world.joint_vector()
    for arm, pose in kin.tcp_poses(measured).items():
        position, quat = world.tcp_pose(arm)
        assert np.allclose(position, pose.position, atol=1e-4)
        assert abs(abs(float(np.dot(quat, pose.quat_wxyz))) - 1.0) < 1e-5
    scene1 = kin.ee_points(measured, "scene1")["left"]
    assert np.allclose(scene1, world.ee_point("left"), atol=1e-4)
    assert np.isclose(np.linalg.norm(scene1 - kin.tcp_poses(measured)["left"].position), 0.04)


def test_every_task_source_is_reachable_top_down_by_the_task_arm(registry, kin: RigKinematics) -> None:  # type: ignore[no-untyped-def]
    seen = set()
    for task in registry.eval_tasks():
        layout = registry.layout_of(task)
        for round_index in (1, 10):
            xy = layout.jittered_xy(task.seed(round_index))
            key = (task.arm, task.source, round(xy[task.source][0], 3), round(xy[task.source][1], 3))
            if key in seen:
                continue
            seen.add(key)
            spec = layout.object(task.source)
            x, y = xy[task.source]
            grasp_z = top_down_grasp_tcp_z(0.74 + 2 * spec.half_height)
            for z in (grasp_z, grasp_z + PRE_GRASP, grasp_z + LIFT):
                result = kin.ik(task.arm, np.array([x, y, z]), np.array(TOP_DOWN_QUAT_WXYZ))
                assert result.success, (task.task_id, task.arm, task.source, z, result)
                lower, upper = kin.arm_limits(task.arm)
                assert np.all(result.joints >= lower - 1e-9) and np.all(result.joints <= upper + 1e-9)
    assert len(seen) > 50


@pytest.mark.parametrize("arm", ["left", "right"])
def test_ik_covers_the_whole_object_region_for_both_arms(kin: RigKinematics, arm: str) -> None:
    for x in np.linspace(-0.25, 0.2, 6):
        for y in np.linspace(-0.25, 0.0, 4):
            result = kin.ik(arm, np.array([x, y, 0.785]), np.array(TOP_DOWN_QUAT_WXYZ))
            assert result.success, (arm, x, y, result)
            pose = kin.tcp_poses(kin.arm_vector(kin.home_vector(), arm, result.joints))[arm]
            assert np.allclose(pose.position, [x, y, 0.785], atol=2e-4)


def test_ik_reports_failure_for_an_unreachable_pose(any_kin: RigKinematics) -> None:
    kin = any_kin
    result = kin.ik("left", np.array([1.5, 1.5, 0.8]), np.array(TOP_DOWN_QUAT_WXYZ))
    assert not result.success
    assert result.position_error > 0.5
    lower, upper = kin.arm_limits("left")
    assert np.all(result.joints >= lower) and np.all(result.joints <= upper)


def test_bad_inputs_name_the_field(any_kin: RigKinematics) -> None:
    kin = any_kin
    with pytest.raises(ValueError, match="arm"):
        kin.ik("middle", np.zeros(3), np.array(TOP_DOWN_QUAT_WXYZ))
    with pytest.raises(ValueError, match=r"vector.*14"):
        kin.tcp_poses(np.zeros(7))
    with pytest.raises(ValueError, match=r"vector.*finite"):
        kin.tcp_poses(np.full(14, np.nan))
