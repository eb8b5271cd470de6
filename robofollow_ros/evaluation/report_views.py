"""The views of ``robofollow report`` that a reviewer asks for: sample sizes and 95 % intervals per cell,
each task over its rounds, each failed trial with its stage, reason and recordings, and CSV of all of it.

The intervals all come from :mod:`robofollow_ros.evaluation.intervals` (Wilson for completion, a seeded
bootstrap over tasks for IS/ES, never a point for n > 0; its docstring says why); each cell records the
method that gave each interval (``IS_method`` ...), and the tables print ``intervals.FOOTNOTE``. The
paper's CR is task-macro (mean over tasks of each task's completed fraction); the ``mean`` row is the
unweighted mean over scenes, its IS/ES intervals resampling within each scene, its CR interval Wilson's
on the completed trials over n summed (the same rate as the macro CR when every task has the same rounds,
the protocol). Everything here is in percent, as Table 1 is.

A trial that could not be executed (``policy_error`` or ``fault``) counts as a zero in every cell, as
the official evaluator counts an error row; a run in which no trial was executed is not reported.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import LEVELS, SCENES
from robofollow_ros.evaluation.intervals import FOOTNOTE, WILSON_BOUND, Interval, stratified_interval, wilson
from robofollow_ros.evaluation.report import METRICS, PROTOCOL, SCENE_LABEL, Table, with_mean
from robofollow_ros.evaluation.text_table import text_table
from robofollow_ros.rundir.layout import RECORDINGS_DIR, VIDEOS_DIR
from robofollow_ros.scoring.summary import summarize_group

#: A stage score this close below its maximum is full (the scores are plain float sums).
_FULL = 1e-9

#: Per-cell statistics: {scene label or "mean": {level: {"n", "IS", "IS_ci95", ..., "CR_k"}}}.
CellStats = dict[str, dict[str, dict[str, Any]]]


def could_not_execute(entry: Mapping[str, Any]) -> str | None:
    """Why a trial was not executed (its policy failed, or a fault ended it); None when it ran."""
    if entry.get("fault"):
        return f"fault {entry['fault']}: {entry.get('fault_reason', '')}".rstrip(": ")
    if entry.get("policy_error"):
        return f"policy_error: {str(entry['policy_error']).splitlines()[0]}"
    return None


def executed_count(trials: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for t in trials if could_not_execute(t) is None)


def trial_name(entry: Mapping[str, Any]) -> str:
    """The trial's id, as its recordings are named: ``<task>_r<round>_s<seed>``, and ``_<control>`` after it for an
    instruction control's trial (``selection.TrialKey.trial_id``: its true trial's id is its ``partner``)."""
    name = f"{entry['task']}_r{entry.get('round')}_s{entry.get('seed')}"
    return f"{name}_{entry['control']}" if entry.get("control") else name


def _put(out: dict[str, Any], metric: str, interval: Interval) -> None:
    """``<metric>_ci95`` in percent and ``<metric>_method``, the method that gave it."""
    out[f"{metric}_ci95"] = [100.0 * interval.lo, 100.0 * interval.hi]
    out[f"{metric}_method"] = interval.method


def _metric_values(trials: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    return {"IS": [float(t["intent_score"]) for t in trials], "ES": [float(t["exec_score"]) for t in trials],
            "CR": [1.0 if t["completion_ok"] else 0.0 for t in trials]}


def group_stats(trials: Sequence[Mapping[str, Any]], n_resamples: int, seed: int) -> dict[str, Any]:
    """n, the three Table 1 metrics (percent) and their 95 % intervals for one group of trials."""
    summary = summarize_group(list(trials))
    values = _metric_values(trials)
    tasks = [str(t["task"]) for t in trials]
    out: dict[str, Any] = {"n": len(trials), "tasks": summary["task_count"], "executed": executed_count(trials),
                           "IS": 100.0 * summary["mean_intent_score"], "ES": 100.0 * summary["mean_exec_score"],
                           "CR": 100.0 * summary["completion_rate"], "CR_k": int(sum(values["CR"]))}
    for k, metric in enumerate(("IS", "ES")):
        _put(out, metric, stratified_interval([(values[metric], tasks)], n_resamples, seed + k))
    _put(out, "CR", wilson(out["CR_k"], len(trials)))
    return out


def cell_stats(trials: Sequence[Mapping[str, Any]], n_resamples: int = 10_000, seed: int = 0) -> CellStats:
    """Statistics of every scene × level cell present, and the ``mean`` row over the scenes at each level."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for t in trials:
        groups[(t["scene"], t["level_tag"])].append(t)
    out: CellStats = {}
    for scene in SCENES:
        for level in LEVELS:
            if groups.get((scene, level)):
                out.setdefault(SCENE_LABEL[scene], {})[level] = group_stats(groups[(scene, level)], n_resamples, seed)
    mean: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        cells = [(s, out[SCENE_LABEL[s]][level]) for s in SCENES if level in out.get(SCENE_LABEL[s], {})]
        if not cells:
            continue
        if len(cells) == 1:  # the mean of one scene is that scene: the same figures and intervals
            mean[level] = {**cells[0][1], "scenes": 1}
            continue
        row: dict[str, Any] = {"n": sum(c["n"] for _, c in cells), "tasks": sum(c["tasks"] for _, c in cells),
                               "executed": sum(c["executed"] for _, c in cells), "scenes": len(cells),
                               "CR_k": sum(c["CR_k"] for _, c in cells)}
        for k, metric in enumerate(METRICS):
            row[metric] = sum(c[metric] for _, c in cells) / len(cells)
            if metric == "CR":
                _put(row, metric, wilson(row["CR_k"], row["n"]))
                continue
            per_scene = [(_metric_values(groups[(s, level)])[metric], [str(t["task"]) for t in groups[(s, level)]])
                         for s, _ in cells]
            _put(row, metric, stratified_interval(per_scene, n_resamples, seed + 2 + k))
        mean[level] = row
    if mean:
        out["mean"] = mean
    return out


def published_cells(table: Table) -> dict[str, dict[str, dict[str, Any]]]:
    """A published model's cells with the protocol's n: every task of the cell, 10 rounds (no intervals
    were published); the mean row's n is the sum over scenes."""
    from robofollow_ros.benchmark import default_registry

    counts: dict[tuple[str, str], int] = defaultdict(int)
    for task in default_registry().eval_tasks():
        counts[(SCENE_LABEL[task.scene], task.level)] += int(PROTOCOL["rounds"])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for scene, levels in with_mean(table).items():
        for level, cell in levels.items():
            n = (sum(counts[(s, level)] for s in table if level in table[s]) if scene == "mean"
                 else counts[(scene, level)])
            out.setdefault(scene, {})[level] = {**cell, "n": n}
    return out


def _interval(ci: Sequence[float], method: str | None = None) -> str:
    """``[lo, hi]`` in percent; marked "*" where the bootstrap collapsed and the Wilson bound stands in."""
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" + ("*" if method == WILSON_BOUND else "")


def format_grid(title: str, cells: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Table 1's layout (a row per scene, IS/ES/CR per level) with each cell's n."""
    rows = []
    for scene, levels in cells.items():
        row = [scene]
        for level in LEVELS:
            c = levels.get(level)
            row.append(f"{c['IS']:.1f}/{c['ES']:.1f}/{c['CR']:.1f} n={c['n']}" if c else "-")
        rows.append(row)
    return title + "\n" + text_table(["scene", *(f"{level} IS/ES/CR" for level in LEVELS)], rows,
                                      [False, *(True for _ in LEVELS)])


def format_intervals(stats: CellStats, n_resamples: int) -> str:
    """Every cell with n and the 95 % interval of each metric; the footnote names the methods."""
    rows = []
    for scene, levels in stats.items():
        for level, c in levels.items():
            rows.append([scene, level, str(c["n"]), f"{c['IS']:.1f}", _interval(c["IS_ci95"], c.get("IS_method")),
                         f"{c['ES']:.1f}", _interval(c["ES_ci95"], c.get("ES_method")), f"{c['CR']:.1f}",
                         f"{c['CR_k']}/{c['n']}", _interval(c["CR_ci95"])])
    header = ["scene", "level", "n", "IS", "IS 95% CI", "ES", "ES 95% CI", "CR", "completed", "CR 95% CI"]
    note = f"{FOOTNOTE}; {n_resamples} resamples; mean row: IS, ES resampled within each scene, CR Wilson with n summed"
    return text_table(header, rows, [False, False, True, True, False, True, False, True, True, False]) + "\n" + note


def format_run_summary(trials: Sequence[Mapping[str, Any]], title: str, n_resamples: int = 2000,
                       seed: int = 0) -> str:
    """The closing table of ``eval`` and ``bringup``: Table 1's grid with n, then every cell's intervals."""
    if not trials:
        return f"{title}: no trial recorded"
    stats = cell_stats(trials, n_resamples, seed)
    return format_grid(f"{title} (IS/ES/CR, %)", stats) + "\n" + format_intervals(stats, n_resamples)


def task_stats(trials: Sequence[Mapping[str, Any]], n_resamples: int = 10_000, seed: int = 0) -> list[dict[str, Any]]:
    """Each task over its rounds (in the run's order): n, IS/ES/CR (percent) with 95 % intervals."""
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for t in trials:
        by_task[t["task"]].append(t)
    out = []
    for task, group in by_task.items():
        stats = group_stats(group, n_resamples, seed)
        out.append({"task": task, "scene": SCENE_LABEL.get(group[0]["scene"], group[0]["scene"]),
                    "level": group[0]["level_tag"], "rounds": sorted(int(t.get("round") or 0) for t in group),
                    **{k: v for k, v in stats.items() if k != "tasks"}})
    return out


def format_tasks(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ["task", "scene", "level", "n", "IS", "IS 95% CI", "ES", "ES 95% CI", "completed", "CR 95% CI"]
    body = [[r["task"], r["scene"], r["level"], str(r["n"]), f"{r['IS']:.1f}",
             _interval(r["IS_ci95"], r.get("IS_method")), f"{r['ES']:.1f}",
             _interval(r["ES_ci95"], r.get("ES_method")), f"{r['CR_k']}/{r['n']}", _interval(r["CR_ci95"])]
            for r in rows]
    return ("per task over its rounds (%)\n"
            + text_table(header, body, [False, False, False, True, True, False, True, False, True, False])
            + "\n" + FOOTNOTE)


def failed_stage(entry: Mapping[str, Any]) -> tuple[str, str]:
    """(stage, reason) of the first stage not scored full, intent before execution; ("-", exec_msg) if none."""
    for phase in entry.get("phases") or []:
        top = float(phase.get("max_score", 0.0))
        for part in ("intent", "exec"):
            if float(phase.get(f"{part}_score", 0.0)) < top - _FULL:
                return f"{phase.get('phase')} ({part})", str(phase.get(f"{part}_reason", ""))
    return "-", str(entry.get("exec_msg") or entry.get("intent_msg") or "")


def _existing(run_dir: Path, relative: str | None) -> str | None:
    return str(run_dir / relative) if relative and (run_dir / relative).is_file() else None


def failures(trials: Sequence[Mapping[str, Any]], run_dir: Path) -> list[dict[str, Any]]:
    """Every trial that did not complete or was not executed: its stage, reason and recordings (when present)."""
    out = []
    for t in trials:
        not_run = could_not_execute(t)
        if t.get("completion_ok") and not_run is None:
            continue
        name = trial_name(t)
        stage, reason = failed_stage(t)
        video = _existing(run_dir, f"{VIDEOS_DIR}/{name}.mp4") or _existing(run_dir, t.get("video"))
        out.append({"trial": name, "task": t["task"], "scene": SCENE_LABEL.get(t["scene"], t["scene"]),
                    "level": t["level_tag"], "round": t.get("round"), "seed": t.get("seed"),
                    "IS": 100.0 * float(t["intent_score"]), "ES": 100.0 * float(t["exec_score"]),
                    "stage": "not executed" if not_run else stage, "reason": not_run or reason,
                    "mcap": _existing(run_dir, f"{RECORDINGS_DIR}/{name}.mcap"), "video": video})
    return out


def format_failures(rows: Sequence[Mapping[str, Any]], total: int) -> str:
    lines = [f"failed trials: {len(rows)} of {total} (not completed, or not executed)"]
    for r in rows:
        lines.append(f"{r['trial']}  {r['scene']}/{r['level']}  IS {r['IS']:.1f} ES {r['ES']:.1f}  "
                     f"stage: {r['stage']}  reason: {r['reason']}")
        for key in ("mcap", "video"):
            if r[key]:
                lines.append(f"    {key}: {r[key]}")
    return "\n".join(lines)


def trial_rows(trials: Sequence[Mapping[str, Any]], run_dir: Path) -> list[dict[str, Any]]:
    """One flat row per trial for CSV: identity, scores, verdicts, the failed stage and the recordings."""
    failed = {f["trial"]: f for f in failures(trials, run_dir)}
    rows = []
    for t in trials:
        name = trial_name(t)
        f = failed.get(name, {})
        rows.append({"trial": name, "task": t["task"], "scene": SCENE_LABEL.get(t["scene"], t["scene"]),
                     "level": t["level_tag"],
                     "round": t.get("round"), "seed": t.get("seed"), "intent_score": t["intent_score"],
                     "exec_score": t["exec_score"], "intent_ok": bool(t["intent_ok"]), "exec_ok": bool(t["exec_ok"]),
                     "completion_ok": bool(t["completion_ok"]), "executed": could_not_execute(t) is None,
                     "failed_stage": f.get("stage", ""), "reason": f.get("reason", ""),
                     "mcap": f.get("mcap") or _existing(run_dir, f"{RECORDINGS_DIR}/{name}.mcap") or "",
                     "video": f.get("video") or _existing(run_dir, f"{VIDEOS_DIR}/{name}.mp4") or ""})
    return rows


def _flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """Intervals as two columns (``IS_lo``, ``IS_hi``); lists of rounds joined by spaces."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key.endswith("_ci95"):
            out[f"{key[:-5]}_lo"], out[f"{key[:-5]}_hi"] = value
        elif isinstance(value, list):
            out[key] = " ".join(str(v) for v in value)
        else:
            out[key] = value
    return out


def _write(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        path.write_text("", encoding="utf-8")
        return
    fields = list(dict.fromkeys(key for row in rows for key in row))  # the mean row adds "scenes"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


def write_csv(out_dir: Path, trials: Sequence[Mapping[str, Any]], run_dir: Path, stats: CellStats,
              tasks: Sequence[Mapping[str, Any]]) -> list[Path]:
    """``trials.csv``, ``cells.csv`` (scene × level and mean, with n and intervals) and ``tasks.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = [_flat({"scene": scene, "level": level, **c})
             for scene, levels in stats.items() for level, c in levels.items()]
    files = {"trials.csv": trial_rows(trials, run_dir), "cells.csv": cells, "tasks.csv": [_flat(t) for t in tasks]}
    for name, rows in files.items():
        _write(out_dir / name, rows)
    return [out_dir / name for name in files]
