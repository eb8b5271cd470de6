"""An independent batch scorer: our reading of the official RoboFollow evaluator, for tests only.

Written from ``evaluation/common.py`` and ``evaluation/scene1.py`` ... ``scene4.py`` of
AutoLab-SAI-SJTU/RoboFollow (commit a867718): the same evaluator classes, the same order of
checks, the same loop bounds, the same ``<`` versus ``<=``, the same NumPy arithmetic and the same
result fields. It rescans the whole trajectory (no running facts) and imports nothing from
``robofollow_ros.scoring``: the online scorer is checked against it, never the other way round.
Only the registry's task records are used, to know a task's source, target, arm and layout.
"""

from __future__ import annotations

from typing import Any

from official_reference import scene1, scene2, scene3, scene4
from official_reference.trajectory import build, eval_task_view, prefix
from robofollow_ros.benchmark import EvalTask, Registry

SCENES = {"scene1": scene1, "scene2": scene2, "scene3": scene3, "scene4": scene4}


def score(task: EvalTask, frames: list[dict[str, Any]], registry: Registry) -> dict[str, Any]:
    """The official ``run_once`` result entry (without ``frames``) for these trajectory-file frames."""
    return SCENES[task.scene].result_entry(eval_task_view(task), build(task.scene, registry.layout_of(task), frames))


def score_prefixes(task: EvalTask, frames: list[dict[str, Any]], registry: Registry,
                   lengths: list[int]) -> dict[int, dict[str, Any]]:
    """``score`` of ``frames[:k]`` for each k, converting the frames once (the evaluator sees only the prefix)."""
    traj = build(task.scene, registry.layout_of(task), frames)
    view = eval_task_view(task)
    return {k: SCENES[task.scene].result_entry(view, prefix(traj, k)) for k in lengths}
