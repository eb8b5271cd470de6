"""SAPIEN renders on this machine: a coloured cube appears in its colour at its projected pixel.

CI installs the renderer (`make setup` adds Mesa from bookworm-backports), so this must pass there.
"""

from __future__ import annotations

import numpy as np
import sapien


def _project(camera, point: np.ndarray) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Pixel (u, v) of a world point through the camera's OpenCV intrinsics and extrinsics."""
    extrinsic = np.asarray(camera.get_extrinsic_matrix())  # 3x4, world -> OpenCV camera
    cam = extrinsic[:, :3] @ point + extrinsic[:, 3]
    uvw = np.asarray(camera.get_intrinsic_matrix()) @ cam
    return int(uvw[0] / uvw[2]), int(uvw[1] / uvw[2])


def test_coloured_cube_at_its_projected_pixel():
    scene = sapien.Scene()
    scene.set_ambient_light([0.8, 0.8, 0.8])
    colours = {"red": ([0.9, 0.1, 0.1], [0.10, -0.08, 0.76]), "blue": ([0.1, 0.2, 0.9], [-0.08, 0.05, 0.76])}
    for name, (rgb, pos) in colours.items():
        builder = scene.create_actor_builder()
        builder.add_box_visual(half_size=[0.02, 0.02, 0.02], material=[*rgb, 1.0])
        actor = builder.build_static(name=name)
        actor.set_pose(sapien.Pose(pos))
    camera = scene.add_camera("head", 320, 240, np.deg2rad(50), 0.01, 10.0)
    # Looking down at the table from above and in front, as a head camera does.
    eye, target = np.array([0.0, -0.55, 1.25]), np.array([0.0, -0.05, 0.74])
    forward = (target - eye) / np.linalg.norm(target - eye)
    left = np.cross([0.0, 0.0, 1.0], forward)
    left /= np.linalg.norm(left)
    up = np.cross(forward, left)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([forward, left, up], axis=1)
    pose[:3, 3] = eye
    camera.entity.set_pose(sapien.Pose(pose))
    scene.update_render()
    camera.take_picture()
    rgb = (np.asarray(camera.get_picture("Color"))[..., :3] * 255).astype(np.uint8)
    assert rgb.shape == (240, 320, 3)
    background = rgb[5, 5].astype(int)
    for name, (colour, pos) in colours.items():
        u, v = _project(camera, np.array(pos))
        assert 0 <= u < 320 and 0 <= v < 240, (name, u, v)
        pixel = rgb[v, u].astype(int)
        dominant = int(np.argmax(colour))
        assert int(np.argmax(pixel)) == dominant, (name, pixel.tolist())
        assert pixel[dominant] > 100, (name, pixel.tolist())
        # the cube stands out from the empty background
        assert np.abs(pixel - background).sum() > 100, (name, pixel.tolist(), background.tolist())
