"""Perception honest about doubt (issue 27): no published pose more than 3 cm off at confidence ≥ 0.5.

Inputs are SAPIEN renders of real oracle trials: the oracle plays a Scene 1 place (a block lifted,
carried and put down) and a Scene 2 place (a cube carried over to a bowl) physics-only, and the head
camera renders those moments with the robot's joints and the objects' poses set (as
``perception eval --perturb`` re-renders scenes). Two camera effects are added the way the existing
perception tests build inputs:
- a sliver after a place: once the block rests again, a finger in front hides all but 15 % of it
  (its other pixels painted the arm's grey), so the tracker last saw it in the hand;
- flying depth pixels (``perturb.flying_pixels``): within 2 px of every depth edge the far side takes a
  depth between its own and the nearer surface's, so an object's edge next to a finger floats up.
The segmentation picture only builds inputs and scores; it is never an input to perception.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.perception import perturb
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.confidence import MIN_POSE_CONFIDENCE, PoseGate
from robofollow_ros.perception.tracker import Perception, load_colour_model
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

#: The issue's bar: a pose published at confidence ≥ MIN_POSE_CONFIDENCE is within this of the truth.
TOLERANCE_M = 0.03
SLIVER_KEEP = 0.15
TRIALS = {"block": ("L0_place_yellow_block_1_behind_red_cylinder", "yellow_block_1", 21),
          "bowl": ("L0_place_right_cube_in_green_bowl", "right_cube", 12)}


def _play(registry, task_id: str, rows: int):  # type: ignore[no-untyped-def]
    """The oracle's trial physics-only, then its first ``rows`` states rendered by the head camera."""
    import sapien

    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.policy.spec import load_policy
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    task = registry.eval_task(task_id)
    physics = SimWorld(render=False)
    states = []

    class Recorder:
        def reset(self, task, seed):  # type: ignore[no-untyped-def]
            physics.reset(task, seed)
            self.capture()

        def capture(self) -> None:
            states.append((np.asarray(physics.robot.get_qpos()).copy(),
                           {n: physics.object_pose(n) for n in physics.objects}, physics.physics_steps * physics.dt,
                           physics.scorer_frame()["objects"]))

        def execute(self, row):  # type: ignore[no-untyped-def]
            steps = physics.execute(row)
            self.capture()
            return steps

        def observation(self):  # type: ignore[no-untyped-def]
            return physics.observation()

        def scorer_frame(self):  # type: ignore[no-untyped-def]
            return physics.scorer_frame()

    run_episode(Recorder(), load_policy("oracle"), task, task.seed(1), EpisodeSettings(max_steps=10))
    layout = physics.layout
    physics.close()
    world = SimWorld(render=True, cameras=CameraSettings(depth=True, segmentation=True, cameras=("head",)))
    world.reset(layout, task.seed(1))
    frames = []
    for qpos, poses, stamp, truth in states[:rows]:
        world.robot.set_qpos(qpos)
        for name, (p, q) in poses.items():
            world.objects[name].set_pose(sapien.Pose(p, q))
        head = world.render_images()["head"]
        frames.append({"rgb": head["rgb"], "depth": head["depth"], "seg": head["segmentation"], "stamp": stamp,
                       "truth": truth})
    ids = world.segmentation_ids()
    world.close()
    return {"layout": layout, "frames": frames, "ids": ids}


@pytest.fixture(scope="module")
def trials(registry):  # type: ignore[no-untyped-def]
    return {key: _play(registry, task_id, rows) for key, (task_id, _, rows) in TRIALS.items()}


@pytest.fixture(scope="module")
def camera() -> CameraModel:
    return CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")


def _run(trial, camera, inputs):  # type: ignore[no-untyped-def]
    """Feed (rgb, depth) per frame; returns per frame {name: (error m, confidence, visible px)}."""
    perception = Perception(camera, trial["layout"], colour=load_colour_model(DEFAULT_CALIBRATION_DIR)[0])
    out = []
    for frame, (rgb, depth) in zip(trial["frames"], inputs, strict=True):
        result = perception.update(rgb, depth, frame["stamp"])
        out.append({name: (float(np.linalg.norm(t.position - np.asarray(frame["truth"][name]))), t.confidence,
                           int((frame["seg"] == trial["ids"][name]).sum()))
                    for name, t in result.tracks.items()})
    return out


def _confident_and_wrong(published) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"frame {i}: {name} off by {err * 100:.1f} cm at confidence {conf:.2f}"
            for i, tracks in enumerate(published) for name, (err, conf, _) in tracks.items()
            if err > TOLERANCE_M and conf >= MIN_POSE_CONFIDENCE]


def test_a_just_placed_object_seen_as_a_sliver_is_not_published_at_its_in_hand_pose(trials, camera):  # type: ignore[no-untyped-def]
    trial = trials["block"]
    name = TRIALS["block"][1]
    seg_id = trial["ids"][name]
    rest_z = trial["frames"][0]["truth"][name][2]
    lifted = [i for i, f in enumerate(trial["frames"]) if f["truth"][name][2] - rest_z > 0.05]
    assert lifted, "the oracle never lifted the block"
    inputs, slivers = [], []
    for i, frame in enumerate(trial["frames"]):
        rgb = frame["rgb"].copy()
        placed = i > lifted[-1] and abs(frame["truth"][name][2] - rest_z) < 0.01
        if placed:  # a finger in front: all but the leftmost 15 % of the block's pixels are the arm's grey
            rows, cols = np.nonzero(frame["seg"] == seg_id)
            hidden = cols > np.percentile(cols, 100 * SLIVER_KEEP)
            rgb[rows[hidden], cols[hidden]] = (110, 110, 110)
            slivers.append(i)
        inputs.append((rgb, frame["depth"]))
    assert len(slivers) >= 2, "no frame after the place to show as a sliver"
    published = _run(trial, camera, inputs)
    assert _confident_and_wrong(published) == []
    # Not honest by silence: the block was published confidently and right while resting and in the hand.
    carried = [i for i in lifted if published[i][name][1] >= MIN_POSE_CONFIDENCE and published[i][name][0] < 0.015]
    assert len(carried) >= len(lifted) // 2, [published[i][name] for i in lifted]
    assert published[0][name][1] >= MIN_POSE_CONFIDENCE and published[0][name][0] < 0.01
    print("sliver frames (error m, confidence):", [published[i][name][:2] for i in slivers])


@pytest.mark.parametrize("key", ["block", "bowl"])
def test_flying_depth_pixels_at_edges_do_not_publish_a_confident_wrong_pose(trials, camera, key):  # type: ignore[no-untyped-def]
    trial = trials[key]
    rng = np.random.default_rng(7)
    inputs = [(f["rgb"], perturb.flying_pixels(f["depth"], rng, width_px=2)) for f in trial["frames"]]
    floated = sum(int(((d != f["depth"]) & np.isin(f["seg"], list(trial["ids"].values()))).sum())
                  for f, (_, d) in zip(trial["frames"], inputs, strict=True))
    assert floated > 100 * len(inputs)  # object pixels really were moved (every frame has edges)
    published = _run(trial, camera, inputs)
    assert _confident_and_wrong(published) == []
    # Still useful: most visible objects (≥ 30 px) are published confidently.
    checks = [conf >= MIN_POSE_CONFIDENCE for tracks in published for _, conf, px in tracks.values() if px >= 30]
    assert np.mean(checks) > 0.85, np.mean(checks)


def test_flying_pixels_lie_between_the_far_and_the_near_surface_only_at_edges():  # type: ignore[no-untyped-def]
    depth = np.full((20, 20), 0.8, dtype=np.float32)
    depth[5:15, 5:15] = 0.6  # a nearer box
    depth[0, 0] = 0.0  # a hole stays a hole
    out = perturb.flying_pixels(depth, np.random.default_rng(0), width_px=2)
    changed = out != depth
    assert changed.any() and out[0, 0] == 0.0
    assert np.all((out[changed] > 0.6) & (out[changed] < 0.8))
    assert np.all(depth[changed] == np.float32(0.8))  # only the far side moves
    ring = np.zeros_like(changed)
    ring[3:17, 3:17] = True
    ring[5:15, 5:15] = False
    assert not (changed & ~ring).any()  # within 2 px of the box's outline
    with pytest.raises(ValueError, match="width_px"):
        perturb.flying_pixels(depth, np.random.default_rng(0), width_px=0)


def _marker(name: str, position: tuple[float, float, float], confidence: float | None) -> Marker:
    m = Marker(ns=name, action=Marker.ADD)
    m.header.frame_id = "world"
    m.pose.position.x, m.pose.position.y, m.pose.position.z = position
    m.pose.orientation.w = 1.0
    m.color.a = 1.0 if confidence is None else max(0.05, confidence)
    if confidence is not None:
        m.text = json.dumps({"confidence": confidence, "age_s": 0.0, "visible": True})
    return m


def test_the_stage_monitor_ignores_poses_below_the_documented_confidence():  # type: ignore[no-untyped-def]
    from robofollow_ros.nodes.conversions import objects_from_markers
    from robofollow_ros.nodes.stage_monitor_node import marker_confidences

    gate = PoseGate()
    assert gate.threshold == MIN_POSE_CONFIDENCE == 0.5
    frames = [
        [_marker("block", (0.1, 0.0, 0.76), 0.98), _marker("mock", (0.0, 0.2, 0.77), None)],
        [_marker("block", (0.1, 0.0, 0.89), 0.49), _marker("mock", (0.0, 0.2, 0.78), None)],  # doubted lift
        [_marker("block", (0.1, 0.0, 0.86), 0.5), _marker("late", (0.3, 0.3, 0.8), 0.2)],
    ]
    scored = []
    for markers in frames:
        msg = MarkerArray(markers=markers)
        _, positions, quats = objects_from_markers(msg)
        confidences = marker_confidences(msg)
        scored.append(gate.update({n: (positions[n], quats[n]) for n in positions}, confidences)[0])
    assert marker_confidences(MarkerArray(markers=frames[0]))["mock"] == 1.0  # no text: colour alpha
    assert scored[0]["block"][2] == pytest.approx(0.76)
    assert scored[1]["block"][2] == pytest.approx(0.76)  # 0.49: ignored, the last confident pose stays
    assert scored[1]["mock"][2] == pytest.approx(0.78)
    assert scored[2]["block"][2] == pytest.approx(0.86)  # at the threshold: scored
    assert "late" not in scored[2] and gate.ignored == 2  # never confident: no pose, like never seen
