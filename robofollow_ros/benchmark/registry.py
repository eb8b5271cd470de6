"""The RoboFollow task registry: one validated, immutable view of scenes, layouts and tasks.

``default_registry()`` loads the shipped data once per process. Everything that needs a task,
a layout or a seed asks the registry, so there is one source of truth for the benchmark.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import loader
from robofollow_ros.benchmark.entropy import LIBERO_SCENE_GROUPS, group_sizes, scene_entropy
from robofollow_ros.benchmark.errors import UnknownTaskError
from robofollow_ros.benchmark.records import LEVELS, SCENES, EvalTask, Layout, TrainingTask
from robofollow_ros.benchmark.seeds import DEFAULT_ROUNDS


@dataclass(frozen=True)
class Registry:
    """All scenes, layouts, training tasks and evaluation tasks, validated on load."""

    layouts: dict[str, dict[str, Layout]]
    training: tuple[TrainingTask, ...]
    evaluation: tuple[EvalTask, ...]
    slot_xy: dict[int, tuple[float, float]]

    @classmethod
    def load(cls, data_dir: Path = loader.DATA_DIR, verify: bool = True) -> Registry:
        if verify:
            loader.verify_checksums(data_dir)
        layouts = loader.load_layouts(data_dir)
        slot_xy = loader.load_slot_xy(data_dir)
        training = loader.load_training_tasks(layouts, slot_xy, data_dir)
        evaluation = loader.load_eval_tasks(layouts, slot_xy, data_dir)
        return cls(layouts, tuple(training), tuple(evaluation), slot_xy)

    # -- lookups ---------------------------------------------------------------------------------
    @functools.cached_property
    def _eval_by_id(self) -> dict[str, EvalTask]:
        return {t.task_id: t for t in self.evaluation}

    @functools.cached_property
    def _train_by_id(self) -> dict[str, TrainingTask]:
        return {t.task_id: t for t in self.training}

    def eval_task(self, task_id: str) -> EvalTask:
        """The evaluation task ``task_id``; an unknown id suggests the closest ones."""
        try:
            return self._eval_by_id[task_id]
        except KeyError:
            raise UnknownTaskError(task_id, self._eval_by_id, "evaluation task") from None

    def training_task(self, task_id: str) -> TrainingTask:
        try:
            return self._train_by_id[task_id]
        except KeyError:
            raise UnknownTaskError(task_id, self._train_by_id, "training task") from None

    def task(self, task_id: str) -> EvalTask | TrainingTask:
        """An evaluation or training task by id (evaluation ids win; the two sets do not overlap)."""
        if task_id in self._eval_by_id:
            return self._eval_by_id[task_id]
        if task_id in self._train_by_id:
            return self._train_by_id[task_id]
        raise UnknownTaskError(task_id, [*self._eval_by_id, *self._train_by_id])

    def layout(self, scene: str, key: str) -> Layout:
        check_scene(scene)
        try:
            return self.layouts[scene][key]
        except KeyError:
            raise UnknownTaskError(key, self.layouts[scene], f"{scene} layout") from None

    def layout_of(self, task: EvalTask | TrainingTask) -> Layout:
        return self.layout(task.scene, task.layout)

    def eval_tasks(self, scene: str | None = None, level: str | None = None) -> list[EvalTask]:
        """Evaluation tasks in RoboFollow's trial order (scene, then registry order)."""
        if scene is not None:
            check_scene(scene)
        if level is not None:
            check_level(level)
        return [t for t in self.evaluation if scene in (None, t.scene) and level in (None, t.level)]

    def training_tasks(self, scene: str | None = None) -> list[TrainingTask]:
        if scene is not None:
            check_scene(scene)
        return [t for t in self.training if scene in (None, t.scene)]

    # -- figures ---------------------------------------------------------------------------------
    def scene_groups(self) -> dict[str, int]:
        return group_sizes(t.scene_group for t in self.training)

    def scene_entropy_bits(self) -> float:
        return scene_entropy(self.scene_groups())

    def summary(self, rounds: int = DEFAULT_ROUNDS) -> dict[str, Any]:
        """The counts of ``robofollow tasks summary`` (contract keys)."""
        per_scene: dict[str, dict[str, int]] = defaultdict(dict)
        counts = Counter((t.scene, t.level) for t in self.evaluation)
        for scene in SCENES:
            for level in LEVELS:
                per_scene[scene][level] = counts[(scene, level)]
        by_level = {level: sum(per_scene[s][level] for s in SCENES) for level in LEVELS}
        return {
            "training_tasks": len(self.training),
            "instruction_variants": sum(len(t.instructions) for t in self.training),
            "evaluation_tasks": {**by_level, "total": len(self.evaluation)},
            "per_scene": dict(per_scene),
            "scene_entropy_bits": round(self.scene_entropy_bits(), 3),
            "libero_scene_entropy_bits": round(scene_entropy(LIBERO_SCENE_GROUPS), 3),
            "trials_full_protocol": len(self.evaluation) * rounds,
        }


def check_scene(scene: str) -> str:
    if scene not in SCENES:
        raise ValueError(f"scene: {scene!r} is not one of {', '.join(SCENES)}")
    return scene


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
    return level


@functools.lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The shipped benchmark, loaded and validated once per process."""
    return Registry.load()
