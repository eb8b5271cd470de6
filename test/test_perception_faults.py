"""Issue 37: no confident wrong pose under a real bench's faults, one small test per fault family (all 12).

One oracle trial (Scene 3: a bar carried between labels; the layout has flat labels, bars and cylinders)
is played once and rendered by SAPIEN through ``perception eval --perturb``'s own code; each fault family
of ``perturb_suite.FAULTS`` is then applied to those fixed frames and fed to a fresh ``Perception``.
A published pose is confident-wrong when it is > 2 cm off at confidence ≥ 0.9 or > 3 cm off at ≥ 0.5
(``perturb_score.confident_wrong``); every family must publish none, and stay useful (most visible
objects named, on clean frames the carried bar confidently right while resting).
"""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.perturb_eval import run_perturbation_eval
from robofollow_ros.perception.perturb_suite import FAULTS
from robofollow_ros.perception.tracker import load_colour_model
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

TASK = "L1_scene3_1__r_pick2_via4_to6_short_front"
#: Identity over visible objects each family must keep on these frames (clean: all but a sliver).
MIN_IDENTITY = {"clean": 0.97, "look-alike": 0.97}
MIN_IDENTITY_DEFAULT = 0.85


@pytest.fixture(scope="module")
def report(registry):  # type: ignore[no-untyped-def]
    task = registry.eval_task(TASK)
    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    out = run_perturbation_eval([(task, task.seed(1))], camera, colour, list(FAULTS), every=4)
    return {item["name"]: item for item in out["items"]}


@pytest.mark.parametrize("family", [p.name for p in FAULTS])
def test_no_confident_wrong_pose_under_the_fault(report, family):  # type: ignore[no-untyped-def]
    item = report[family]
    assert item["poses_published"] > 20
    assert item["confident_wrong_2cm_09"] == 0 and item["confident_wrong_3cm_05"] == 0, \
        item["confident_wrong_examples"]
    assert item["identity_accuracy"] >= MIN_IDENTITY.get(family, MIN_IDENTITY_DEFAULT), item["examples"]
    # Still useful: most published poses are ones the stage monitor uses (≥ MIN_POSE_CONFIDENCE), and, but for a
    # depth stall (whose colour-only poses are never certain), most are confident: honesty by silence would pass
    # the first assert.
    usable = sum(b["n"] for b in item["reliability"] if float(b["bin"].split("–")[0]) >= 0.5)
    confident = sum(b["n"] for b in item["reliability"] if float(b["bin"].split("–")[0]) >= 0.9)
    # The realistic mix stacks eight faults (half-hidden, stalls and flying pixels at once): doubt is its honest
    # answer for more poses (34 of 54 usable here), and it must still publish no confident wrong one (above).
    assert usable >= (0.5 if family == "realistic mix" else 0.7) * item["poses_published"], item["reliability"]
    assert confident >= (0.4 if family == "depth stall" else 0.5) * item["poses_published"], item["reliability"]


def test_the_look_alike_family_removes_an_object_and_nothing_takes_its_name(report):  # type: ignore[no-untyped-def]
    item = report["look-alike"]
    # The removed object's truth is far below the table: any confident pose of it would count above.
    assert item["false_detections"] >= 1 or item["unexplained_segments"] >= 1
    shares = [b["share_over_2cm"] for b in item["reliability"] if b["n"]]
    assert shares and np.isfinite(shares).all()


#: A look-alike identical to a layout object: Scene 2's 4 cm ``small_red_cube`` is carried to a bowl while a
#: 4 cm red cube stands where the removed ``large_red_cylinder`` was; appearance cannot tell them apart.
TWIN_TASK = "L1_scene2_5_01_place_right_cube_in_green_bowl_rightmost_cube_to_green_bowl"


def test_an_identical_look_alike_does_not_take_the_carried_objects_name(registry):  # type: ignore[no-untyped-def]
    from robofollow_ros.perception.sim_eval import layouts_trials

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    trial = next(t for t in layouts_trials("scene2", 1) if t[0].task_id == TWIN_TASK)
    item = next(p for p in FAULTS if p.name == "look-alike")
    out = run_perturbation_eval([trial], camera, colour, [item], every=4)["items"][0]
    assert out["poses_published"] > 20
    assert out["confident_wrong_2cm_09"] == 0 and out["confident_wrong_3cm_05"] == 0, out["confident_wrong_examples"]
    assert out["identity_accuracy"] >= 0.95, out["examples"]


#: Depth stalls while objects move (issue 37): Scene 4's blue cube unstacked from the yellow one, and a bowl nudged
#: while a cube is stacked beside it, seen after every 2nd executed row with depth missing on 2 frames of every 4.
#: The first depth frame after a stall sees the cube or the bowl cut by the gripper; the pose kept for a cut
#: segment must be one depth located, not the stall's colour-only blob pose (20.1 and 24.4 mm off, kept at 1.00).
STALL_TASKS = ("L0_s43_r_unstack_blue_cube_from_yellow_to_slot5",
               "L1_scene4_6_06_l1_s46_if_object_on_right_cube_then_r_stack_else_l_pick_blue")


def test_no_confident_wrong_pose_on_the_depth_frames_after_a_stall(registry):  # type: ignore[no-untyped-def]
    from robofollow_ros.perception.sim_eval import layouts_trials

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    trials = [t for t in layouts_trials("scene4", 1) if t[0].task_id in STALL_TASKS]
    assert len(trials) == len(STALL_TASKS)
    item = next(p for p in FAULTS if p.name == "depth stall")
    out = run_perturbation_eval(trials, camera, colour, [item], every=2)["items"][0]
    assert out["poses_published"] > 100
    assert out["confident_wrong_2cm_09"] == 0 and out["confident_wrong_3cm_05"] == 0, out["confident_wrong_examples"]
    assert out["identity_accuracy"] >= 0.95, out["examples"]


#: Flying depth pixels at a bowl's rim (issue 37): in Scene 4 a cube stands in the green bowl and stands out above its
#: rim; the rim's thin band next to the cube takes depths up to the cube's, and the bowl's fit rose 1.5–2 cm with it:
#: its name was refused as a taller look-alike's ("stands 4.7 cm tall where it should be 3.5 cm") on most frames, and
#: the yellow cylinder beside a taller object likewise.
FLYING_TASKS = ("L0_s41_l_pick_cube_in_bowl",
                "L1_scene4_6_06_l1_s46_if_object_on_right_cube_then_r_stack_else_l_pick_blue")


def test_flying_pixels_at_a_bowls_rim_leave_its_name(registry):  # type: ignore[no-untyped-def]
    from robofollow_ros.perception.sim_eval import layouts_trials

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    trials = [t for t in layouts_trials("scene4", 1) if t[0].task_id in FLYING_TASKS]
    assert len(trials) == len(FLYING_TASKS)
    item = next(p for p in FAULTS if p.name == "flying pixels")
    out = run_perturbation_eval(trials, camera, colour, [item], every=4)["items"][0]
    assert out["poses_published"] > 60
    assert out["confident_wrong_2cm_09"] == 0 and out["confident_wrong_3cm_05"] == 0, out["confident_wrong_examples"]
    assert out["identity_accuracy"] >= 0.95, out["examples"]
    # Never missed nor its name elsewhere; "named but not located" (its resting pose kept through a frame whose
    # segment looked lifted) is neither, and was scored as a correct measurement before the scorer told them apart.
    assert not any("green_bowl" in line and "not located" not in line for line in out["examples"]), out["examples"]


#: Scene 2's ``large_red_cylinder`` is carried 27 cm away and seen between the fingers as a lifted sliver (143 of its
#: 741 px): the tracker does not believe it and keeps the resting pose, doubtful.
SLIVER_TASK = "L1_scene2_4_01_pickup_red_cylinder_larger_red_object"


def test_a_carried_sliver_is_not_located_and_its_kept_pose_is_not_scored_as_measured(registry, monkeypatch):  # type: ignore[no-untyped-def]
    """The standard suite's 364.5 mm "max error" in every row: this kept pose scored as the sliver's measurement."""
    from robofollow_ros.perception import perturb_eval
    from robofollow_ros.perception.confidence import MIN_POSE_CONFIDENCE
    from robofollow_ros.perception.perturb_suite import STANDARD
    from robofollow_ros.perception.sim_eval import layouts_trials

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    trial = next(t for t in layouts_trials("scene2", 1) if t[0].task_id == SLIVER_TASK)
    results = []
    score = perturb_eval.score

    def recording(result, *args):  # type: ignore[no-untyped-def]
        results.append(result)
        return score(result, *args)

    monkeypatch.setattr(perturb_eval, "score", recording)
    clean = next(p for p in STANDARD if p.name == "clean")
    out = run_perturbation_eval([trial], camera, colour, [clean], every=4)["items"][0]
    dropped = [r.tracks["large_red_cylinder"] for r in results
               if r.doubts.get("large_red_cylinder", "").startswith("a lifted sliver")]
    assert dropped, [r.doubts for r in results]
    assert all(not t.visible and t.confidence < MIN_POSE_CONFIDENCE for t in dropped)  # said, and doubtful
    assert out["not_located"] >= 1 and out["max_error_m"] < 0.05, (out["max_error_m"], out["examples"])
    assert out["confident_wrong_2cm_09"] == 0 and out["confident_wrong_3cm_05"] == 0
