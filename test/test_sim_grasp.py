"""Each arm grasps and lifts a cube, a sphere, a cylinder and a Scene 3 slab by finger friction alone."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.contract import ARM_SLICE, GRIPPER_INDEX
from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, RigKinematics, top_down_grasp_tcp_z
from robofollow_ros.sim.world import SimWorld

PRE_GRASP, LIFT = 0.08, 0.10
CASES = [
    ("scene1", "default", "yellow_block_1"),  # cube, friction 0.1
    ("scene4", "scene4_1", "red_sphere"),  # sphere, friction 1.0
    ("scene2", "default", "large_red_cylinder"),  # cylinder, friction 0.12
    ("scene3", "default", "green_bar_3"),  # slab, friction 0.8
]


@pytest.fixture(scope="module")
def kin() -> RigKinematics:
    return RigKinematics()


@pytest.mark.parametrize("arm", ["left", "right"])
@pytest.mark.parametrize(("scene", "key", "name"), CASES)
def test_arm_grasps_and_lifts(registry, kin: RigKinematics, scene: str, key: str, name: str, arm: str) -> None:  # type: ignore[no-untyped-def]
    layout = registry.layout(scene, key)
    world = SimWorld(render=False)
    world.reset(layout, 11)
    start, _ = world.object_pose(name)
    grasp_z = top_down_grasp_tcp_z(start[2] + layout.object(name).half_height)
    vector = world.joint_vector()

    def move(z: float, gripper: float) -> None:
        nonlocal vector
        result = kin.ik(arm, np.array([start[0], start[1], z]), np.array(TOP_DOWN_QUAT_WXYZ),
                        seed=vector[ARM_SLICE[arm]])
        assert result.success, result
        vector = kin.arm_vector(vector, arm, result.joints)
        vector[GRIPPER_INDEX[arm]] = gripper
        world.execute(vector)

    move(grasp_z + PRE_GRASP, 1.0)
    move(grasp_z, 1.0)
    move(grasp_z, 0.0)  # close
    closed_frame = world.scorer_frame()
    assert closed_frame[f"gripper_{arm}"] == 0.0
    move(grasp_z + LIFT, 0.0)
    world.idle(125)  # hold half a second: a slipping grasp would show here
    end, _ = world.object_pose(name)
    assert end[2] - start[2] > LIFT - 0.005, end - start
    tcp, _ = world.tcp_pose(arm)
    assert np.hypot(*(end[:2] - tcp[:2])) < 0.01
    # Friction, not attachment: opening the gripper drops the object back to the table.
    move(grasp_z + LIFT, 1.0)
    world.idle(250)
    dropped, _ = world.object_pose(name)
    assert dropped[2] < start[2] + 0.01
