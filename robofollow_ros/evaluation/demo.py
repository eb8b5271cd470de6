"""The main job's headless form: the oracle beside the memorizer on a small built-in subset.

The memorizer maps an instruction to the nearest training instruction and replays that task's plan
for the training layout's nominal positions without looking at the scene. It should look strong at
L0 and collapse once the layout (L1) or the wording (L2) changes: the mirage the benchmark exposes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from robofollow_ros.benchmark import LEVELS, SCENES, Registry
from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.report import METRICS, Table, plot_comparison, run_table, with_mean
from robofollow_ros.evaluation.runner import EvalConfig, RunOutcome, run_evaluation

DEMO_POLICIES = ("oracle", "memorizer")
#: Tasks taken from the head of every (scene, level) group: 2 x 16 groups = 32 tasks, one round.
DEMO_TASKS_PER_GROUP = 2


def demo_task_ids(registry: Registry, per_group: int = DEMO_TASKS_PER_GROUP) -> list[str]:
    """The first ``per_group`` tasks of every scene and level, in trial order."""
    if per_group < 1:
        raise ValueError(f"--per-group: must be >= 1, got {per_group}")
    return [t.task_id for s in SCENES for lv in LEVELS for t in registry.eval_tasks(s, lv)[:per_group]]


@dataclass
class DemoOutcome:
    runs: dict[str, RunOutcome]
    tables: dict[str, Table]
    plot: Path


def run_demo(output: Path, registry: Registry, policies: Sequence[str] = DEMO_POLICIES,
             per_group: int = DEMO_TASKS_PER_GROUP, workers: int = 1, stream: TextIO | None = None) -> DemoOutcome:
    """Evaluate each policy on the demo subset (no rendering) and plot them side by side."""
    tasks = tuple(demo_task_ids(registry, per_group))
    runs: dict[str, RunOutcome] = {}
    for policy in policies:
        config = EvalConfig(policy=policy, output=output / policy, tasks=tasks, rounds=1, render=False,
                            workers=workers, settings=EpisodeSettings())
        if stream is not None:
            stream.write(f"==> {policy}: {len(tasks)} tasks, 1 round, no rendering -> {config.output}\n")
        runs[policy] = run_evaluation(config, stream=stream)
    tables = {p: run_table(r.summary) for p, r in runs.items()}
    first, *rest = policies
    plot = output / "demo.png"
    plot_comparison(plot, tables[first], {p: tables[p] for p in rest}, run_label=first)
    return DemoOutcome(runs, tables, plot)


def side_by_side(tables: dict[str, Table]) -> str:
    """One row per scene (plus mean); per level, each policy's IS/ES/CR in percent."""
    names = list(tables)
    meaned = {n: with_mean(t) for n, t in tables.items()}
    width = max(16, max(len(n) for n in names) + 5)
    head = f"{'':<6}" + "".join(f"{lv + ' ' + n:>{width}}" for lv in LEVELS for n in names)
    lines = [f"IS/ES/CR (%) — {' vs '.join(names)}", head, "-" * len(head)]
    for scene in [*sorted({s for t in meaned.values() for s in t if s != "mean"}), "mean"]:
        cells = []
        for lv in LEVELS:
            for n in names:
                c = meaned[n].get(scene, {}).get(lv)
                cells.append("/".join(f"{c[m]:.0f}" for m in METRICS) if c else "-")
        lines.append(f"{scene:<6}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)
