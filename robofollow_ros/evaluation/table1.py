"""``report --table1 RUN...``: the paper's Table 1 with this package's runs as rows beside the published models.

The layout is the paper's (``robofollow-spec.md`` §h): a row per model and scene (S1-S4, then the mean over
scenes), the model's family beside it, and IS/ES/CR in percent per level L0-L3. A run's rows come first;
each run cell carries ``n=k/N`` (trials run against the full protocol's N = tasks of the cell x 10 rounds,
the n every published figure stands on) and, on the row under it, the 95 % intervals of
:mod:`robofollow_ros.evaluation.intervals` (the published figures came without any). A run's ``marks``
say why its row must not be read as a published one: ``privileged`` (its policy saw object poses and the
task id), ``subset`` (fewer tasks or rounds than the protocol), ``rig <name>`` (not the built-in twin of the
protocol's rig), ``budget`` (another step budget, rows per call or stepper), ``mean of S1,S2`` (a mean row
over fewer than the four scenes the published mean averages).

The same rows are written as text (:func:`format_table1`), a PNG of that table (:func:`plot_table1`) and a
tidy CSV, one line per (row, level) with n, the protocol's n and each interval (:func:`write_table1_csv`).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import LEVELS
from robofollow_ros.evaluation.comparability import traits
from robofollow_ros.evaluation.intervals import FOOTNOTE, WILSON_BOUND
from robofollow_ros.evaluation.report import METRICS, PROTOCOL, SCENE_LABEL, protocol_differences
from robofollow_ros.evaluation.text_table import text_table

SCENE_ROWS = ("S1", "S2", "S3", "S4", "mean")
#: Published rows' family when results.json gives none; a run's family column.
RUN_FAMILY = "this package"


@dataclass
class Table1Row:
    """One scene (or mean) row of one model or run: cells per level (percent, n, intervals) and marks."""

    model: str
    family: str
    scene: str
    cells: dict[str, dict[str, Any]]
    marks: list[str] = field(default_factory=list)
    run: bool = False


def protocol_n() -> dict[str, dict[str, int]]:
    """n of the full protocol per scene label and level (every task of the cell x 10 rounds; mean: summed)."""
    from robofollow_ros.benchmark import default_registry

    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for task in default_registry().eval_tasks():
        out[SCENE_LABEL[task.scene]][task.level] += int(PROTOCOL["rounds"])
        out["mean"][task.level] += int(PROTOCOL["rounds"])
    return {s: dict(levels) for s, levels in out.items()}


def run_marks(name: str, run: Mapping[str, Any] | None, trials: Sequence[Mapping[str, Any]]) -> list[str]:
    """The marks of a run's rows: privileged, subset, rig <name> (not the built-in rig), budget."""
    from robofollow_ros.robot.rig_description import BUILT_IN_RIG

    t = traits(name, run, trials)
    marks = list(t.tags)
    if t.rig is not None and t.rig != BUILT_IN_RIG:
        marks.append(f"rig {t.rig}")
    budget = ("max_steps", "actions_per_step", "stepper")
    if any(d.startswith(budget) for d in protocol_differences(run, trials)):
        marks.append("budget")
    return marks


def run_rows(name: str, family: str, stats: Mapping[str, Mapping[str, Mapping[str, Any]]],
             marks: Sequence[str], full: Mapping[str, Mapping[str, int]]) -> list[Table1Row]:
    """A run's five rows from ``report_views.cell_stats``: its cells with ``protocol_n`` beside n."""
    rows = []
    present = [s for s in SCENE_ROWS[:-1] if s in stats]
    for scene in SCENE_ROWS:
        cells = {level: {**c, "protocol_n": full.get(scene, {}).get(level)}
                 for level, c in stats.get(scene, {}).items()}
        row_marks = list(marks)
        if scene == "mean" and cells and len(present) < 4:
            row_marks.append("mean of " + ",".join(present))
        rows.append(Table1Row(name, family, scene, cells, row_marks, run=True))
    return rows


def published_rows(models: Sequence[str] | None, full: Mapping[str, Mapping[str, int]]) -> list[Table1Row]:
    """The published models' rows in results.json's order (``models``: ids or names to keep; None: all)."""
    from robofollow_ros.benchmark.loader import DATA_DIR
    from robofollow_ros.rundir.atomic import read_json

    data = read_json(DATA_DIR / "results.json")
    known = {m["id"]: m for m in data["models"]}
    chosen = list(data["models"])
    if models:
        chosen = []
        for wanted in models:
            match = next((m for m in data["models"] if wanted.lower() in (m["id"].lower(), m["name"].lower())), None)
            if match is None:
                raise KeyError(f"--compare: unknown model {wanted!r}; known ids: {', '.join(known)}")
            chosen.append(match)
    rows = []
    for m in chosen:
        for scene in SCENE_ROWS:
            values = m["mean"] if scene == "mean" else m["scenes"][scene]
            cells = {level: {**{k: float(v[k]) for k in METRICS}, "n": full.get(scene, {}).get(level),
                             "protocol_n": full.get(scene, {}).get(level)}
                     for level, v in zip(LEVELS, values, strict=True)}
            rows.append(Table1Row(m["name"], m.get("family") or "", scene, cells))
    return rows


def _values(cell: Mapping[str, Any] | None, run: bool) -> str:
    if not cell:
        return "-"
    text = "/".join(f"{cell[m]:.1f}" for m in METRICS)
    return f"{text} n={cell['n']}/{cell['protocol_n']}" if run else text


def _intervals(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return ""
    return "/".join(f"{cell[f'{m}_ci95'][0]:.1f}-{cell[f'{m}_ci95'][1]:.1f}"
                    + ("*" if cell.get(f"{m}_method") == WILSON_BOUND else "") for m in METRICS)


HEADER = ["model", "family", "scene", "marks", *(f"{level} IS/ES/CR" for level in LEVELS)]


def table_cells(rows: Sequence[Table1Row]) -> list[list[str]]:
    """The text of every line of the table: a run's row, then its intervals' row ("95% CI")."""
    out = []
    for row in rows:
        out.append([row.model, row.family, row.scene, ", ".join(row.marks),
                    *(_values(row.cells.get(level), row.run) for level in LEVELS)])
        if row.run and row.cells:
            out.append(["", "", "", "95% CI", *(_intervals(row.cells.get(level)) for level in LEVELS)])
    return out


def footnote(rows: Sequence[Table1Row]) -> str:
    return ("IS/ES/CR in %; a run's n=k/N: k trials run of the N the full protocol runs in that cell (every task, "
            f"{PROTOCOL['rounds']} rounds), the N every published figure stands on; published: no intervals "
            f"published. {FOOTNOTE}")


def format_table1(rows: Sequence[Table1Row], warnings: Sequence[str] = ()) -> str:
    """The table, its footnote and one ``warning:`` line per reason a run is not comparable."""
    title = "Table 1 (RoboFollow): runs beside the published models, IS/ES/CR (%) per scene and level"
    body = text_table(HEADER, table_cells(rows), [False, False, False, False, True, True, True, True])
    return "\n".join([title, body, footnote(rows), *(f"warning: {w}" for w in warnings)])


def table1_json(rows: Sequence[Table1Row]) -> list[dict[str, Any]]:
    return [{"model": r.model, "family": r.family, "scene": r.scene, "marks": r.marks, "run": r.run,
             "cells": r.cells} for r in rows]


#: The CSV's columns: one line per (row, level).
CSV_FIELDS = ("model", "family", "source", "scene", "level", "marks", "n", "protocol_n", "IS", "IS_lo", "IS_hi",
              "IS_method", "ES", "ES_lo", "ES_hi", "ES_method", "CR", "CR_k", "CR_lo", "CR_hi", "CR_method")


def write_table1_csv(path: Path, rows: Sequence[Table1Row]) -> None:
    """The table as tidy CSV (stdlib ``csv``; numbers as Python writes them; intervals empty for published)."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, restval="")
        writer.writeheader()
        for r in rows:
            for level in LEVELS:
                c = r.cells.get(level)
                if not c:
                    continue
                line: dict[str, Any] = {"model": r.model, "family": r.family, "source": "run" if r.run else "published",
                                        "scene": r.scene, "level": level, "marks": "; ".join(r.marks),
                                        "n": c.get("n"), "protocol_n": c.get("protocol_n"), "CR_k": c.get("CR_k", "")}
                for m in METRICS:
                    line[m] = c[m]
                    if f"{m}_ci95" in c:
                        line[f"{m}_lo"], line[f"{m}_hi"] = c[f"{m}_ci95"]
                        line[f"{m}_method"] = c.get(f"{m}_method", "")
                writer.writerow(line)


def table1_figure(rows: Sequence[Table1Row], warnings: Sequence[str] = ()) -> Any:
    """The same table drawn with matplotlib (run rows shaded, marks in dark red), returned open."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.transforms import Bbox

    lines = table_cells(rows)
    run_lines = []
    for row in rows:
        run_lines.append(row.run)
        if row.run and row.cells:
            run_lines.append(True)
    notes = [(textwrap.fill(text, 200), "darkred" if text.startswith("warning") else "black")
             for text in [footnote(rows), *(f"warning: {w}" for w in warnings)]]
    note_in = sum(0.16 * (text.count("\n") + 1) + 0.04 for text, _ in notes)
    table_in = 0.2 * (len(lines) + 1)
    height = 0.6 + table_in + note_in + 0.2
    fig = plt.figure(figsize=(19, height))
    ax = fig.add_axes((0.005, (note_in + 0.2) / height, 0.99, table_in / height))
    ax.axis("off")
    table = ax.table(cellText=lines, colLabels=HEADER, cellLoc="left", bbox=Bbox.from_bounds(0, 0, 1, 1),
                     colWidths=[0.12, 0.12, 0.035, 0.125, 0.15, 0.15, 0.15, 0.15])
    table.auto_set_font_size(False)
    table.set_fontsize(7.5)
    for (i, j), cell in table.get_celld().items():
        cell.set_linewidth(0.2)
        if i == 0:
            cell.set_facecolor("#dddddd")
        elif run_lines[i - 1]:
            cell.set_facecolor("#e8f0fb")
            if j == 3 and lines[i - 1][3] and lines[i - 1][3] != "95% CI":
                cell.get_text().set_color("darkred")
    fig.suptitle("Table 1 (RoboFollow): runs beside the published models, IS/ES/CR (%) per scene and level",
                 y=1 - 0.2 / height)
    y = 0.1 / height
    for text, colour in reversed(notes):
        fig.text(0.01, y, text, fontsize=7, color=colour, va="bottom")
        y += (0.16 * (text.count("\n") + 1) + 0.04) / height
    return fig


def plot_table1(path: Path, rows: Sequence[Table1Row], warnings: Sequence[str] = ()) -> None:
    import matplotlib.pyplot as plt

    fig = table1_figure(rows, warnings)
    fig.savefig(path, dpi=110)
    plt.close(fig)
