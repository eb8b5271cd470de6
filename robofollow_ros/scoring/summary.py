"""Summary metrics per scene and level (``summary.json`` groups), with Wilson 95% intervals.

Groups are keyed ``"<scene>/<Lk>"`` (e.g. ``scene1/L0``). ``completion_rate`` is task-macro: the
mean over tasks of each task's success fraction, so a task with more trials does not weigh more.
Wilson intervals are given for the three per-trial binomial rates (intent_full_rate,
exec_full_rate, episode_micro_completion_rate); the task-macro rate is a mean of fractions, not a
binomial proportion, so it gets none.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054
#: Fields a trial entry needs for the summary.
TRIAL_FIELDS = ("scene", "level_tag", "task", "intent_score", "exec_score", "intent_ok", "exec_ok", "completion_ok")


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def group_key(trial: Mapping[str, Any]) -> str:
    return f"{trial['scene']}/{trial['level_tag']}"


def summarize_group(trials: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The metric fields of one group of trials."""
    n = len(trials)
    per_task: dict[str, list[bool]] = defaultdict(list)
    for t in trials:
        per_task[t["task"]].append(bool(t["completion_ok"]))
    intent_full = sum(bool(t["intent_ok"]) for t in trials)
    exec_full = sum(bool(t["exec_ok"]) for t in trials)
    completed = sum(bool(t["completion_ok"]) for t in trials)
    macro = sum(sum(v) / len(v) for v in per_task.values()) / len(per_task) if per_task else 0.0
    return {
        "episodes": n,
        "task_count": len(per_task),
        "mean_intent_score": sum(float(t["intent_score"]) for t in trials) / n if n else 0.0,
        "mean_exec_score": sum(float(t["exec_score"]) for t in trials) / n if n else 0.0,
        "intent_full_rate": intent_full / n if n else 0.0,
        "exec_full_rate": exec_full / n if n else 0.0,
        "completion_rate": macro,
        "task_macro_completion_rate": macro,
        "episode_micro_completion_rate": completed / n if n else 0.0,
        "intent_full_rate_ci95": list(wilson_interval(intent_full, n)),
        "exec_full_rate_ci95": list(wilson_interval(exec_full, n)),
        "episode_micro_completion_rate_ci95": list(wilson_interval(completed, n)),
    }


def summarize(trials: Iterable[Mapping[str, Any]], status: str = "complete") -> dict[str, Any]:
    """``{"status", "groups": {"<scene>/<Lk>": {...}}}``; groups sorted by scene then level."""
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for i, trial in enumerate(trials):
        missing = [f for f in TRIAL_FIELDS if f not in trial]
        if missing:
            raise ValueError(f"trial {i}: missing field(s) {', '.join(missing)}")
        grouped[group_key(trial)].append(trial)
    return {"status": status, "groups": {k: summarize_group(grouped[k]) for k in sorted(grouped)}}
