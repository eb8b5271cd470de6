"""Issue 37: the reset check refuses a look-alike standing in for a missing object, and says which.

Built the way the rig meets it: a Scene 3 layout with ``blue_bar_5`` taken off the table and a 4 cm
blue cube where it stood, rendered by SAPIEN; perception names (or refuses to name) what it sees and
the reset check compares that with the layout. Also: what blocked a reset is recorded (ResetBlockers).
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.tracker import Perception, load_colour_model
from robofollow_ros.rig.reset_check import (
    MISPLACED,
    UNCONFIRMED,
    ResetBlockers,
    Seen,
    check_reset,
    expected_poses,
)
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

NAME = "blue_bar_5"


def _layout_with(registry, name):  # type: ignore[no-untyped-def]
    for key, layout in registry.layouts["scene3"].items():
        if name in layout.names:
            return key, layout
    raise AssertionError(f"no scene3 layout has {name}")


def test_a_cube_standing_in_for_a_missing_bar_blocks_the_reset_naming_the_bar(registry):  # type: ignore[no-untyped-def]
    import sapien

    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.scene_style import Distractor, SceneStyle
    from robofollow_ros.sim.world import SimWorld

    _, layout = _layout_with(registry, NAME)
    spec = layout.object(NAME)
    cube = Distractor("lookalike", "cube", 0.02, tuple(spec.color_rgb), (float(spec.nominal_xy[0]),
                                                                        float(spec.nominal_xy[1])))
    world = SimWorld(render=True, cameras=CameraSettings(depth=True, segmentation=True, cameras=("head",)),
                     style=SceneStyle(distractors=(cube,)))
    try:
        world.reset(layout, 1)
        world.objects[NAME].set_pose(sapien.Pose((0.0, 0.0, -5.0)))
        head = world.render_images()["head"]
    finally:
        world.close()
    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    perception = Perception(camera, layout, colour=load_colour_model(DEFAULT_CALIBRATION_DIR)[0])
    for i in range(3):  # a still table seen a few times, as the reset watch does
        result = perception.update(head["rgb"], head["depth"], 0.1 * i)
    track = result.tracks.get(NAME)
    assert track is None or track.confidence < 0.5, (track.position, track.confidence)
    assert NAME in result.doubts and "tall" in result.doubts[NAME], result.doubts
    seen = {n: Seen(t.position, t.quat_wxyz, t.confidence, t.visible) for n, t in result.tracks.items()}
    report = check_reset(layout, expected_poses(layout, 1), seen, doubts=result.doubts)
    assert not report.ok
    lines = report.lines()
    assert any(line.startswith(f"cannot confirm {NAME}: ") for line in lines), lines
    assert report.as_dict()["unconfirmed"] == [NAME]
    # Everything else on the table is in place: the look-alike is the one thing blocking.
    assert [o.name for o in report.wrong] == [NAME], report.summary()


def test_a_pose_seen_without_confidence_is_unconfirmed_not_in_place(registry):  # type: ignore[no-untyped-def]
    _, layout = _layout_with(registry, NAME)
    expected = expected_poses(layout, 1)
    seen = {n: Seen(p.position, _quat(p.yaw), 0.3 if n == NAME else 1.0) for n, p in expected.items()}
    report = check_reset(layout, expected, seen)
    assert [o.status for o in report.wrong] == [UNCONFIRMED]
    assert report.lines() == [report.wrong[0].line()]
    assert "seen at confidence 0.30" in report.lines()[0]


def test_results_record_what_blocked_a_reset_and_how_far_off(registry):  # type: ignore[no-untyped-def]
    _, layout = _layout_with(registry, NAME)
    expected = expected_poses(layout, 1)
    seen = {n: Seen(p.position, _quat(p.yaw)) for n, p in expected.items()}
    moved = dict(seen)
    moved[NAME] = Seen(np.add(expected[NAME].position, (0.04, 0.0, 0.0)), _quat(expected[NAME].yaw))
    blockers = ResetBlockers()
    for waited in (0.5, 1.0, 12.0):
        report = check_reset(layout, expected, moved)
        assert not report.ok
        blockers.fold(report, waited)
    assert check_reset(layout, expected, seen).ok
    (entry,) = blockers.as_list()
    assert entry["name"] == NAME and entry["status"] == MISPLACED and entry["looks"] == 3
    assert abs(entry["max_distance_m"] - 0.04) < 1e-6 and entry["first_s"] == 0.5 and entry["last_s"] == 12.0
    assert entry["line"].startswith(f"{NAME}: 4.0 cm off")


def _quat(yaw: float) -> tuple[float, float, float, float]:
    return float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))
