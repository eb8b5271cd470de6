"""Colour-calibration captures rendered in SAPIEN: the simulator's colour model and its checks.

``robofollow calibrate colour --sim`` renders one frame (RGB + depth) of each calibration layout as
laid out and learns ``calibration/sim/colour.yaml`` from them with the same code a rig capture goes
through (``colour_calib.learn_from_layouts``). ``checker_capture`` renders a ColorChecker lying on the
table and returns the picture with the chart's corners projected through the camera model, for the
checker route (``colour_checker.py``). SAPIEN is imported here only, lazily: the rig never needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_checker import COLUMNS, ROWS, checker_picture

#: One layout per scene covers every shade of every class the benchmark uses.
CALIBRATION_LAYOUTS = (("scene1", "default"), ("scene2", "default"), ("scene3", "default"), ("scene4", "scene4_1"))
CALIBRATION_SEEDS = (1, 2)
#: Where the chart lies in simulation (behind the objects, inside the head camera's view).
CHECKER_CENTRE = (0.0, 0.10)
CHECKER_SIZE = (0.21, 0.14)


def _world(camera: CameraModel, style: Any = None) -> Any:
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    settings = CameraSettings(width=camera.width, height=camera.height, depth=True, cameras=("head",))
    return SimWorld(render=True, cameras=settings, style=style)


def render_captures(registry: Any, camera: CameraModel, layouts: Sequence[tuple[str, str]] = CALIBRATION_LAYOUTS,
                    seeds: Sequence[int] = CALIBRATION_SEEDS
                    ) -> list[tuple[Layout, list[tuple[np.ndarray, np.ndarray | None]]]]:
    """(layout, [(rgb, depth)] per seed) for each calibration layout."""
    world = _world(camera)
    out = []
    try:
        for scene, key in layouts:
            layout = registry.layout(scene, key)
            frames: list[tuple[np.ndarray, np.ndarray | None]] = []
            for seed in seeds:
                world.reset(layout, seed)
                head = world.render_images()["head"]
                frames.append((head["rgb"], head["depth"]))
            out.append((layout, frames))
    finally:
        world.close()
    return out


def checker_capture(registry: Any, camera: CameraModel, layout: tuple[str, str] = ("scene1", "default"),
                    seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(rgb, corners (4, 2) px: top-left, top-right, bottom-right, bottom-left of the patch grid)."""
    from robofollow_ros.contract import TABLE_TOP_Z
    from robofollow_ros.sim.scene_style import Decal, SceneStyle

    gap = 8
    picture = checker_picture(pixels_per_patch=60, gap=gap)
    height_px, width_px = picture.shape[:2]
    world = _world(camera, SceneStyle(decals=(Decal(picture, CHECKER_CENTRE, CHECKER_SIZE),)))
    try:
        world.reset(registry.layout(*layout), seed)
        rgb = world.render_images()["head"]["rgb"]
    finally:
        world.close()
    (cx, cy), (sx, sy) = CHECKER_CENTRE, CHECKER_SIZE
    side = (width_px - gap) / COLUMNS
    assert abs(side - (height_px - gap) / ROWS) < 1e-9
    corners_px = [(gap / 2, gap / 2), (width_px - gap / 2, gap / 2), (width_px - gap / 2, height_px - gap / 2),
                  (gap / 2, height_px - gap / 2)]
    world_corners = np.array([[cx - sx / 2 + u / width_px * sx, cy + sy / 2 - v / height_px * sy, TABLE_TOP_Z]
                              for u, v in corners_px])
    return rgb, camera.project(world_corners)[:, :2]
