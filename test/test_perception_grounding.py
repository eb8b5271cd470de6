"""Grounding and identity models without pictures: costs, one-to-one choice, continuity, confidence."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.colours import class_image, colour_of_rgb
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.estimate import estimate_position, estimate_yaw, wrap_yaw
from robofollow_ros.perception.grounding import ground
from robofollow_ros.perception.identities import identity_models


def _blob(colour: str, x: float, y: float, width: float, top: float, flat: float) -> Detection:
    """A depth detection as the detector would measure a resting object centred at (x, y)."""
    return Detection(colour, 300, np.arange(3), (0.0, 0.0), z_top=TABLE_TOP_Z + top,
                     x_range=(x - width / 2, x + width / 2), y_front=y - width / 2, top_xy=(x, y),
                     flat_fraction=flat, point_count=300)


def _xy(point: np.ndarray) -> tuple[float, float]:
    return float(point[0]), float(point[1])


def test_spec_colours_fall_in_their_classes() -> None:
    assert colour_of_rgb((0.95, 0.25, 0.25)) == "red"  # Scene 3's salmon slab
    assert colour_of_rgb((1.0, 0.85, 0.1)) == "yellow"
    assert colour_of_rgb((0.0, 0.8, 0.0)) == "green"
    assert colour_of_rgb((0.1, 0.1, 1.0)) == "blue"
    with pytest.raises(ValueError, match="color_rgb"):
        colour_of_rgb((0.5, 0.5, 0.5))
    picture = np.array([[[200, 2, 2], [120, 120, 120], [74, 121, 205]]], dtype=np.uint8)
    assert class_image(picture).tolist() == [[1, 0, 4]]


def test_models_know_stacks_bowls_and_shapes(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene4", "scene4.1"))}
    assert models["green_cylinder_top"].resting_top_height == pytest.approx(0.049 + 0.05, abs=0.002)
    assert models["green_cylinder_top"].nominal_xy == models["blue_cube_right"].nominal_xy
    assert models["red_cube_in_bowl"].nominal_xy == models["green_bowl"].nominal_xy
    assert models["red_sphere"].round_top and not models["blue_cube_right"].round_top
    assert models["green_bowl"].width == pytest.approx(0.084)


def test_shape_tells_red_sphere_from_red_cylinder(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene1", "default"))
    # Both red, each placed on the other's nominal spot: shape must still win over position.
    sphere = _blob("red", 0.10, -0.04, 0.037, 0.040, 0.33)
    cylinder = _blob("red", -0.14, -0.04, 0.047, 0.050, 0.64)
    names = {g.detection is sphere: g.name for g in ground([sphere, cylinder], models, {})}
    assert names == {True: "red_sphere", False: "red_cylinder"}


def test_identical_blocks_follow_their_tracks_not_their_spots(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene1", "default"))
    nominal = {m.name: np.asarray(m.nominal_xy) for m in models}
    first = [_blob("yellow", *_xy(nominal[n]), 0.037, 0.040, 0.7) for n in ("yellow_block_1", "yellow_block_2")]
    assert [g.name for g in ground(first, models, {})] == ["yellow_block_1", "yellow_block_2"]
    # Block 1 was carried next to block 2's spot and block 2 sits 3 cm away from it: the tracks decide.
    tracks = {"yellow_block_1": nominal["yellow_block_2"] + [0.01, 0.0],
              "yellow_block_2": nominal["yellow_block_2"] + [0.04, 0.0]}
    moved = [_blob("yellow", *_xy(nominal["yellow_block_2"] + [0.012, 0.0]), 0.037, 0.040, 0.7),
             _blob("yellow", *_xy(nominal["yellow_block_2"] + [0.042, 0.0]), 0.037, 0.040, 0.7)]
    assert [g.name for g in ground(moved, models, tracks)] == ["yellow_block_1", "yellow_block_2"]


def test_lifted_object_keeps_its_name_through_continuity(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene2", "default"))
    # In the hand: 25 cm up, seen from the side (narrow, no flat top), 6 cm from its last track.
    held = _blob("red", -0.27, -0.02, 0.017, 0.29, 0.05)
    table = _blob("red", -0.03, -0.04, 0.037, 0.040, 0.69)
    tracks = {"large_red_cylinder": np.array([-0.24, -0.01]), "small_red_cube": np.array([-0.03, -0.04])}
    result = {g.name: g for g in ground([held, table], models, tracks)}
    assert result["large_red_cylinder"].detection is held
    assert result["small_red_cube"].detection is table


def test_a_blob_no_identity_explains_stays_unexplained(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene1", "default"))
    extra = _blob("blue", 0.0, -0.1, 0.04, 0.04, 0.7)
    third_red = [_blob("red", -0.14, -0.04, 0.037, 0.04, 0.33), _blob("red", 0.10, -0.04, 0.047, 0.05, 0.64),
                 _blob("red", -0.02, -0.10, 0.047, 0.05, 0.64)]
    out = ground([extra, *third_red], models, {})
    assert out[0].name is None and out[0].confidence == 1.0
    assert sorted(str(g.name) for g in out[1:]) == ["None", "red_cylinder", "red_sphere"]
    assert all(0.0 <= g.confidence <= 1.0 for g in out)


def test_yaw_folds_into_the_shape_period() -> None:
    assert wrap_yaw(math.pi / 2 + 0.1, math.pi / 2) == pytest.approx(0.1)
    assert wrap_yaw(-math.pi + 0.2, math.pi) == pytest.approx(0.2)
    assert wrap_yaw(math.pi - 0.2, math.pi) == pytest.approx(-0.2)


def test_blocks_and_slabs_get_a_yaw_and_a_yaw_aware_centre(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene3", "default"))}
    bar = _blob("red", 0.0, -0.1, 0.036, 0.026, 0.85)
    bar.top_yaw = math.pi / 2 + 0.2  # long side turned 0.2 rad from y
    assert estimate_yaw(bar, models["red_bar_2"]) == pytest.approx(0.2)
    hx, hy = 0.018, 0.028
    position = estimate_position(bar, models["red_bar_2"], None, 0.2)  # type: ignore[arg-type]
    assert position is not None
    assert position[1] - bar.y_front == pytest.approx(hx * math.sin(0.2) + hy * math.cos(0.2))  # type: ignore[operator]
    cube_models = {m.name: m for m in identity_models(registry.layout("scene1", "default"))}
    block = _blob("yellow", 0.0, -0.1, 0.04, 0.04, 0.7)
    block.top_yaw = math.pi / 2 + 0.1
    assert estimate_yaw(block, cube_models["yellow_block_1"]) == pytest.approx(0.1)
    assert estimate_yaw(block, cube_models["red_sphere"]) == 0.0  # round things have no yaw
