"""Reports of a run: the scene x level IS/ES/CR table (the paper's Table 1) and a comparison plot.

Published figures come from the benchmark's copy of RoboFollow's ``results.csv`` (percentages);
model ids (``PI05``, ``PI0``, ...) are mapped to the CSV's display names through ``results.json``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from robofollow_ros.benchmark import LEVELS, SCENES
from robofollow_ros.benchmark.loader import DATA_DIR
from robofollow_ros.rundir.atomic import read_json

METRICS = ("IS", "ES", "CR")
#: Summary field behind each Table 1 metric (scores and rates are 0-1; the table shows percent).
METRIC_FIELDS = {"IS": "mean_intent_score", "ES": "mean_exec_score", "CR": "completion_rate"}
SCENE_LABEL = {s: f"S{i}" for i, s in enumerate(SCENES, start=1)}

#: Cells of a table: {scene label: {level: {metric: percent}}}.
Table = dict[str, dict[str, dict[str, float]]]

#: The mark of a run whose policy was given privileged state (object poses, the task id).
PRIVILEGED_MARK = "privileged — not comparable with published results"
#: The published protocol: every task, this many rounds, these budgets (evaluate.py's defaults).
PROTOCOL: dict[str, Any] = {"rounds": 10, "max_steps": 10, "actions_per_step": 50, "stepper": "robotwin-topp"}


def is_privileged(run: Mapping[str, Any] | None) -> bool:
    """True when run.json says its policy was given privileged state: ``privileged`` (the flag, or the built
    policy's own declaration: ``privileged_source``), or ``arguments.privileged``. A run.json written before
    ``privileged_source`` existed recorded the flag alone, so there a built-in that reads it in process
    (``oracle``, ``blind``: ``spec.PRIVILEGED_BUILTINS``) counts too."""
    from robofollow_ros.policy.spec import PRIVILEGED_BUILTINS

    if not run:
        return False
    arguments = run.get("arguments")
    policy = run.get("policy")
    older = "privileged_source" not in run
    builtin = older and isinstance(policy, Mapping) and policy.get("spec") in PRIVILEGED_BUILTINS
    return (bool(run.get("privileged")) or builtin
            or (isinstance(arguments, Mapping) and bool(arguments.get("privileged"))))


def expected_true_trials(run: Mapping[str, Any]) -> Any:
    """run.json's planned trials of the true instructions: ``expected_trials`` counts a run's instruction controls
    (``eval --controls``) too, which every view but ``--controls`` leaves out; then every selected task × rounds."""
    expected = run.get("expected_trials")
    arguments = run.get("arguments")
    if not (isinstance(arguments, Mapping) and arguments.get("controls")):
        return expected
    selected, rounds = run.get("selected_tasks"), arguments.get("rounds")
    if isinstance(selected, list) and isinstance(rounds, int) and not isinstance(rounds, bool):
        return len(selected) * rounds
    return expected


def protocol_differences(run: Mapping[str, Any] | None, trials: Sequence[Mapping[str, Any]]) -> list[str]:
    """How a run differs from the protocol the published figures ran, one phrase each; [] for a full run.

    From its trials: which tasks and rounds it holds, against every task of the registry and 10 rounds
    (within the scenes and levels it covers, and overall); from run.json: the step budget, rows per
    call and stepper, an unfinished run, and a resume on other code."""
    from robofollow_ros.benchmark import default_registry

    registry = default_registry()
    out: list[str] = []
    tasks = {t["task"] for t in trials}
    rounds: dict[str, set[int]] = {t["task"]: set() for t in trials}
    for t in trials:
        rounds[t["task"]].add(int(t.get("round") or 0))
    cells = {(t.get("scene"), t.get("level_tag")) for t in trials}
    in_cells = [e.task_id for e in registry.eval_tasks() if (e.scene, e.level) in cells]
    everything = registry.eval_tasks()
    most = max((len(r) for r in rounds.values()), default=0)
    least = min((len(r) for r in rounds.values()), default=0)
    if len(tasks) < len(in_cells) or least < PROTOCOL["rounds"]:
        per_task = f"{least}" if least == most else f"{least}-{most}"
        out.append(f"a subset of the protocol: {len(tasks)} of the {len(in_cells)} tasks in its scene/level cells "
                   f"({len(everything)} in all), {per_task} of {PROTOCOL['rounds']} rounds per task")
    if run:
        for key in ("max_steps", "actions_per_step", "stepper"):
            value = run.get(key)
            if value is not None and value != PROTOCOL[key]:
                out.append(f"{key} {value} (the protocol: {PROTOCOL[key]})")
        expected = expected_true_trials(run)
        if run.get("status") != "complete" or (isinstance(expected, int) and len(trials) < expected):
            out.append(f"{run.get('status')}: {len(trials)} of {expected} planned trials recorded")
        changed = sorted({key for entry in run.get("resumes") or [] for key in (entry.get("changed") or {})})
        if changed:
            out.append(f"resumed on other code than it started with ({', '.join(changed)} differ; run.json's resumes)")
    return out


TrialT = TypeVar("TrialT", bound=Mapping[str, Any])


def up_to_round(trials: Sequence[TrialT], rounds: int | None) -> list[TrialT]:
    """The trials of rounds 1..``rounds`` (``report --rounds``): a run stopped part-way, which ``eval`` runs
    round by round, reported on its whole rounds; every trial when ``rounds`` is None."""
    return list(trials) if rounds is None else [t for t in trials if int(t.get("round") or 0) <= rounds]


def run_table(summary: Mapping[str, Any]) -> Table:
    """Table 1 cells of a run from its summary groups; absent groups are left out."""
    out: Table = {}
    for scene in SCENES:
        for level in LEVELS:
            group = summary["groups"].get(f"{scene}/{level}")
            if group:
                cell = {m: 100.0 * float(group[f]) for m, f in METRIC_FIELDS.items()}
                out.setdefault(SCENE_LABEL[scene], {})[level] = cell
    return out


def published_models(data_dir: Path = DATA_DIR) -> dict[str, str]:
    """Model id -> display name of every published model."""
    data = read_json(data_dir / "results.json")
    return {m["id"]: m["name"] for m in data["models"]}


def published_table(model: str, data_dir: Path = DATA_DIR) -> Table:
    """Cells of one published model (id or display name, case-insensitive) from results.csv."""
    ids = published_models(data_dir)
    wanted = {model.lower()}
    for mid, name in ids.items():
        if model.lower() in (mid.lower(), name.lower()):
            wanted = {mid.lower(), name.lower()}
            break
    else:
        raise KeyError(f"--compare: unknown model {model!r}; known ids: {', '.join(ids)}")
    out: Table = {}
    with open(data_dir / "results.csv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["model"].lower() in wanted:
                out.setdefault(row["scene"], {})[row["level"]] = {
                    "IS": float(row["intent_score"]), "ES": float(row["execution_score"]),
                    "CR": float(row["completion_rate"])}
    return out


def with_mean(table: Table) -> Table:
    """Adds the unweighted mean over the scenes present at each level (the paper's "mean" row)."""
    out = dict(table)
    mean: dict[str, dict[str, float]] = {}
    for level in LEVELS:
        cells = [table[s][level] for s in table if level in table[s]]
        if cells:
            mean[level] = {m: sum(c[m] for c in cells) / len(cells) for m in METRICS}
    if mean:
        out["mean"] = mean
    return out


def format_table(table: Table, title: str) -> str:
    """Plain-text Table 1: one row per scene (plus mean), IS/ES/CR in percent per level."""
    table = with_mean(table)
    head = f"{'scene':<8}" + "".join(f"{level + ' IS/ES/CR':>22}" for level in LEVELS)
    lines = [title, head, "-" * len(head)]
    for scene, cells in table.items():
        parts = []
        for level in LEVELS:
            c = cells.get(level)
            parts.append(f"{c['IS']:.1f}/{c['ES']:.1f}/{c['CR']:.1f}" if c else "-")
        lines.append(f"{scene:<8}" + "".join(f"{p:>22}" for p in parts))
    return "\n".join(lines)


def comparison_figure(run: Table, models: Mapping[str, Table], run_label: str = "this run",
                      stats: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                      warnings: Sequence[str] = ()) -> Any:
    """The figure of :func:`plot_comparison` (returned open, for the caller to save or inspect).

    A cell scored 0 gets a marker at 0 in its series' colour with a "0" label (a bar of height 0 is
    invisible, and "scored 0" must not look like "not run"); a cell the run does not hold is labelled
    "n/a". With ``stats`` (``report_views.cell_stats``) the run's bars carry their 95 % intervals and the
    cell labels their n; ``warnings`` are printed under the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [(s, level) for s in ("S1", "S2", "S3", "S4") for level in LEVELS]
    series = {run_label: run, **models}
    width = 0.8 / max(1, len(series))
    fig, axes = plt.subplots(len(METRICS), 1, figsize=(14, 9 + 0.25 * len(warnings)), sharex=True)
    for ax, metric in zip(axes, METRICS, strict=True):
        for k, (label, table) in enumerate(series.items()):
            colour = f"C{k % 10}"
            xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(cells))]
            present = [metric in table.get(s, {}).get(level, {}) for s, level in cells]
            ys = [table.get(s, {}).get(level, {}).get(metric, 0.0) for s, level in cells]
            ax.bar(xs, ys, width=width, label=label, color=colour)
            if k == 0 and stats:
                cis = [stats.get(s, {}).get(level, {}).get(f"{metric}_ci95") for s, level in cells]
                shown = [i for i, ci in enumerate(cis) if ci is not None and present[i]]
                ax.errorbar([xs[i] for i in shown], [ys[i] for i in shown], fmt="none", ecolor="black", capsize=2,
                            elinewidth=0.8,  # CR is task-macro, its interval Wilson's on trials: may not hold it
                            yerr=[[max(0.0, ys[i] - cis[i][0]) for i in shown],  # type: ignore[index]
                                  [max(0.0, cis[i][1] - ys[i]) for i in shown]])  # type: ignore[index]
            for x, y, here in zip(xs, ys, present, strict=True):
                if here and y == 0.0:
                    ax.plot([x], [0.0], marker="D", markersize=6, color=colour, markeredgecolor="black",
                            linestyle="none", gid=f"zero:{label}", zorder=5)
                    ax.text(x, 2.5, "0", ha="center", va="bottom", fontsize=6)
                elif not here and k == 0:
                    ax.text(x, 2.5, "n/a", ha="center", va="bottom", fontsize=6, color="grey", rotation=90)
        ax.set_ylabel(f"{metric} (%)")
        ax.set_ylim(-5, 105)
        ax.grid(axis="y", alpha=0.3)
    labels = []
    for s, level in cells:
        n = (stats or {}).get(s, {}).get(level, {}).get("n")
        labels.append(f"{s}\n{level}" + (f"\nn={n}" if n is not None else ""))
    axes[-1].set_xticks(range(len(cells)), labels)
    axes[0].legend(ncols=min(6, len(series)), loc="lower left", bbox_to_anchor=(0.0, 1.02), fontsize="small")
    title = "RoboFollow: intent (IS), execution (ES) and completion (CR) by scene and level"
    if stats:
        title += ("\nrun: n trials per cell, 95 % intervals (IS/ES bootstrap over tasks, or the Wilson bound where "
                  "every score is equal; CR Wilson); published: no intervals")
    fig.suptitle(title)
    for i, warning in enumerate(warnings):
        fig.text(0.01, 0.005 + 0.022 * i, f"warning: {warning}", fontsize=8, color="darkred")
    fig.tight_layout(rect=(0, 0.022 * len(warnings), 1, 1))
    return fig


def plot_comparison(path: str | Path, run: Table, models: Mapping[str, Table], run_label: str = "this run",
                    stats: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                    warnings: Sequence[str] = ()) -> None:
    """PNG with one panel per metric; bars per scene/level cell for the run and each model."""
    import matplotlib.pyplot as plt

    fig = comparison_figure(run, models, run_label, stats, warnings)
    fig.savefig(path, dpi=100)
    plt.close(fig)
