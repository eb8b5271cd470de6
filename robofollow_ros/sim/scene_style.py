"""Optional looks of the simulated scene for perception tests: table textures, a shadowing light, distractors.

Real tables are wood or cloth, real rooms cast shadows and real tables hold things the benchmark
does not name; the default scene has none of that. ``SceneStyle`` adds them on request
(``SimWorld(style=...)``); the default style changes nothing, so every other use of the simulator
renders exactly what it did before. Only looks are changed: the texture is a visual quad 0.3 mm
above the table top, distractors are visual-only (no collision, no mass), so physics is untouched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import sapien

from robofollow_ros.contract import TABLE_SIZE_XY, TABLE_TOP_Z

TABLE_TEXTURES = ("plain", "oak", "birch", "checker", "gingham")
#: The texture quad floats this far above the table top (m): drawn on top, too thin for depth to notice.
TEXTURE_LIFT = 0.0003
_TEXTURE_PIXELS_PER_M = 640


@dataclass(frozen=True)
class Distractor:
    """A visual-only object standing on the table: ``shape`` cube | cylinder | sphere, size in metres."""

    name: str
    shape: str
    half_size: float
    rgb: tuple[float, float, float]
    xy: tuple[float, float]


@dataclass(frozen=True, eq=False)
class Decal:
    """A flat picture lying on the table (a colour chart): uint8 RGB, centre and size in metres.

    Picture rows run from the far edge (+y) to the near edge (−y), columns along +x.
    """

    picture: np.ndarray
    centre_xy: tuple[float, float]
    size_xy: tuple[float, float]


@dataclass(frozen=True)
class SceneStyle:
    """What to add to the default scene; ``SceneStyle()`` adds nothing."""

    table: str = "plain"
    shadow_light: bool = False
    distractors: tuple[Distractor, ...] = field(default=())
    decals: tuple[Decal, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.table not in TABLE_TEXTURES:
            raise ValueError(f"table: expected one of {TABLE_TEXTURES}, got {self.table!r}")
        for d in self.distractors:
            if d.shape not in ("cube", "cylinder", "sphere"):
                raise ValueError(f"distractor {d.name!r}: shape must be cube, cylinder or sphere, got {d.shape!r}")

    @property
    def is_default(self) -> bool:
        return self.table == "plain" and not self.shadow_light and not self.distractors and not self.decals


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, int], cells: tuple[int, int]) -> np.ndarray:
    coarse = rng.standard_normal((cells[0] + 1, cells[1] + 1)).astype(np.float32)
    import cv2

    return np.asarray(cv2.resize(coarse, (shape[1], shape[0]), interpolation=cv2.INTER_CUBIC))


def table_texture(kind: str, seed: int = 0) -> np.ndarray:
    """uint8 (H, W, 3) sRGB picture of the table top (rows along −y … +y, columns along x), 640 px/m."""
    width = int(TABLE_SIZE_XY[0] * _TEXTURE_PIXELS_PER_M)
    height = int(TABLE_SIZE_XY[1] * _TEXTURE_PIXELS_PER_M)
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32) / _TEXTURE_PIXELS_PER_M
    if kind in ("oak", "birch"):
        light, dark = {"oak": ((0.76, 0.57, 0.35), (0.52, 0.35, 0.19)),
                       "birch": ((0.91, 0.81, 0.63), (0.76, 0.63, 0.45))}[kind]
        plank = 0.11
        index = np.floor(y / plank)
        tone = 1.0 + 0.06 * np.sin(index * 2.3 + seed)
        warp = _smooth_noise(rng, (height, width), (8, 40))
        rings = 0.5 + 0.5 * np.sin(2 * np.pi * (y * 90.0 + 1.5 * warp + 0.7 * index))
        grain = rings ** 6
        seams = (np.abs((y / plank) - np.round(y / plank)) * plank < 0.0012).astype(np.float32)
        mix = np.clip(0.55 * grain + 0.9 * seams, 0.0, 1.0)[..., None]
        colour = (np.array(light) * (1 - mix) + np.array(dark) * mix) * tone[..., None]
    elif kind == "checker":
        square = 0.05
        odd = ((np.floor(x / square) + np.floor(y / square)) % 2)[..., None]
        colour = np.array((0.82, 0.80, 0.76)) * (1 - odd) + np.array((0.27, 0.24, 0.22)) * odd
    elif kind == "gingham":
        stripe = 0.02
        a = (np.floor(x / stripe) % 2)
        b = (np.floor(y / stripe) % 2)
        red = np.array((0.80, 0.12, 0.12))
        white = np.array((0.95, 0.95, 0.93))
        weight = (0.5 * a + 0.5 * b)[..., None]
        colour = white * (1 - weight) + red * weight
    else:
        raise ValueError(f"table: no texture for {kind!r}")
    return np.clip(np.round(colour * 255.0), 0, 255).astype(np.uint8)


def _textured_quad(scene: sapien.Scene, name: str, picture: np.ndarray, centre_xy: tuple[float, float],
                   size_xy: tuple[float, float], lift: float) -> None:
    rgba = np.concatenate([picture, np.full((*picture.shape[:2], 1), 255, dtype=np.uint8)], axis=-1)
    texture = sapien.render.RenderTexture2D(np.ascontiguousarray(rgba), "R8G8B8A8Unorm", srgb=True)
    material = sapien.render.RenderMaterial(base_color=[1.0, 1.0, 1.0, 1.0], roughness=0.8, metallic=0.0)
    material.set_base_color_texture(texture)
    hx, hy = size_xy[0] / 2, size_xy[1] / 2
    vertices = np.array([[-hx, -hy, 0.0], [hx, -hy, 0.0], [hx, hy, 0.0], [-hx, hy, 0.0]], dtype=np.float32)
    triangles = np.array([[0, 1, 2], [0, 2, 3]], dtype=np.uint32)
    normals = np.tile(np.array([[0.0, 0.0, 1.0]], dtype=np.float32), (4, 1))
    # Texture rows run from +y (v = 0) to −y (v = 1) so the picture's row 0 is the table's far edge.
    uvs = np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=np.float32)
    shape = sapien.render.RenderShapeTriangleMesh(vertices, triangles, normals, uvs, material)
    body = sapien.render.RenderBodyComponent()
    body.attach(shape)
    entity = sapien.Entity()
    entity.name = name
    entity.add_component(body)
    entity.set_pose(sapien.Pose([centre_xy[0], centre_xy[1], TABLE_TOP_Z + lift]))
    scene.add_entity(entity)


def _distractor(scene: sapien.Scene, d: Distractor) -> sapien.Entity:
    builder = scene.create_actor_builder()
    material = sapien.render.RenderMaterial(base_color=[*d.rgb, 1.0], roughness=0.7, metallic=0.0)
    if d.shape == "cube":
        builder.add_box_visual(sapien.Pose(), [d.half_size] * 3, material=material)
    elif d.shape == "sphere":
        builder.add_sphere_visual(sapien.Pose(), d.half_size, material=material)
    else:
        upright = sapien.Pose(q=[math.sqrt(0.5), 0.0, -math.sqrt(0.5), 0.0])
        builder.add_cylinder_visual(upright, d.half_size, d.half_size, material=material)
    builder.set_initial_pose(sapien.Pose([d.xy[0], d.xy[1], TABLE_TOP_Z + d.half_size]))
    return builder.build_kinematic(name=d.name)


def apply_scene_style(scene: sapien.Scene, style: SceneStyle, table_centre_xy: tuple[float, float],
                      seed: int = 0) -> None:
    """Add the style's texture, light and distractors to a scene that already has its table and lights."""
    if style.table != "plain":
        _textured_quad(scene, f"table_texture_{style.table}", table_texture(style.table, seed), table_centre_xy,
                       TABLE_SIZE_XY, TEXTURE_LIFT)
    for index, decal in enumerate(style.decals):
        _textured_quad(scene, f"decal_{index}", decal.picture, decal.centre_xy, decal.size_xy, 2 * TEXTURE_LIFT)
    if style.shadow_light:
        scene.add_directional_light([-0.45, 0.35, -1.0], [0.7, 0.7, 0.7], shadow=True, position=[0.0, 0.0, 1.5],
                                    shadow_scale=1.5, shadow_near=-3.0, shadow_far=3.0, shadow_map_size=2048)
    for d in style.distractors:
        _distractor(scene, d)
