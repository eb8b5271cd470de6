"""The perturbations of ``perception eval --perturb`` checked against their stated definitions.

Reference values are computed here independently of the code under test: the sRGB curve is written
out from IEC 61966-2-1, JPEG is compared with Pillow's encoder, the depth-noise model with its
formula, the occlusion band with f·B·(1/z_near − 1/z_far).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from robofollow_ros.perception import perturb
from robofollow_ros.perception.align import DepthToColour
from robofollow_ros.perception.perturb_suite import STANDARD, SUITES, resolve_suite

K = np.array([[328.74146, 0.0, 160.0], [0.0, 328.74146, 120.0], [0.0, 0.0, 1.0]])


def _linear(codes: np.ndarray) -> np.ndarray:
    """IEC 61966-2-1 decoding, written out here as the independent reference."""
    c = np.asarray(codes, dtype=np.float64) / 255.0
    out = np.empty_like(c)
    low = c <= 0.04045
    out[low] = c[low] / 12.92
    out[~low] = ((c[~low] + 0.055) / 1.055) ** 2.4
    return out


@pytest.fixture(scope="module")
def picture() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(30, 180, size=(120, 160, 3), dtype=np.uint8)


@pytest.mark.parametrize("gains", [(1.12, 1.0, 1.0), (1.2, 1.0, 0.8), (0.8, 1.2, 0.8)])
def test_white_balance_gain_equals_the_measured_linear_channel_ratio(picture, gains):  # type: ignore[no-untyped-def]
    out = perturb.white_balance(picture, gains)
    before, after = _linear(picture), _linear(out)
    for channel, gain in enumerate(gains):
        ratio = after[..., channel].sum() / before[..., channel].sum()
        assert ratio == pytest.approx(gain, rel=0.01), (channel, ratio)


def test_exposure_scales_linear_light_and_clips_highlights(picture):  # type: ignore[no-untyped-def]
    half = perturb.exposure(picture, 0.5)
    assert _linear(half).sum() / _linear(picture).sum() == pytest.approx(0.5, rel=0.01)
    bright = perturb.exposure(np.full((4, 4, 3), 230, dtype=np.uint8), 1.7)
    assert (bright == 255).all()  # 230 → 0.79 linear × 1.7 > 1: clipped at full scale
    with pytest.raises(ValueError, match="gains"):
        perturb.white_balance(picture, (1.0, -1.0, 1.0))


@pytest.mark.parametrize(("z", "rho"), [(0.8, 0.01), (1.5, 0.01), (0.8, 0.02)])
def test_depth_noise_rms_follows_the_quadratic_range_model(z: float, rho: float) -> None:
    depth = np.full((240, 320), z, dtype=np.float32)
    depth[:10] = 0.0  # invalid pixels stay invalid
    noisy = perturb.depth_noise(depth, rho, np.random.default_rng(1))
    assert (noisy[:10] == 0).all()
    error = noisy[10:].astype(np.float64) - z
    expected = rho * z * z  # σ = ρ · z² / 1 m
    assert error.std() == pytest.approx(expected, rel=0.02)
    assert abs(error.mean()) < 4 * expected / np.sqrt(error.size)
    assert float(perturb.depth_sigma(0.8, 0.01)) == pytest.approx(0.0064)


def test_edge_holes_cut_the_occlusion_band_left_of_a_nearer_object() -> None:
    depth = np.full((60, 80), 1.0, dtype=np.float32)
    depth[20:40, 40:60] = 0.8  # a box 20 cm in front of the background
    out = perturb.edge_holes(depth, focal_px=K[0, 0], baseline_m=0.05, matcher_px=1)
    band = int(np.ceil(K[0, 0] * 0.05 * (1 / 0.8 - 1 / 1.0)))  # 5 px for these numbers
    assert band == 5
    assert (out[25:35, 40 - band:40] == 0).all()  # the occlusion band on the background, left of the box
    assert (out[25:35, 40 - band - 2] == 1.0).all()  # and no wider (beyond the 1 px matcher margin)
    assert (out[25:35, 60] == 0).all() and (out[25:35, 59] == 0).all()  # matcher failures at the right edge
    assert (out[25:35, 62:] == 1.0).all()  # right of the box: no occlusion band
    assert (out[:15] == 1.0).all() and (out[28:32, 45:55] == 0.8).all()  # away from edges: untouched


def test_misregistration_moves_depth_by_whole_pixels() -> None:
    depth = np.arange(12 * 10, dtype=np.float32).reshape(12, 10) + 1.0
    out = perturb.misregister(depth, 2, 0)
    np.testing.assert_array_equal(out[:, 2:], depth[:, :-2])
    assert (out[:, :2] == 0).all()
    out = perturb.misregister(depth, 0, -1)
    np.testing.assert_array_equal(out[:-1], depth[1:])
    with pytest.raises(ValueError, match="whole pixels"):
        perturb.misregister(depth, 0.5, 0)  # type: ignore[arg-type]


def test_jpeg_matches_an_independent_encoder_at_the_same_quality(picture):  # type: ignore[no-untyped-def]
    smooth = np.asarray(Image.fromarray(picture).resize((320, 240), Image.BILINEAR))
    ours = perturb.jpeg(smooth, 50).astype(np.int16)
    buffer = io.BytesIO()
    Image.fromarray(smooth).save(buffer, format="JPEG", quality=50)  # Pillow: libjpeg, 4:2:0 by default
    theirs = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")).astype(np.int16)
    assert np.abs(ours - theirs).mean() < 1.5
    loss_50 = np.abs(ours - smooth).mean()
    loss_90 = np.abs(perturb.jpeg(smooth, 90).astype(np.int16) - smooth).mean()
    assert loss_50 > loss_90 > 0


def test_motion_blur_spreads_a_point_along_a_line_conserving_linear_light() -> None:
    rgb = np.zeros((21, 21, 3), dtype=np.uint8)
    rgb[10, 10] = 255
    out = perturb.motion_blur(rgb, 5, 0.0)
    lit = np.nonzero(out[..., 0])
    assert set(lit[0].tolist()) == {10} and sorted(lit[1].tolist()) == [8, 9, 10, 11, 12]
    assert _linear(out[..., 0]).sum() == pytest.approx(1.0, rel=0.02)
    assert _linear(out[10, 8:13, 0]) == pytest.approx([0.2] * 5, rel=0.03)


def _box_scene() -> np.ndarray:
    """A table plane seen obliquely with a box standing on it, as colour-registered depth."""
    v = np.mgrid[0:240, 0:320][0].astype(np.float64)
    depth = 0.7 + 0.0015 * (240 - v)
    depth[100:150, 140:190] -= 0.05
    return depth.astype(np.float32)


def test_depth_from_an_offset_camera_is_aligned_back_with_the_extrinsics() -> None:
    depth = _box_scene()
    offset = (0.015, 0.0, 0.0)
    raw = perturb.offset_depth_camera(depth, K, offset)
    shift = K[0, 0] * 0.015 / float(depth[125, 165])  # the box should move this many pixels to the left
    edge_before = int(np.argmax(depth[125] < depth[125, 0] - 0.02))
    edge_after = int(np.argmax((raw[125] > 0) & (raw[125] < depth[125, 0] - 0.02)))
    assert edge_before - edge_after == pytest.approx(shift, abs=1.0)
    aligned = DepthToColour.identity_offset(K, (320, 240), offset).align(raw)
    valid = aligned > 0
    assert valid.mean() > 0.97
    close = np.abs(aligned - depth) < 0.001
    assert close[valid].mean() > 0.98


def test_suites_resolve_by_name_or_item_list() -> None:
    assert resolve_suite("standard") == STANDARD
    assert all(p.goal or p.name == "clean" for p in SUITES["goals"])
    assert [p.name for p in resolve_suite("clean, jpeg q50")] == ["clean", "jpeg q50"]
    with pytest.raises(ValueError, match="unknown"):
        resolve_suite("jpeg q51")
    rng = np.random.default_rng(0)
    rgb = np.full((8, 8, 3), 100, dtype=np.uint8)
    depth = np.full((8, 8), 0.8, dtype=np.float32)
    clean_rgb, clean_depth = resolve_suite("clean")[0].apply(rgb, depth, K, rng)
    assert clean_rgb is rgb and clean_depth is depth


def test_a_calibrated_depth_camera_is_aligned_by_perception(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    import yaml

    from robofollow_ros.perception.camera_model import CalibrationError
    from robofollow_ros.perception.tracker import perception_from_calibration
    from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

    for name in ("head.yaml", "extrinsics.yaml", "colour.yaml"):
        shutil.copy(DEFAULT_CALIBRATION_DIR / name, tmp_path / name)
    shutil.copy(DEFAULT_CALIBRATION_DIR / "head.yaml", tmp_path / "head_depth.yaml")
    with pytest.raises(CalibrationError, match=r"extrinsics\.yaml has no 'head_depth' entry"):
        perception_from_calibration(tmp_path)
    extrinsics = yaml.safe_load((tmp_path / "extrinsics.yaml").read_text())
    extrinsics["head_depth"] = {"parent_frame": "head_camera_optical", "child_frame": "head_depth_optical",
                                "translation": [0.015, 0.0, 0.0], "rotation_xyzw": [0.0, 0.0, 0.0, 1.0]}
    (tmp_path / "extrinsics.yaml").write_text(yaml.safe_dump(extrinsics))
    perception, calibrated = perception_from_calibration(tmp_path)
    assert calibrated and perception.depth_alignment is not None
    depth = _box_scene()
    raw = perturb.offset_depth_camera(depth, K, (0.015, 0.0, 0.0))
    aligned = perception.depth_alignment.align(raw)
    valid = aligned > 0
    assert (np.abs(aligned - depth)[valid] < 0.001).mean() > 0.98
