"""Perception on real SAPIEN renders perturbed the way real cameras differ: the old failures, and their fixes.

The failures of issue 19 are reproduced with the rule the old detector used (``_old_classes``: fixed
HSV thresholds, S ≥ 80, V ≥ 50, hue bands), written out here as the reference; the same renders then
go through today's perception. Segmentation pictures only score; they are never an input.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from robofollow_ros.perception import perturb
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.perturb_eval import distractors_for
from robofollow_ros.perception.tracker import Perception, load_colour_model
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR
from test_perception_sim import _render


@pytest.fixture(scope="module")
def camera() -> CameraModel:
    return CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")


@pytest.fixture(scope="module")
def colour():  # type: ignore[no-untyped-def]
    model, calibrated = load_colour_model(DEFAULT_CALIBRATION_DIR)
    assert calibrated  # the simulator's colour calibration is committed in calibration/sim/colour.yaml
    return model


@pytest.fixture(scope="module")
def frames(registry):  # type: ignore[no-untyped-def]
    from robofollow_ros.sim.scene_style import SceneStyle

    layout = registry.layout("scene1", "default")
    return {"clean": _render(registry, "scene1", "default", 5),
            "all colours": _render(registry, "scene2", "default", 5),
            "oak": _render(registry, "scene1", "default", 5, SceneStyle(table="oak")),
            "distractors": _render(registry, "scene1", "default", 5, SceneStyle(distractors=distractors_for(layout))),
            "labels": _render(registry, "scene3", "default", 5)}


def _old_classes(rgb: np.ndarray) -> np.ndarray:
    """The old detector's rule: OpenCV HSV, saturated pixels (S ≥ 80, V ≥ 50) by hue band (1 red … 4 blue)."""
    hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    out = np.zeros(hue.shape, dtype=np.uint8)
    for code, bands in ((1, ((0, 10), (165, 180))), (2, ((15, 40),)), (3, ((42, 90),)), (4, ((95, 135),))):
        for lo, hi in bands:
            out[(hue >= lo) & (hue < hi)] = code
    out[(sat < 80) | (val < 50)] = 0
    return out


def _table(frame) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Pixels that are no layout object (table, arms, background)."""
    return ~np.isin(frame["seg"], list(frame["ids"].values()))


def _check_named_and_placed(frame, result, tolerance: float) -> None:  # type: ignore[no-untyped-def]
    by_id = {v: k for k, v in frame["ids"].items()}
    flat_seg = frame["seg"].reshape(-1)
    assert result.missing == []
    for g in result.groundings:
        assert g.name is not None, f"unexplained {g.detection.colour} segment of {g.detection.pixel_count} px"
        ids, counts = np.unique(flat_seg[g.detection.pixels], return_counts=True)
        assert by_id.get(int(ids[counts.argmax()])) == g.name
    for name, track in result.tracks.items():
        assert np.linalg.norm(track.position - np.asarray(frame["truth"][name])) < tolerance, name


def test_old_thresholds_turn_an_oak_table_or_a_12_percent_white_balance_shift_into_a_yellow_object(frames):  # type: ignore[no-untyped-def]
    oak = frames["oak"]
    yellow_table = (_old_classes(oak["rgb"]) == 2) & _table(oak)
    assert yellow_table.mean() > 0.2  # a fifth of the picture: the table became "yellow"
    clean = frames["clean"]
    assert ((_old_classes(clean["rgb"]) == 2) & _table(clean)).mean() < 0.01  # the plain table was not
    warm = perturb.white_balance_codes(clean["rgb"], (1.12, 1.0, 0.88))  # the earlier experiment's shift
    assert ((_old_classes(warm) == 2) & _table(clean)).mean() > 0.5  # 12 % toward red: the table is yellow


def test_the_earlier_white_balance_shift_keeps_every_name_now(frames, camera, colour):  # type: ignore[no-untyped-def]
    clean = frames["clean"]
    warm = perturb.white_balance_codes(clean["rgb"], (1.12, 1.0, 0.88))
    result = Perception(camera, clean["layout"], colour=colour).update(warm, clean["depth"], 0.0)
    _check_named_and_placed(clean, result, 0.004)


def test_an_oak_table_is_never_an_object_now(frames, camera, colour):  # type: ignore[no-untyped-def]
    oak = frames["oak"]
    result = Perception(camera, oak["layout"], colour=colour).update(oak["rgb"], oak["depth"], 0.0)
    _check_named_and_placed(oak, result, 0.004)
    assert result.colour_drift is not None and result.colour_drift.drifted  # and the changed table is reported
    assert any("table" in r for r in result.colour_drift.reasons)


@pytest.mark.parametrize("gains", [(1.12, 1.0, 1.0), (1.2, 1.0, 0.8), (0.8, 1.2, 0.8)])
def test_white_balance_shifts_keep_every_name_and_are_reported_as_drift(frames, camera, colour, gains):  # type: ignore[no-untyped-def]
    clean = frames["all colours"]  # red, yellow, green and blue objects: every channel's gain is measurable
    rgb = perturb.white_balance(clean["rgb"], gains)
    perception = Perception(camera, clean["layout"], colour=colour)
    for step in range(3):
        result = perception.update(rgb, clean["depth"], 0.1 * step)
    _check_named_and_placed(clean, result, 0.004)
    assert result.colour_drift is not None and result.colour_drift.drifted
    assert result.colour_drift.gains is not None
    measured = np.asarray(result.colour_drift.gains)
    applied = np.asarray(gains) / gains[1]  # reported relative to green
    assert np.abs(np.log(measured / applied)).max() < 0.15, measured  # a diagnostic: right within ~15 %


def test_the_clean_scene_reports_no_drift(frames, camera, colour):  # type: ignore[no-untyped-def]
    clean = frames["clean"]
    result = Perception(camera, clean["layout"], colour=colour).update(clean["rgb"], clean["depth"], 0.0)
    _check_named_and_placed(clean, result, 0.002)
    assert result.colour_drift is not None and not result.colour_drift.drifted, result.colour_drift.reasons


@pytest.mark.parametrize("factor", [0.25, 1.7])
def test_exposure_extremes_keep_every_name(frames, camera, colour, factor):  # type: ignore[no-untyped-def]
    clean = frames["clean"]
    rgb = perturb.exposure(clean["rgb"], factor)
    result = Perception(camera, clean["layout"], colour=colour).update(rgb, clean["depth"], 0.0)
    _check_named_and_placed(clean, result, 0.004)


def test_pose_error_bounds_under_range_noise_misregistration_and_jpeg(frames, camera, colour):  # type: ignore[no-untyped-def]
    clean = frames["clean"]
    rng = np.random.default_rng(7)
    cases = {"noise 1 %": (clean["rgb"], perturb.depth_noise(clean["depth"], 0.01, rng), 0.004, 0.012),
             "misregistration 2 px": (clean["rgb"], perturb.misregister(clean["depth"], 2, 0), 0.006, 0.008),
             "jpeg q50": (perturb.jpeg(clean["rgb"], 50), clean["depth"], 0.002, 0.006)}
    for label, (rgb, depth, median_bound, max_bound) in cases.items():
        result = Perception(camera, clean["layout"], colour=colour).update(rgb, depth, 0.0)
        errors = [float(np.linalg.norm(t.position - np.asarray(clean["truth"][n]))) for n, t in result.tracks.items()]
        assert len(errors) == len(clean["layout"].names), label
        assert float(np.median(errors)) < median_bound and max(errors) < max_bound, (label, errors)


def test_a_constant_misregistration_is_learned_and_removed(frames, camera, colour):  # type: ignore[no-untyped-def]
    clean = frames["clean"]
    shifted = perturb.misregister(clean["depth"], 2, 0)
    perception = Perception(camera, clean["layout"], colour=colour)
    for step in range(6):
        result = perception.update(clean["rgb"], shifted, 0.1 * step)
    assert perception.segmenter.misregistration.shift == (2, 0)
    errors = [float(np.linalg.norm(t.position - np.asarray(clean["truth"][n]))) for n, t in result.tracks.items()]
    assert max(errors) < 0.002


def test_unused_colour_distractors_stay_unexplained(frames, camera, colour):  # type: ignore[no-untyped-def]
    scene = frames["distractors"]
    result = Perception(camera, scene["layout"], colour=colour).update(scene["rgb"], scene["depth"], 0.0)
    named = [g for g in result.groundings if g.name is not None]
    assert {g.name for g in named} == set(scene["layout"].names)
    by_id = {v: k for k, v in scene["ids"].items()}
    flat_seg = scene["seg"].reshape(-1)
    for g in named:  # no name on a distractor
        ids, counts = np.unique(flat_seg[g.detection.pixels], return_counts=True)
        assert by_id.get(int(ids[counts.argmax()])) == g.name
    assert sorted(d.colour for d in result.unexplained) == ["blue", "other", "other"]  # blue: unused in scene 1


def test_labels_are_found_in_the_table_plane_by_colour(frames, camera, colour):  # type: ignore[no-untyped-def]
    scene = frames["labels"]
    result = Perception(camera, scene["layout"], colour=colour).update(scene["rgb"], scene["depth"], 0.0)
    _check_named_and_placed(scene, result, 0.003)
    kinds = {g.name: g.detection.kind for g in result.groundings}
    assert kinds["green_label_1"] == "flat" and kinds["green_bar_3"] == "solid"


def test_the_default_scene_style_renders_exactly_todays_scene(registry, frames):  # type: ignore[no-untyped-def]
    from robofollow_ros.sim.scene_style import SceneStyle

    assert SceneStyle().is_default and not SceneStyle(table="oak").is_default
    with pytest.raises(ValueError, match="table: expected one of"):
        SceneStyle(table="marble")
    again = _render(registry, "scene1", "default", 5, SceneStyle())
    np.testing.assert_array_equal(again["rgb"], frames["clean"]["rgb"])
    np.testing.assert_array_equal(again["depth"], frames["clean"]["depth"])
    oak = frames["oak"]  # the texture changes the table's look, not its depth (0.3 mm above the top)
    table = _table(oak)
    assert np.abs(oak["rgb"][table].astype(int) - frames["clean"]["rgb"][table]).mean() > 20
    assert np.abs(oak["depth"] - frames["clean"]["depth"]).max() < 0.001
