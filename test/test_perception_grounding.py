"""Grounding, primitive fits and identity models without pictures: synthetic surface points of known shapes.

Points are sampled on the faces of a sphere, cube, slab or cylinder that face the head camera (what
a depth camera returns), optionally with depth noise along the viewing rays; the truth is the pose
they were sampled at.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.colour_names import canonical_class
from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.estimate import estimate_pose, wrap_yaw
from robofollow_ros.perception.grounding import ground
from robofollow_ros.perception.identities import identity_models
from robofollow_ros.perception.primitives import Primitive, fit_primitive

CAMERA = np.array([0.0, -0.45, 1.45])


def _surface(prim: Primitive, centre: tuple[float, float, float], yaw: float = 0.0, n: int = 4000,
             noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """Points on the primitive's faces that the camera sees (normals towards it), above the table."""
    rng = np.random.default_rng(seed)
    if prim.shape == "sphere":
        (r,) = prim.dims
        normals = rng.standard_normal((n, 3))
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        local, local_normals = r * normals, normals
    elif prim.shape == "box":
        half = np.asarray(prim.dims)
        local = rng.uniform(-1, 1, (n, 3)) * half
        axis = rng.integers(0, 3, n)
        sign = rng.choice([-1.0, 1.0], n)
        local[np.arange(n), axis] = sign * half[axis]
        local_normals = np.zeros((n, 3))
        local_normals[np.arange(n), axis] = sign
    else:
        r, h = prim.dims
        theta = rng.uniform(0, 2 * math.pi, n)
        top = rng.random(n) < 0.35
        rho = np.where(top, r * np.sqrt(rng.random(n)), r)
        z = np.where(top, h, rng.uniform(-h, h, n))
        local = np.column_stack([rho * np.cos(theta), rho * np.sin(theta), z])
        local_normals = np.where(top[:, None], [0.0, 0.0, 1.0], np.column_stack([np.cos(theta), np.sin(theta),
                                                                                  np.zeros(n)]))
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    points = local @ rot.T + np.asarray(centre)
    normals = local_normals @ rot.T
    seen = (np.einsum("ij,ij->i", normals, CAMERA - points) > 0) & (points[:, 2] > TABLE_TOP_Z + 0.001)
    points = points[seen]
    if noise > 0:
        rays = points - CAMERA
        rays /= np.linalg.norm(rays, axis=1, keepdims=True)
        points = points + rays * rng.normal(0.0, noise, (len(points), 1))
    return points


def _detection(colour: str, points: np.ndarray, noise: float = 0.0) -> Detection:
    z = points[:, 2]
    return Detection(colour, len(points), np.arange(len(points)), (0.0, 0.0), kind="solid", points=points,
                     z_top=float(np.percentile(z, 95)), top_xy=(float(np.median(points[:, 0])),
                                                              float(np.median(points[:, 1]))), noise_m=noise)


def test_spec_colours_fall_in_their_classes() -> None:
    assert canonical_class((0.95, 0.25, 0.25)) == "red"  # Scene 3's salmon slab
    assert canonical_class((1.0, 0.85, 0.1)) == "yellow"
    assert canonical_class((0.0, 0.8, 0.0)) == "green"
    assert canonical_class((0.1, 0.1, 1.0)) == "blue"
    with pytest.raises(ValueError, match="color_rgb"):
        canonical_class((0.5, 0.5, 0.5))


def test_models_know_stacks_bowls_shapes_and_flat_labels(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene4", "scene4.1"))}
    assert models["green_cylinder_top"].resting_top_height == pytest.approx(0.049 + 0.05, abs=0.002)
    assert models["green_cylinder_top"].nominal_xy == models["blue_cube_right"].nominal_xy
    assert models["red_cube_in_bowl"].nominal_xy == models["green_bowl"].nominal_xy
    assert models["red_sphere"].primitive == Primitive("sphere", (0.024,))
    assert models["blue_cube_right"].primitive == Primitive("box", (0.024,) * 3)
    assert models["green_bowl"].width == pytest.approx(0.084) and not models["green_bowl"].flat  # static, not flat
    scene3 = {m.name: m for m in identity_models(registry.layout("scene3", "default"))}
    assert scene3["green_label_1"].flat and not scene3["green_bar_3"].flat
    assert scene3["red_bar_2"].primitive == Primitive("box", (0.018, 0.028, 0.013))


@pytest.mark.parametrize(("shape", "dims", "yaw"), [("sphere", (0.02,), 0.0), ("box", (0.02,) * 3, 0.3),
                                                     ("box", (0.018, 0.028, 0.013), -0.4),
                                                     ("cylinder", (0.025, 0.025), 0.0)])
def test_primitive_fit_recovers_the_pose_under_range_noise(shape: str, dims: tuple[float, ...], yaw: float) -> None:
    prim = Primitive(shape, dims)
    centre = (0.05, -0.1, TABLE_TOP_Z + (dims[-1] if shape != "sphere" else dims[0]))
    for noise, tolerance in ((0.0, 0.0005), (0.0064, 0.003)):  # exact, and 1 % of range at 0.8 m
        points = _surface(prim, centre, yaw, noise=noise, seed=4)
        start = np.median(points, axis=0)
        fit = fit_primitive(points, prim, start, init_yaw=yaw + 0.1, noise=noise, origin=CAMERA)
        assert np.linalg.norm(fit.position - centre) < tolerance, (noise, fit.position - centre)
        if shape == "box" and noise == 0.0:
            assert abs(wrap_yaw(fit.yaw - yaw, prim.yaw_period)) < 0.02


def test_extreme_percentiles_are_biased_by_noise_the_fit_is_not() -> None:
    prim = Primitive("box", (0.02,) * 3)
    centre = (0.0, -0.1, TABLE_TOP_Z + 0.02)
    points = _surface(prim, centre, noise=0.0064, seed=2)
    percentile_error = float(np.percentile(points[:, 2], 98)) - (centre[2] + 0.02)
    assert percentile_error > 0.006  # the old estimate's top (98th percentile): most of a centimetre too high
    fit = fit_primitive(points, prim, np.median(points, axis=0), noise=0.0064, origin=CAMERA)
    fit_error = float(np.linalg.norm(fit.position - centre))
    assert fit_error < 0.003 and fit_error < percentile_error / 3


def test_shape_tells_red_sphere_from_red_cylinder(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene1", "default"))}
    sphere_at = (0.10, -0.04, TABLE_TOP_Z + 0.02)  # each on the other's nominal spot: shape must win
    cylinder_at = (-0.14, -0.04, TABLE_TOP_Z + 0.025)
    sphere = _detection("red", _surface(models["red_sphere"].primitive, sphere_at, noise=0.004), 0.004)
    cylinder = _detection("red", _surface(models["red_cylinder"].primitive, cylinder_at, noise=0.004), 0.004)
    names = {g.detection is sphere: g.name for g in ground([sphere, cylinder], list(models.values()), {},
                                                             camera_origin=CAMERA)}
    assert names == {True: "red_sphere", False: "red_cylinder"}
    position, _ = estimate_pose(sphere, models["red_sphere"], _camera(), None)
    assert position is not None and np.linalg.norm(position - sphere_at) < 0.003


def _camera():  # type: ignore[no-untyped-def]
    from robofollow_ros.perception.camera_model import CameraModel
    from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

    return CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")


def test_identical_blocks_follow_their_tracks_not_their_spots(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene1", "default"))
    cube = next(m for m in models if m.name == "yellow_block_1").primitive
    nominal = {m.name: np.asarray(m.nominal_xy) for m in models}

    def block(xy: np.ndarray, seed: int) -> Detection:
        return _detection("yellow", _surface(cube, (xy[0], xy[1], TABLE_TOP_Z + 0.02), seed=seed))

    first = [block(nominal["yellow_block_1"], 1), block(nominal["yellow_block_2"], 2)]
    assert [g.name for g in ground(first, models, {}, camera_origin=CAMERA)] == ["yellow_block_1", "yellow_block_2"]
    # Block 1 was carried next to block 2's spot and block 2 sits 3 cm away from it: the tracks decide.
    tracks = {"yellow_block_1": nominal["yellow_block_2"] + [0.01, 0.0],
              "yellow_block_2": nominal["yellow_block_2"] + [0.04, 0.0]}
    moved = [block(nominal["yellow_block_2"] + [0.012, 0.0], 3), block(nominal["yellow_block_2"] + [0.042, 0.0], 4)]
    assert [g.name for g in ground(moved, models, tracks, camera_origin=CAMERA)] == ["yellow_block_1", "yellow_block_2"]


def test_lifted_object_keeps_its_name_through_continuity(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene2", "default"))}
    # In the hand: 25 cm up, only part of it seen (fingers hide the rest), 6 cm from its last track.
    held_points = _surface(models["large_red_cylinder"].primitive, (-0.27, -0.02, TABLE_TOP_Z + 0.29), seed=5)
    held = _detection("red", held_points[held_points[:, 0] > -0.27])
    table = _detection("red", _surface(models["small_red_cube"].primitive, (-0.03, -0.04, TABLE_TOP_Z + 0.02)))
    tracks = {"large_red_cylinder": np.array([-0.24, -0.01]), "small_red_cube": np.array([-0.03, -0.04])}
    result = {g.name: g for g in ground([held, table], list(models.values()), tracks, camera_origin=CAMERA)}
    assert result["large_red_cylinder"].detection is held
    assert result["small_red_cube"].detection is table


def test_a_segment_no_identity_explains_stays_unexplained(registry) -> None:  # type: ignore[no-untyped-def]
    models = identity_models(registry.layout("scene1", "default"))
    by_name = {m.name: m for m in models}
    extra = _detection("blue", _surface(Primitive("box", (0.02,) * 3), (0.0, -0.1, TABLE_TOP_Z + 0.02)))
    other = _detection("other", _surface(Primitive("box", (0.02,) * 3), (0.2, -0.1, TABLE_TOP_Z + 0.02)))
    reds = [_detection("red", _surface(by_name["red_sphere"].primitive, (-0.14, -0.04, TABLE_TOP_Z + 0.02))),
            _detection("red", _surface(by_name["red_cylinder"].primitive, (0.10, -0.04, TABLE_TOP_Z + 0.025))),
            _detection("red", _surface(by_name["red_cylinder"].primitive, (-0.02, -0.10, TABLE_TOP_Z + 0.025)))]
    out = ground([extra, other, *reds], models, {}, camera_origin=CAMERA)
    assert out[0].name is None and out[0].confidence == 1.0
    assert out[1].name is None
    assert sorted(str(g.name) for g in out[2:]) == ["None", "red_cylinder", "red_sphere"]
    assert all(0.0 <= g.confidence <= 1.0 for g in out)


def test_yaw_folds_into_the_shape_period() -> None:
    assert wrap_yaw(math.pi / 2 + 0.1, math.pi / 2) == pytest.approx(0.1)
    assert wrap_yaw(-math.pi + 0.2, math.pi) == pytest.approx(0.2)
    assert wrap_yaw(math.pi - 0.2, math.pi) == pytest.approx(-0.2)


def test_slabs_get_their_yaw_and_centre_from_the_fit(registry) -> None:  # type: ignore[no-untyped-def]
    models = {m.name: m for m in identity_models(registry.layout("scene3", "default"))}
    bar = models["red_bar_2"]
    centre = (0.0, -0.1, TABLE_TOP_Z + 0.013)
    detection = _detection("red", _surface(bar.primitive, centre, yaw=0.2, seed=8))
    (out,) = ground([detection], list(models.values()), {}, camera_origin=CAMERA)
    assert out.name == "red_bar_2"
    position, yaw = estimate_pose(detection, bar, _camera(), None)
    assert position is not None and np.linalg.norm(position - centre) < 0.001
    assert yaw == pytest.approx(0.2, abs=0.02)
