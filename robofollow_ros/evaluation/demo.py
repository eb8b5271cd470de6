"""The main job's headless form: the oracle beside the memorizer on a small built-in subset.

The memorizer maps an instruction to the nearest training instruction and replays that task's plan
for the training layout's nominal positions without looking at the scene. It should look strong at
L0 and collapse once the layout (L1) or the wording (L2) changes: the mirage the benchmark exposes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from robofollow_ros.benchmark import LEVELS, SCENES, Registry
from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.intervals import FOOTNOTE, WILSON_BOUND
from robofollow_ros.evaluation.report import Table, plot_comparison, run_table
from robofollow_ros.evaluation.report_views import CellStats, cell_stats
from robofollow_ros.evaluation.runner import EvalConfig, RunOutcome, run_evaluation
from robofollow_ros.evaluation.text_table import text_table
from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.layout import RESULTS_FILE

DEMO_POLICIES = ("oracle", "memorizer")
#: Tasks taken from the head of every (scene, level) group: 2 x 16 groups = 32 tasks, one round.
DEMO_TASKS_PER_GROUP = 2
#: Bootstrap resamples of the demo's IS intervals (seed 0).
DEMO_RESAMPLES = 2000


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
    #: Per policy, every cell's n and 95 % intervals (``report_views.cell_stats``).
    stats: dict[str, CellStats]


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
    stats = {p: cell_stats(read_json(r.run_dir / RESULTS_FILE), DEMO_RESAMPLES) for p, r in runs.items()}
    first, *rest = policies
    plot = output / "demo.png"
    plot_comparison(plot, tables[first], {p: tables[p] for p in rest}, run_label=first, stats=stats[first])
    return DemoOutcome(runs, tables, plot, stats)


def _ci(c: dict[str, Any], metric: str) -> str:
    lo, hi = c[f"{metric}_ci95"]
    return f"[{lo:.0f}, {hi:.0f}]" + ("*" if c.get(f"{metric}_method") == WILSON_BOUND else "")


def side_by_side(stats: dict[str, CellStats]) -> str:
    """One row per scene × level cell (then the mean rows); per policy IS/ES/CR in percent, n, the IS
    interval and the completed trials with their Wilson interval; the footnote names the methods."""
    names = list(stats)
    header = ["cell"]
    for n in names:
        header += [f"{n} IS/ES/CR", f"{n} IS 95% CI", f"{n} completed", f"{n} CR 95% CI"]
    rows = []
    for scene in [*sorted({s for st in stats.values() for s in st if s != "mean"}), "mean"]:
        for lv in LEVELS:
            if not any(lv in st.get(scene, {}) for st in stats.values()):
                continue
            row = [f"{scene}/{lv}"]
            for n in names:
                c = stats[n].get(scene, {}).get(lv)
                row += (["-"] * 4 if c is None else
                        [f"{c['IS']:.0f}/{c['ES']:.0f}/{c['CR']:.0f}", _ci(c, "IS"), f"{c['CR_k']}/{c['n']}",
                         _ci(c, "CR")])
            rows.append(row)
    title = f"IS/ES/CR (%) — {' vs '.join(names)}; n = trials per cell"
    note = f"{FOOTNOTE}; {DEMO_RESAMPLES} resamples; mean rows: unweighted over scenes, n summed"
    return title + "\n" + text_table(header, rows, [False, *([True] * (4 * len(names)))]) + "\n" + note
