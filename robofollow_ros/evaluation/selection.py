"""Which trials a run contains, in RoboFollow's order.

Scenes 1→4; within a scene, registry order; all rounds of a task before the next task. ``limit``
keeps the first N selected tasks *per scene and level*, so ``--levels L0,L1 --limit 2`` runs two L0 and two
L1 tasks of each scene. RoboFollow's own ``--limit`` counts per scene (there, that selection is two L0 tasks);
run.json's official ``arguments`` therefore name the selected tasks explicitly where the two differ
(``runner.EvalConfig.arguments``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from robofollow_ros.benchmark import LEVELS, SCENES, EvalTask, Registry, UnknownTaskError


@dataclass(frozen=True, order=True)
class TrialKey:
    """One trial: a task, a round (1-based) and the seed the rule gives them; ``control`` names an instruction
    control (``evaluation.controls``) run on the same task and seed, "" for the true instruction."""

    task_id: str
    round: int
    seed: int
    control: str = ""

    @property
    def trial_id(self) -> str:
        return f"{self.partner_id}_{self.control}" if self.control else self.partner_id

    @property
    def partner_id(self) -> str:
        """The true trial's id (a control trial pairs with it; a true trial is its own)."""
        return f"{self.task_id}_r{self.round}_s{self.seed}"


def parse_scenes(value: str) -> list[str]:
    """``all`` or a comma list of ``scene1..scene4``; a bad name is reported with the choices."""
    if value == "all":
        return list(SCENES)
    scenes = [s.strip() for s in value.split(",") if s.strip()]
    bad = [s for s in scenes if s not in SCENES]
    if bad or not scenes:
        raise ValueError(f"--scene: {value!r} is not 'all' or a comma list of {', '.join(SCENES)}")
    return scenes


def parse_levels(value: str) -> list[str]:
    levels = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in levels if v not in LEVELS]
    if bad or not levels:
        raise ValueError(f"--levels: {value!r} must be a comma list of {', '.join(LEVELS)}")
    return levels


def limit_differs_from_official(levels: Sequence[str], limit: int | None) -> bool:
    """Whether ``limit`` per scene and level selects other tasks than RoboFollow's per-scene ``--limit``
    would: only with a limit and more than one level."""
    return limit is not None and len(set(levels)) > 1


def select_tasks(
    registry: Registry,
    scenes: Sequence[str],
    levels: Sequence[str],
    limit: int | None = None,
    task_ids: Sequence[str] | None = None,
) -> list[EvalTask]:
    """The evaluation tasks of a run, in trial order: registry order, or the order ``task_ids`` gives them in
    (as the official ``evaluate.py`` keeps its ``--tasks`` order). A list spanning scenes is run, although the
    official ``evaluate.py`` refuses it (:func:`parse_task_list`); run.json's ``official_rerun`` says so."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit: must be >= 1, got {limit}")
    if task_ids:
        return _given(registry, scenes, levels, limit, task_ids)
    selected: list[EvalTask] = []
    for scene in SCENES:
        if scene not in scenes:
            continue
        kept: dict[str, int] = {}  # level -> tasks kept so far in this scene
        for task in registry.eval_tasks(scene):
            if task.level in levels and (limit is None or kept.get(task.level, 0) < limit):
                kept[task.level] = kept.get(task.level, 0) + 1
                selected.append(task)
    if not selected:
        raise ValueError("no task matches the selection (--scene/--levels/--tasks)")
    return selected


def _given(registry: Registry, scenes: Sequence[str], levels: Sequence[str], limit: int | None,
           task_ids: Sequence[str]) -> list[EvalTask]:
    tasks = [registry.eval_task(tid) for tid in task_ids]  # raises UnknownTaskError with suggestions
    selected: list[EvalTask] = []
    kept: dict[str, int] = {}  # level -> tasks kept so far
    for task in dict.fromkeys(tasks):
        if task.scene in scenes and task.level in levels and (limit is None or kept.get(task.level, 0) < limit):
            kept[task.level] = kept.get(task.level, 0) + 1
            selected.append(task)
    if not selected:
        raise ValueError("no task matches the selection (--scene/--levels/--tasks)")
    return selected


def parse_task_list(value: str | None) -> tuple[str, ...]:
    """``--tasks a,b``, in the order given (the official ``evaluate.py`` keeps it too); an id given twice is
    refused (an unknown id is refused with the registry's suggestions when the tasks are selected).

    A list spanning scenes is run, although the official ``evaluate.py`` refuses it (it reads the list
    against one scene's tasks): a few tasks of several scenes is how smoke runs and this package's tests
    are made, and nothing in the scoring depends on it; its official rerun is one scene at a time."""
    if not value:
        return ()
    ids = tuple(t.strip() for t in value.split(",") if t.strip())
    twice = sorted({tid for tid in ids if ids.count(tid) > 1})
    if twice:
        raise ValueError(f"--tasks: {', '.join(twice)} given twice")
    return ids


def trial_keys(tasks: Sequence[EvalTask], rounds: int, by_round: bool = False) -> list[TrialKey]:
    """Every (task, round) of the run in order; rounds run 1..``rounds``. Task by task (a rig's operator sets
    a layout up once for its rounds), or ``by_round``: round 1 of every task, then round 2, …, so that a
    simulated run stopped part-way holds whole rounds of every selected task (the protocol at fewer rounds)
    instead of all rounds of the first scene's tasks. A trial's seed is its task's and round's either way."""
    if not 1 <= rounds <= 10:
        raise ValueError(f"--rounds: must be between 1 and 10 (seeds exist for 10 rounds), got {rounds}")
    if by_round:
        return [TrialKey(t.task_id, r, t.seed(r)) for r in range(1, rounds + 1) for t in tasks]
    return [TrialKey(t.task_id, r, t.seed(r)) for t in tasks for r in range(1, rounds + 1)]


__all__ = ["TrialKey", "UnknownTaskError", "limit_differs_from_official", "parse_levels", "parse_scenes",
           "parse_task_list", "select_tasks", "trial_keys"]
