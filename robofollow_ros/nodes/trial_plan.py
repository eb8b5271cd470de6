"""The trials SPEC of the trial manager and ``robofollow bringup --trials``: which tasks × rounds to run.

One line, ``key=value`` words separated by spaces or ``;``::

    scene=scene1,scene2 levels=L0 limit=2 rounds=1
    tasks=scene1_L0_pick_red_sphere rounds=3

Keys: ``scene`` (``all`` or a comma list), ``levels``, ``limit`` (first K tasks per scene),
``tasks`` (comma list of ids), ``rounds`` (1..10). The order is the headless evaluator's
(``evaluation.selection``), so a ROS run and ``robofollow eval`` with the same selection run the
same trials with the same seeds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from robofollow_ros.benchmark import Registry, UnknownTaskError
from robofollow_ros.evaluation.selection import TrialKey, parse_levels, parse_scenes, select_tasks, trial_keys

KEYS = ("scene", "levels", "limit", "tasks", "rounds")


class TrialSpecError(ValueError):
    """The trials SPEC is malformed; the message names the word and the accepted keys."""


@dataclass(frozen=True)
class TrialPlan:
    keys: tuple[TrialKey, ...]
    selected_tasks: tuple[tuple[str, str], ...]  # (scene, task id) in order, for run.json

    def __len__(self) -> int:
        return len(self.keys)


def parse_trials(spec: str, registry: Registry) -> TrialPlan:
    words = [w for w in re.split(r"[;\s]+", spec.strip()) if w]
    values: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or key not in KEYS or not value:
            raise TrialSpecError(f"trials: {word!r} is not key=value with a key of {', '.join(KEYS)}")
        values[key] = value
    try:
        limit = int(values["limit"]) if "limit" in values else None
        rounds = int(values.get("rounds", "1"))
    except ValueError as exc:
        raise TrialSpecError(f"trials: limit and rounds must be integers ({exc})") from None
    task_ids = [t for t in values.get("tasks", "").split(",") if t]
    try:
        tasks = select_tasks(registry, parse_scenes(values.get("scene", "all")),
                             parse_levels(values.get("levels", "L0,L1,L2,L3")), limit, task_ids or None)
        keys = trial_keys(tasks, rounds)
    except (ValueError, UnknownTaskError) as exc:
        raise TrialSpecError(f"trials {spec!r}: {exc}") from None
    return TrialPlan(tuple(keys), tuple((t.scene, t.task_id) for t in tasks))
