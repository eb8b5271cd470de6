"""The table without a simulator: the layout's resting poses against SAPIEN's settled scene for every
layout, and the mock cameras' still picture showing each object in its colour where the camera sees it."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.rig.layout_poses import layout_rest_poses
from robofollow_ros.rig.mock_view import TABLE_CENTRE_XY, draw_layout_view
from robofollow_ros.robot.cameras import intrinsic_matrix, project
from robofollow_ros.robot.kinematics import RigKinematics


def _layouts(registry):  # type: ignore[no-untyped-def]
    return [layout for scene in registry.layouts.values() for layout in scene.values()]


def test_rest_poses_are_where_the_simulator_settles_every_layout(registry):
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False)
    worst = 0.0
    try:
        for layout in _layouts(registry):
            for seed in (3, 1097):
                world.reset(layout, seed)
                poses = layout_rest_poses(layout, seed)
                assert list(poses) == [o.name for o in layout.objects]
                for name in world.objects:
                    position, _ = world.object_pose(name)
                    worst = max(worst, float(np.abs(position - poses[name].position).max()))
    finally:
        world.close()
    assert worst < 0.002, worst  # 2 mm: what the operator's tape measure can tell apart


def test_the_mock_table_is_where_the_simulators_is():
    from robofollow_ros.sim import scene_objects

    assert TABLE_CENTRE_XY == scene_objects.TABLE_CENTRE_XY


@pytest.mark.parametrize("camera", ["head", "left_wrist"])
def test_the_still_picture_shows_each_object_in_its_colour_where_the_camera_sees_it(registry, camera):
    kin = RigKinematics()
    task = registry.eval_tasks("scene2", "L0")[0]
    layout = registry.layout_of(task)
    poses = layout_rest_poses(layout, task.seed(1))
    pose = kin.link_pose(kin.home_vector(), kin.rig.camera_links[camera])
    fovy = kin.rig.camera_fovy[camera]
    picture = draw_layout_view(layout, poses, pose.rotation, pose.position, 320, 240, fovy)
    assert picture.shape == (240, 320, 3) and picture.dtype == np.uint8
    k = intrinsic_matrix(320, 240, fovy)
    checked = 0
    for spec in layout.objects:
        top = poses[spec.name].position + np.array([0.0, 0.0, 0.6 * spec.half_height])  # on the visible top
        u, v, depth = project(top, pose.position, pose.quat_wxyz, k)
        if depth <= 0 or not (5 <= u < 315 and 5 <= v < 235):
            continue
        expected = np.array([round(255 * c) for c in spec.color_rgb])
        # nearer objects may cover part of it: the colour must be there within a few pixels of the point
        patch = picture[int(v) - 2:int(v) + 3, int(u) - 2:int(u) + 3].reshape(-1, 3).astype(int)
        assert np.min(np.abs(patch - expected).sum(axis=1)) < 30, (camera, spec.name, (u, v))
        checked += 1
    assert checked >= 3
