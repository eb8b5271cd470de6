"""The trials SPEC of the trial manager and ``robofollow bringup --trials``: which tasks × rounds to run.

One line, ``key=value`` words separated by spaces or ``;``::

    scene=scene1,scene2 levels=L0 limit=2 rounds=1
    tasks=scene1_L0_pick_red_sphere rounds=3

Keys: ``scene`` (``all`` or a comma list), ``levels``, ``limit`` (first K tasks of each scene and level),
``tasks`` (comma list of ids), ``rounds`` (1..10). The order is the headless evaluator's
(``evaluation.selection``), so a ROS run and ``robofollow eval`` with the same selection run the
same trials with the same seeds.

``robofollow bringup`` and the launch files take ``robofollow eval``'s selection flags instead
(``--scene --levels --limit --tasks --rounds``); :func:`compose_trials` turns them into this SPEC
with eval's meaning: once any of scene/levels/limit/tasks is given, the ones not given take eval's
defaults (all scenes, all levels, no limit, no task list) rather than the profile's; ``rounds``
not given stays the profile's.
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


def spec_values(spec: str) -> dict[str, str]:
    """The ``key=value`` words of a SPEC."""
    values: dict[str, str] = {}
    for word in (w for w in re.split(r"[;\s]+", spec.strip()) if w):
        key, sep, value = word.partition("=")
        if not sep or key not in KEYS or not value:
            raise TrialSpecError(f"trials: {word!r} is not key=value with a key of {', '.join(KEYS)}")
        values[key] = value
    return values


def compose_trials(base: str, scene: str | None = None, levels: str | None = None, limit: int | None = None,
                   tasks: str | None = None, rounds: int | None = None) -> str:
    """The SPEC for eval-style selection flags on top of a profile's SPEC (see the module docstring)."""
    values = spec_values(base)
    given = {"scene": scene, "levels": levels, "limit": limit, "tasks": tasks}
    if any(v is not None for v in given.values()):
        values = {k: v for k, v in values.items() if k == "rounds"}
        values.update({k: str(v).replace(" ", "") for k, v in given.items() if v is not None})
    if rounds is not None:
        values["rounds"] = str(rounds)
    return " ".join(f"{k}={v}" for k, v in values.items())


def parse_trials(spec: str, registry: Registry) -> TrialPlan:
    values = spec_values(spec)
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
