"""Perception measured against the simulator's ground truth (``robofollow perception eval``).

Per trial the world is reset to a layout and a seed, and the head camera is rendered with depth and
segmentation. Perception sees RGB and depth only; the segmentation and the true poses are used only
to score it. With a policy (the ``oracle`` by default) the trial is played out and perception runs
every ``every`` executed rows, so frames include the gripper hiding objects and objects in the
hand. The same run records, for every row, a scorer frame whose object poses are perception's
(``PerceivedWorld``), so the oracle's verdict scored from perception can be compared with the one
scored from ground truth (``--oracle-agreement``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.benchmark import default_registry
from robofollow_ros.benchmark.records import EvalTask
from robofollow_ros.contract import CAMERA_OBS_KEYS, TABLE_TOP_Z
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_model import ColourModel
from robofollow_ros.perception.confidence import PoseGate
from robofollow_ros.perception.tracker import Perception, PerceptionResult, load_colour_model

#: A ground-truth object counts as visible with at least this many pixels in the head camera.
MIN_VISIBLE_PIXELS = 30
HEAD_KEY = CAMERA_OBS_KEYS["head"]


@dataclass
class FrameStats:
    """Accumulated comparison of perception with ground truth."""

    errors: list[float] = field(default_factory=list)
    identity_checks: int = 0
    identity_correct: int = 0
    frames: int = 0
    perception_s: float = 0.0
    wrong: list[str] = field(default_factory=list)
    worst: tuple[float, str] = (0.0, "")

    def summary(self) -> dict[str, Any]:
        errors = np.asarray(self.errors)
        return {
            "frames": self.frames,
            "objects_measured": len(self.errors),
            "median_position_error_m": round(float(np.median(errors)), 5) if len(errors) else None,
            "p95_position_error_m": round(float(np.percentile(errors, 95)), 5) if len(errors) else None,
            "max_position_error_m": round(float(errors.max()), 5) if len(errors) else None,
            "identity_accuracy": round(self.identity_correct / self.identity_checks, 5) if self.identity_checks
            else None,
            "identity_checks": self.identity_checks,
            "frames_per_second": round(self.frames / self.perception_s, 1) if self.perception_s > 0 else None,
            "identity_errors": self.wrong[:20],
            "worst_position_error": self.worst[1],
        }


def compare(result: PerceptionResult, segmentation: np.ndarray, segmentation_ids: dict[str, int],
            truth: dict[str, list[float]], stats: FrameStats, label: str = "") -> None:
    """Score one perception result: position error and identity of every visible object."""
    flat = segmentation.reshape(-1)
    counts = np.bincount(flat[flat >= 0], minlength=max(segmentation_ids.values()) + 1)
    named = {g.name: g for g in result.groundings if g.name is not None}
    stats.frames += 1
    for name, seg_id in segmentation_ids.items():
        if counts[seg_id] < MIN_VISIBLE_PIXELS:
            continue
        stats.identity_checks += 1
        grounding = named.get(name)
        if grounding is None:
            stats.wrong.append(f"{label}{name}: visible, not reported")
            continue
        ids, hits = np.unique(flat[grounding.detection.pixels], return_counts=True)
        if int(ids[hits.argmax()]) != seg_id:
            stats.wrong.append(f"{label}{name}: given to another object's blob")
            continue
        stats.identity_correct += 1
        track = result.tracks[name]
        error = float(np.linalg.norm(track.position - np.asarray(truth[name])))
        stats.errors.append(error)
        if error > stats.worst[0]:
            stats.worst = (error, f"{label}frame {stats.frames - 1}: {name} off by {error:.4f} m "
                                  f"(true z {truth[name][2]:.3f}, {counts[seg_id]} px visible)")


class PerceivedWorld:
    """A ``SimWorld`` seen through perception: the evaluator's World, plus perception-based scorer frames."""

    def __init__(self, world: Any, perception: Perception, stats: FrameStats, every: int = 5,
                 use_depth: bool = True) -> None:
        if every < 1:
            raise ValueError(f"every: must be >= 1, got {every}")
        self.world, self.perception, self.stats, self.every = world, perception, stats, every
        self.use_depth = use_depth
        self.perceived_frames: list[dict[str, Any]] = []
        self.truth_frames: list[dict[str, Any]] = []
        self._rows = 0
        self._label = ""
        self.gate = PoseGate()

    def reset(self, task: EvalTask, seed: int) -> None:
        self.world.reset(task, seed)
        assert self.world.layout is not None
        self.perception.reset(self.world.layout)
        self.perceived_frames, self.truth_frames, self._rows = [], [], 0
        self.gate = PoseGate()
        self._label = f"{task.task_id}/{seed}: "
        self.perceive()

    def perceive(self, images: dict[str, Any] | None = None) -> None:
        head = images if images is not None else self.world.render_images()["head"]
        stamp = self.world.physics_steps * self.world.dt
        start = time.perf_counter()
        result = self.perception.update(head["rgb"], head.get("depth") if self.use_depth else None, stamp)
        self.stats.perception_s += time.perf_counter() - start
        compare(result, head["segmentation"], self.world.segmentation_ids(),
                self.world.scorer_frame()["objects"], self.stats, self._label)

    def execute(self, row: Any) -> int:
        steps = int(self.world.execute(row))
        self._rows += 1
        if self._rows % self.every == 0:
            self.perceive()
        return steps

    def observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = self.world.observation()
        return obs

    def scorer_frame(self) -> dict[str, Any]:
        truth: dict[str, Any] = self.world.scorer_frame()
        self.truth_frames.append(truth)
        self.perceived_frames.append(self.perceived_frame(truth))
        return truth

    def perceived_frame(self, truth: dict[str, Any]) -> dict[str, Any]:
        """The truth frame with object poses replaced by perception's as the stage monitor takes them (poses below
        ``MIN_POSE_CONFIDENCE`` ignored: the last confident one; never confident: the nominal spot)."""
        frame = dict(truth)
        tracks = self.perception.tracks
        objects, quats = self.gate.update({n: (t.position, t.quat_wxyz) for n, t in tracks.items()},
                                          {n: t.confidence for n, t in tracks.items()})
        for name, model in self.perception.models.items():
            if name not in objects:
                z = TABLE_TOP_Z + model.resting_top_height - model.top_offset
                objects[name] = [model.nominal_xy[0], model.nominal_xy[1], z]
                quats[name] = [1.0, 0.0, 0.0, 0.0]
        frame["objects"], frame["object_quats"] = objects, quats
        return frame


def layouts_trials(scene: str | None, rounds: int, tasks_per_layout: int = 1) -> list[tuple[EvalTask, int]]:
    """(task, seed) pairs: for every layout of the scene(s), its first ``tasks_per_layout`` tasks × rounds."""
    registry = default_registry()
    picked: dict[tuple[str, str], list[EvalTask]] = {}
    for task in registry.eval_tasks(scene=scene):
        group = picked.setdefault((task.scene, task.layout), [])
        if len(group) < tasks_per_layout:
            group.append(task)
    return [(task, task.seed(r)) for group in picked.values() for task in group for r in range(1, rounds + 1)]


def run_perception_eval(trials: Iterable[tuple[EvalTask, int]], camera: CameraModel, policy: str | None = "oracle",
                        every: int = 5, max_steps: int = 10, use_depth: bool = True,
                        progress: Callable[[str], None] | None = None,
                        colour: ColourModel | None = None) -> dict[str, Any]:
    """Play each trial (or only look at it, ``policy=None``) and compare perception with the truth.

    ``colour``: the colour model (default: the simulator's calibration, ``calibration/sim/colour.yaml``).
    """
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.scoring.monitor import score_trajectory
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    stats = FrameStats()
    if colour is None:
        from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

        colour = load_colour_model(DEFAULT_CALIBRATION_DIR)[0]
    perception = Perception(camera, colour=colour)
    world = SimWorld(render=True, cameras=CameraSettings(width=camera.width, height=camera.height, depth=True,
                                                         segmentation=True, cameras=("head",)))
    seen = PerceivedWorld(world, perception, stats, every, use_depth)
    agreements: list[dict[str, Any]] = []
    policy_obj = None
    if policy is not None:
        from robofollow_ros.policy.spec import load_policy

        policy_obj = load_policy(policy)
    started = time.monotonic()
    try:
        for task, seed in trials:
            if policy_obj is None:
                seen.reset(task, seed)
            else:
                run_episode(seen, policy_obj, task, seed, EpisodeSettings(max_steps=max_steps))
                truth = score_trajectory(task, _frames(task, seen.truth_frames))
                perceived = score_trajectory(task, _frames(task, seen.perceived_frames))
                agreements.append(_agreement(task, seed, truth, perceived))
            if progress is not None:
                progress(f"{task.task_id} seed {seed}: {stats.frames} frames")
    finally:
        world.close()
    report = stats.summary()
    report["trials"] = len(agreements) if policy_obj is not None else None
    report["wall_s"] = round(time.monotonic() - started, 1)
    report["depth"] = use_depth
    if policy_obj is not None:
        agree = sum(a["agree"] for a in agreements)
        report["oracle_agreement"] = round(agree / len(agreements), 4) if agreements else None
        report["oracle_completion_truth"] = sum(a["truth"]["complete"] for a in agreements)
        report["disagreements"] = [a for a in agreements if not a["agree"]][:20]
    return report


def _frames(task: EvalTask, raw: list[dict[str, Any]]) -> list[Any]:
    from robofollow_ros.scoring.frame import frame_from_dict

    return [frame_from_dict(f, i) for i, f in enumerate(raw)]


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    return {"intent": bool(result["intent_ok"]), "exec": bool(result["exec_ok"]),
            "complete": bool(result["completion_ok"])}


def _agreement(task: EvalTask, seed: int, truth: dict[str, Any], perceived: dict[str, Any]) -> dict[str, Any]:
    t, p = _verdict(truth), _verdict(perceived)
    return {"task": task.task_id, "seed": seed, "truth": t, "perceived": p, "agree": t == p}
