"""The online stage monitor: one object scores one trial, frame by frame, live or from a file.

``StageMonitor.update`` is amortised O(1) per frame (each scene's rules keep running facts, see
the scene modules); ``result()`` and ``live()`` read those facts in O(1), so they may be called on
every frame. ``score_trajectory`` is defined as feeding a monitor: there is one scorer.

A frame on which an object the rules read is *doubtful* (``Frame.doubtful``: perception published its
pose below ``contract.MIN_POSE_CONFIDENCE``) is held, not scored: the verdict stays what the confident
frames made it, and ``result()`` lists the held frames (their index among the frames offered) and the
objects that caused it under ``doubt_held`` (absent when nothing was held).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from robofollow_ros.benchmark import EvalTask, Registry, default_registry
from robofollow_ros.scoring.frame import Frame, TrajectoryError, frame_from_dict
from robofollow_ros.scoring.rules_base import SceneRules
from robofollow_ros.scoring.scene1 import Scene1Rules
from robofollow_ros.scoring.scene2 import Scene2Rules
from robofollow_ros.scoring.scene2_push import PushRules
from robofollow_ros.scoring.scene3 import Scene3Rules
from robofollow_ros.scoring.scene4 import Scene4Rules
from robofollow_ros.scoring.scene4_sequence import SequenceRules

#: Fields of a results.json entry that are not scene extras (they have their own place in the view).
_CORE_FIELDS = frozenset({"task", "instruction", "intent_ok", "intent_msg", "exec_ok", "exec_msg", "completion_ok",
                          "intent_score", "exec_score", "phases", "frames"})


def rules_for(task: EvalTask, registry: Registry) -> SceneRules:
    layout = registry.layout_of(task)
    if task.scene == "scene1":
        return Scene1Rules(task, layout, registry.slot_xy)
    if task.scene == "scene2":
        return (PushRules if task.action == "push" else Scene2Rules)(task, layout, registry.slot_xy)
    if task.scene == "scene3":
        return Scene3Rules(task, layout, registry.slot_xy)
    if task.action == "sequence_pickups":
        return SequenceRules(task, layout, registry.slot_xy)
    return Scene4Rules(task, layout, registry.slot_xy)


class StageMonitor:
    """Stage-wise Intent/Execution of one trial, updated one recorded frame at a time."""

    def __init__(self, task: EvalTask | str, registry: Registry | None = None) -> None:
        registry = registry or default_registry()
        self.task = registry.eval_task(task) if isinstance(task, str) else task
        self._rules = rules_for(self.task, registry)
        self._offered = 0
        self._held: list[int] = []
        self._held_objects: dict[str, int] = {}

    @property
    def required_objects(self) -> tuple[str, ...]:
        """Object names every frame must carry for this task's rules."""
        return self._rules.required_objects

    @property
    def required_quats(self) -> tuple[str, ...]:
        """Objects whose quaternion every frame must carry (Scene 3: the source bar)."""
        return self._rules.required_quats

    @property
    def frame_count(self) -> int:
        return self._rules.n

    @property
    def held_frames(self) -> tuple[int, ...]:
        """Indices (among the frames offered) of the frames held on a doubtful pose."""
        return tuple(self._held)

    def update(self, frame: Frame) -> bool:
        """Feed the next recorded frame (frame 0 first). Missing objects raise KeyError naming them.
        Returns False when the frame was held (a pose the rules read is doubtful) instead of scored."""
        missing = [n for n in self.required_objects if n not in frame.objects]
        missing += [f"quat {n}" for n in self.required_quats if n not in frame.object_quats]
        if missing:
            raise KeyError(f"frame {self._rules.n}: missing {', '.join(missing)}")
        index, self._offered = self._offered, self._offered + 1
        doubted = sorted(frame.doubtful & set(self.required_objects))
        if doubted:
            self._held.append(index)
            for name in doubted:
                self._held_objects[name] = self._held_objects.get(name, 0) + 1
            return False
        self._rules.update(frame)
        return True

    def _with_held(self, result: dict[str, Any]) -> dict[str, Any]:
        if self._held:
            result["doubt_held"] = {"frames": list(self._held), "objects": dict(sorted(self._held_objects.items()))}
        return result

    def result(self) -> dict[str, Any]:
        """The RoboFollow results.json entry as if the trial ended after the frames seen so far.

        Before the first frame this is the official evaluator's verdict on an empty trajectory.
        """
        if self._rules.n == 0:
            return self._with_held(self._rules.evaluate_empty())
        return self._with_held(self._rules.evaluate())

    def live(self) -> dict[str, Any]:
        """The live-score JSON published on /robofollow/score (schema in docs/scoring.md)."""
        if self._rules.n == 0:
            return self._with_held({"task": self.task.task_id, "scene": self.task.scene, "level": self.task.level,
                                    "frame": -1, "final": False, "intent": 0.0, "exec": 0.0, "complete": False,
                                    "stages": {}})
        view = score_view(self.result())
        return {"task": view.pop("task"), "scene": self.task.scene, "level": self.task.level,
                "frame": self._rules.n - 1, "final": False, **view}


def score_view(result: dict[str, Any]) -> dict[str, Any]:
    """``robofollow score --json``: totals, completion, per-stage scores and the scene's extras."""
    stages = {
        p["phase"]: {"intent": p["intent_score"], "exec": p["exec_score"], "intent_max": p["max_score"],
                     "exec_max": p["max_score"], "intent_reason": p["intent_reason"], "exec_reason": p["exec_reason"]}
        for p in result["phases"]
    }
    extras = {k: v for k, v in result.items() if k not in _CORE_FIELDS}
    return {"task": result["task"], "intent": result["intent_score"], "exec": result["exec_score"],
            "complete": result["completion_ok"], "stages": stages, **extras}


def score_trajectory(task: EvalTask | str, frames: Iterable[Frame], registry: Registry | None = None
                     ) -> dict[str, Any]:
    """Offline score of a recorded trajectory: exactly a fresh monitor fed every frame."""
    monitor = StageMonitor(task, registry)
    for frame in frames:
        monitor.update(frame)
    return monitor.result()


def frames_from_json(task: EvalTask | str, raw_frames: Any, registry: Registry | None = None) -> list[Frame]:
    """Validate the ``frames`` list of a trajectory file for ``task`` (errors name frame and field)."""
    monitor = StageMonitor(task, registry)
    if not isinstance(raw_frames, list):
        raise TrajectoryError("frames: expected a list of frames")
    return [frame_from_dict(f, i, monitor.required_objects, monitor.required_quats) for i, f in enumerate(raw_frames)]
