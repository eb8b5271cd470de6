"""The NumPy kinematics of the rig (no simulator) against SAPIEN's Pinocchio model of the same URDF, and
the URDF checks the safety filter relies on (a joint it cannot bound is refused, naming the joint)."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.robot.urdf_limits import read_joint_limits
from robofollow_ros.robot.urdf_model import UrdfError, UrdfModel


@pytest.fixture(scope="module")
def kin() -> RigKinematics:
    return RigKinematics()


def test_every_link_pose_equals_sapiens_pinocchio_model(kin: RigKinematics) -> None:
    """The reference is SAPIEN's own kinematic model of the URDF (float32 inside, hence the tolerance)."""
    import sapien

    from robofollow_ros.sim.articulation import load_rig_articulation

    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    robot = load_rig_articulation(scene, kin.rig, visuals=False)
    model = robot.create_pinocchio_model()
    names = [j.name for j in robot.active_joints]
    assert sorted(names) == sorted(kin.model.moving_joints)
    rng = np.random.default_rng(7)
    lower, upper = kin.joint_map.lower, kin.joint_map.upper
    worst = 0.0
    for _ in range(50):
        q = rng.uniform(lower, upper)
        model.compute_forward_kinematics(np.array([q[kin.model.index[n]] for n in names]))
        for i, link in enumerate(robot.links):
            pose = model.get_link_pose(i)
            rotation, position = kin.model.link_pose(q, link.name)
            worst = max(worst, float(np.abs(position - pose.p).max()),
                        float(np.abs(rotation - quat_to_matrix(np.asarray(pose.q))).max()))
    assert worst < 1e-5, worst


def test_the_jacobian_is_the_derivative_of_the_pose(kin: RigKinematics) -> None:
    q = kin.qpos(kin.home_vector())
    columns = kin.joint_map.arm_qpos_index["right"]
    rotation, position, jac = kin.model.jacobian(q, "right_tcp", columns)
    step = 1e-6
    for k, column in enumerate(columns):
        moved = q.copy()
        moved[column] += step
        r2, p2 = kin.model.link_pose(moved, "right_tcp")
        np.testing.assert_allclose((p2 - position) / step, jac[:3, k], atol=1e-5)
        spin = r2 @ rotation.T  # small rotation: its axis-angle vector is the angular column
        angular = np.array([spin[2, 1] - spin[1, 2], spin[0, 2] - spin[2, 0], spin[1, 0] - spin[0, 1]]) / 2 / step
        np.testing.assert_allclose(angular, jac[3:, k], atol=1e-5)


def test_link_poses_in_one_pass_equal_one_by_one(kin: RigKinematics) -> None:
    vector = kin.home_vector()
    vector[:6] += 0.3
    every = kin.link_poses(vector)
    assert set(every) == set(kin.model.links)
    for link in ("left_tcp", "right_wrist_camera", "head_camera", "left_finger_b"):
        pose = kin.link_pose(vector, link)
        np.testing.assert_allclose(every[link][1], pose.position, atol=1e-12)


URDF = """<robot name="r"><link name="a"/><link name="b"/>
  <joint name="left_joint1" type="revolute"><parent link="a"/><child link="b"/>{limit}</joint></robot>"""


@pytest.mark.parametrize(("limit", "words"), [
    ("", ["'left_joint1'", "no <limit>"]),
    ('<limit upper="1" velocity="1"/>', ["'left_joint1'", "no lower"]),
    ('<limit lower="nan" upper="1"/>', ["'left_joint1'", "'nan'", "not finite"]),
    ('<limit lower="-inf" upper="1"/>', ["'left_joint1'", "not finite"]),
    ('<limit lower="2" upper="1"/>', ["'left_joint1'", "lower 2.0 > upper 1.0"]),
    ('<limit lower="x" upper="1"/>', ["'left_joint1'", "not a number"]),
])
def test_a_joint_limit_the_filter_cannot_use_is_refused_naming_the_joint(limit, words):
    with pytest.raises(UrdfError) as info:
        read_joint_limits(URDF.format(limit=limit))
    for word in words:
        assert word in str(info.value)


def test_structural_urdf_errors_are_named():
    with pytest.raises(UrdfError, match="one root link"):
        UrdfModel.from_text('<robot name="r"><link name="a"/><link name="b"/></robot>')
    with pytest.raises(UrdfError, match=r"'j'.*parent and child"):
        UrdfModel.from_text('<robot name="r"><link name="a"/><joint name="j" type="fixed"><parent link="a"/>'
                            '<child link="zz"/></joint></robot>')
    with pytest.raises(UrdfError, match=r"'j'.*origin xyz"):
        UrdfModel.from_text('<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed">'
                            '<parent link="a"/><child link="b"/><origin xyz="0 1"/></joint></robot>')
