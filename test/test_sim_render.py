"""Rendered pictures: colours appear where objects project; intrinsics, depth and segmentation agree."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.robot.cameras import intrinsic_matrix, project
from robofollow_ros.sim.camera_settings import CameraSettings
from robofollow_ros.sim.world import SimWorld


@pytest.fixture(scope="module")
def rendered(registry):  # type: ignore[no-untyped-def]
    world = SimWorld(render=True, cameras=CameraSettings(depth=True, segmentation=True))
    world.reset(registry.layout("scene2", "scene2.6"), 21)
    return world, world.render_images()


def _colour_direction(rgb: np.ndarray) -> np.ndarray:
    v = np.asarray(rgb, dtype=np.float64)
    return v / max(float(np.linalg.norm(v)), 1e-9)


def test_camera_images_have_the_protocol_shape(rendered) -> None:  # type: ignore[no-untyped-def]
    world, images = rendered
    obs = world.observation()
    for key in ("head_camera", "left_camera", "right_camera"):
        rgb = obs["observation"][key]["rgb"]
        assert rgb.shape == (240, 320, 3) and rgb.dtype == np.uint8
        assert rgb.std() > 5  # not a blank picture
    assert images["head"]["depth"].shape == (240, 320)


def test_intrinsics_match_sapien(rendered) -> None:  # type: ignore[no-untyped-def]
    world, _ = rendered
    for name, camera in world._render_cameras.items():
        expected = intrinsic_matrix(320, 240, world.rig.camera_fovy[name])
        assert np.allclose(camera.get_intrinsic_matrix(), expected, atol=1e-3), name


def test_object_colours_appear_at_their_projected_positions(rendered) -> None:  # type: ignore[no-untyped-def]
    world, images = rendered
    position, quat = world.camera_pose("head")
    k = intrinsic_matrix(320, 240, world.rig.camera_fovy["head"])
    layout = world.layout
    colours = {spec.name: _colour_direction(spec.color_rgb) for spec in layout.objects}
    ids = world.segmentation_ids()
    checked = 0
    for spec in layout.objects:
        centre, _ = world.object_pose(spec.name)
        u, v, depth = project(centre, position, quat, k)
        assert 0 <= u < 320 and 0 <= v < 240 and depth > 0, spec.name
        row, col = int(v), int(u)
        pixel = images["head"]["rgb"][row - 1:row + 2, col - 1:col + 2].reshape(-1, 3).mean(axis=0)
        seen = _colour_direction(pixel)
        # The pixel's hue is the object's, and closer to it than to any other colour of the layout.
        assert float(seen @ colours[spec.name]) > 0.9, (spec.name, pixel)  # shading and sRGB desaturate a little
        nearest = max(colours, key=lambda n: float(seen @ colours[n]))
        assert np.allclose(colours[nearest], colours[spec.name]), (spec.name, nearest, pixel)
        assert images["head"]["segmentation"][row, col] == ids[spec.name], spec.name
        assert abs(float(images["head"]["depth"][row, col]) - depth) < 0.05, spec.name
        checked += 1
    assert checked == len(layout.objects)


def test_render_free_world_has_no_render_system(registry) -> None:  # type: ignore[no-untyped-def]
    world = SimWorld(render=False)
    world.reset(registry.layout("scene1", "default"), 1)
    assert world._scene is not None
    with pytest.raises(RuntimeError):
        world._scene.get_system("render")
