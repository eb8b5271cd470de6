"""``robofollow perception eval --perturb SUITE``: perception under camera-realistic perturbations.

Per trial the oracle (or ``--static``: nobody) plays in SAPIEN while the head camera's RGB, depth and
segmentation are captured every ``every`` executed rows, with the robot's joint positions and every
object's pose. Scene-side items (table textures, a shadowing light, distractors) need other
renders of the *same* moments: a second world with that ``SceneStyle`` is reset to the same layout
and seed, and each captured state (joints, object poses) is set and rendered again. Picture-side
items perturb the captured frames (``perturb_suite.Perturbation.apply``). Every item gets its own
``Perception`` per trial, fed the trial's frames in order (tracking included), and is scored against
the simulator's truth: position error of correctly named visible objects, identity accuracy, misses
(visible, not named), false detections (a name given to something that is no layout object: table,
arm, distractor) and unexplained segments.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from robofollow_ros.benchmark.records import EvalTask, Layout
from robofollow_ros.perception.align import DepthToColour
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.colour_model import COLOUR_CLASSES, ColourModel
from robofollow_ros.perception.colour_names import canonical_class
from robofollow_ros.perception.perturb_score import CapturedFrame, ItemStats, score
from robofollow_ros.perception.perturb_suite import Perturbation, scenes_of
from robofollow_ros.perception.tracker import Perception

#: Colours no benchmark object has (linear albedo), for the distractors.
DISTRACTOR_PURPLE = (0.55, 0.06, 0.75)
DISTRACTOR_CYAN = (0.0, 0.55, 0.55)
CLASS_ALBEDO = {"red": (0.95, 0.2, 0.2), "yellow": (1.0, 0.85, 0.1), "green": (0.1, 0.8, 0.2), "blue": (0.1, 0.3, 0.95)}


class FrameRecorder:
    """The evaluator's World around a ``SimWorld``, capturing the head camera every ``every`` rows."""

    def __init__(self, world: Any, every: int) -> None:
        if every < 1:
            raise ValueError(f"every: must be >= 1, got {every}")
        self.world, self.every = world, every
        self.frames: list[CapturedFrame] = []
        self._rows = 0

    def reset(self, task: EvalTask, seed: int) -> None:
        self.world.reset(task, seed)
        self.frames, self._rows = [], 0
        self.capture()

    def capture(self) -> None:
        w = self.world
        head = w.render_images()["head"]
        poses = {name: w.object_pose(name) for name in w.objects}
        self.frames.append(CapturedFrame(head["rgb"], head["depth"], head["segmentation"], w.segmentation_ids(),
                                         w.scorer_frame()["objects"], w.physics_steps * w.dt,
                                         np.asarray(w.robot.get_qpos()).copy(), poses))

    def execute(self, row: Any) -> int:
        steps = int(self.world.execute(row))
        self._rows += 1
        if self._rows % self.every == 0:
            self.capture()
        return steps

    def observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = self.world.observation()
        return obs

    def scorer_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = self.world.scorer_frame()
        return frame


def distractors_for(layout: Layout) -> tuple[Any, ...]:
    """Purple cube and cyan cylinder always; one object of each benchmark colour the layout does not use."""
    from robofollow_ros.sim.scene_style import Distractor

    used = {canonical_class(o.color_rgb) for o in layout.objects}
    out = [Distractor("distractor_purple", "cube", 0.02, DISTRACTOR_PURPLE, (0.26, -0.14)),
           Distractor("distractor_cyan", "cylinder", 0.022, DISTRACTOR_CYAN, (-0.28, -0.12))]
    spots = [(0.02, 0.06), (-0.12, 0.06), (0.16, 0.06), (-0.24, 0.06)]
    for colour in COLOUR_CLASSES:
        if colour not in used:
            out.append(Distractor(f"distractor_{colour}", "sphere", 0.02, CLASS_ALBEDO[colour], spots.pop(0)))
    return tuple(out)


#: The look-alike family's stand-in: a cube of this half size (a 4 cm cube).
LOOKALIKE_HALF = 0.02
#: Where a removed object is put (far below the table: never seen).
REMOVED_POSITION = (0.0, 0.0, -5.0)


def lookalike_target(layout: Layout) -> Any:
    """The object the look-alike family removes: the first on the table itself that is not a 4 cm cube."""
    for spec in layout.objects:
        if spec.role != "object" or spec.on_top_of or spec.in_container:
            continue
        if spec.shape == "cube" and abs(spec.size[0] - LOOKALIKE_HALF) < 1e-3:
            continue
        return spec
    return None


def style_for(scene: str, layout: Layout) -> Any:
    from robofollow_ros.sim.scene_style import Distractor, SceneStyle

    if scene == "lookalike":
        spec = lookalike_target(layout)
        if spec is None:
            return SceneStyle()
        xy = (float(spec.nominal_xy[0]), float(spec.nominal_xy[1]))
        return SceneStyle(distractors=(Distractor(f"lookalike_{spec.name}", "cube", LOOKALIKE_HALF,
                                                  tuple(spec.color_rgb), xy),))

    if scene in ("oak", "birch", "checker", "gingham"):
        return SceneStyle(table=scene)
    if scene == "shadows":
        return SceneStyle(shadow_light=True)
    if scene == "distractors":
        return SceneStyle(distractors=distractors_for(layout))
    raise ValueError(f"scene variant: unknown {scene!r}")


def rerender(world: Any, frames: Sequence[CapturedFrame], removed: str | None = None) -> list[CapturedFrame]:
    """The same moments in another look of the scene: joints and object poses set, then rendered.
    ``removed``: an object taken off the table (put far below it; its truth says so)."""
    import sapien

    out = []
    for frame in frames:
        world.robot.set_qpos(frame.qpos)
        truth = dict(frame.truth)
        for name, (p, q) in frame.poses.items():
            world.objects[name].set_pose(sapien.Pose(REMOVED_POSITION if name == removed else p, q))
        if removed is not None:
            truth[removed] = list(REMOVED_POSITION)
        head = world.render_images()["head"]
        out.append(CapturedFrame(head["rgb"], head["depth"], head["segmentation"], world.segmentation_ids(),
                                 truth, frame.stamp, frame.qpos, frame.poses))
    return out


def run_perturbation_eval(trials: Iterable[tuple[EvalTask, int]], camera: CameraModel, colour: ColourModel,
                          items: Sequence[Perturbation], policy: str | None = "oracle", every: int = 4,
                          max_steps: int = 10, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Play (or only reset) each trial once, render its variants, score every item; see the module docstring."""
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    settings = CameraSettings(width=camera.width, height=camera.height, depth=True, segmentation=True,
                              cameras=("head",))
    world = SimWorld(render=True, cameras=settings)
    recorder = FrameRecorder(world, every)
    stats = {item.name: ItemStats() for item in items}
    scenes = scenes_of(items)
    policy_obj = None
    if policy is not None:
        from robofollow_ros.policy.spec import load_policy

        policy_obj = load_policy(policy)
    trials = list(trials)
    started = time.monotonic()
    try:
        for index, (task, seed) in enumerate(trials):
            if policy_obj is None:
                recorder.reset(task, seed)
            else:
                run_episode(recorder, policy_obj, task, seed, EpisodeSettings(max_steps=max_steps))
            layout = world.layout
            assert layout is not None
            by_scene = {"clean": recorder.frames}
            for scene in scenes[1:]:
                variant = SimWorld(render=True, cameras=settings, style=style_for(scene, layout))
                try:
                    variant.reset(layout, seed)
                    target = lookalike_target(layout) if scene == "lookalike" else None
                    by_scene[scene] = rerender(variant, recorder.frames, None if target is None else target.name)
                finally:
                    variant.close()
            for item in items:
                _score_item(item, by_scene[item.scene], layout, camera, colour, stats[item.name],
                            f"{task.task_id}/{seed}: ", seed)
            if progress is not None:
                elapsed = time.monotonic() - started
                eta = elapsed / (index + 1) * (len(trials) - index - 1)
                progress(f"[{index + 1}/{len(trials)}] {task.task_id} seed {seed}: {len(recorder.frames)} frames, "
                         f"{(index + 1) / elapsed * 60:.1f} trials/min, ETA {eta:.0f} s")
    finally:
        world.close()
    return {"items": [stats[item.name].summary(item) for item in items], "trials": len(trials),
            "every": every, "policy": policy, "wall_s": round(time.monotonic() - started, 1),
            "colour_model": colour.source}


def _score_item(item: Perturbation, frames: Sequence[CapturedFrame], layout: Layout, camera: CameraModel,
                colour: ColourModel, stats: ItemStats, label: str, seed: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{item.name}/{label}/{seed}".encode()))
    offset = item.depth_offset
    alignment = None if offset is None else DepthToColour.identity_offset(camera.k, (camera.width, camera.height),
                                                                          offset)
    perception = Perception(camera, layout, colour=colour, depth_alignment=alignment)
    flat = frozenset(m.name for m in perception.models.values() if m.flat)
    for index, frame in enumerate(frames):
        rgb, depth = item.apply(frame.rgb, frame.depth, camera.k, rng, index, frame.segmentation, frame.ids, flat)
        start = time.perf_counter()
        result = perception.update(rgb, depth, frame.stamp)
        stats.seconds += time.perf_counter() - start
        score(result, frame, frame.ids, frame.segmentation, stats, f"{label}frame {index}: ")
