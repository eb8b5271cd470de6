"""``robofollow report --compare-runs RUN_A RUN_B``: two policies on the same trials, pair by pair.

Trials are paired by (task, seed); both runs must hold exactly the same trials, or the comparison
is refused with one line naming what is missing (an unpaired comparison would mix the protocol's
difficulty into the difference). Per scene × level, and over all pairs: the mean IS and ES of each
run, the difference B − A with a paired-bootstrap 95 % interval (pairs of a task resampled together
when tasks have several rounds; the Wilson bound when the bootstrap collapses, ``intervals``), the
completion counts with each run's Wilson interval and the exact McNemar p-value on completion
(``paired_stats``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import LEVELS, SCENES
from robofollow_ros.evaluation.intervals import WILSON_BOUND, footnote, mean_interval, wilson
from robofollow_ros.evaluation.paired_stats import mcnemar_exact
from robofollow_ros.evaluation.report import SCENE_LABEL
from robofollow_ros.evaluation.text_table import text_table

Pair = tuple[Mapping[str, Any], Mapping[str, Any]]
#: Unpaired trials listed in the refusal, at most.
_LISTED = 5


class UnpairedRunsError(ValueError):
    """The two runs do not hold the same (task, seed) trials."""


@dataclass(frozen=True)
class CellComparison:
    cell: str  # "S1/L0", or "all"
    pairs: int
    is_a: float
    is_b: float
    is_diff: float
    is_ci95: tuple[float, float]
    es_a: float
    es_b: float
    es_diff: float
    es_ci95: tuple[float, float]
    complete_a: int
    complete_b: int
    only_a: int  # pairs completed by A only
    only_b: int  # pairs completed by B only
    mcnemar_p: float
    complete_a_ci95: tuple[float, float] = (0.0, 1.0)  # Wilson on complete_a / pairs
    complete_b_ci95: tuple[float, float] = (0.0, 1.0)
    is_method: str = ""  # the method of each Δ interval (intervals.py)
    es_method: str = ""


def load_run_trials(run_dir: Path) -> list[dict[str, Any]]:
    """A run's results.json entries; raises ValueError with one line when it is not a run."""
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise ValueError(f"--compare-runs: {run_dir} has no results.json")
    try:
        trials = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"--compare-runs: {path} is not valid JSON ({exc})") from None
    if not isinstance(trials, list) or not all(isinstance(t, dict) and "task" in t and "seed" in t for t in trials):
        raise ValueError(f"--compare-runs: {path} is not a list of RoboFollow trials with task and seed")
    return [t for t in trials if not t.get("control")]  # instruction controls: robofollow report RUN --controls


def _by_key(trials: Sequence[Mapping[str, Any]], name: str) -> dict[tuple[str, int], Mapping[str, Any]]:
    out: dict[tuple[str, int], Mapping[str, Any]] = {}
    for t in trials:
        key = (str(t["task"]), int(t["seed"]))
        if key in out:
            raise UnpairedRunsError(f"--compare-runs: {name} holds trial {key[0]} seed {key[1]} twice")
        out[key] = t
    return out


def _listing(keys: Sequence[tuple[str, int]]) -> str:
    shown = ", ".join(f"{task} seed {seed}" for task, seed in keys[:_LISTED])
    return shown + (f" and {len(keys) - _LISTED} more" if len(keys) > _LISTED else "")


def pair_trials(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]],
                names: tuple[str, str] = ("RUN_A", "RUN_B")) -> list[Pair]:
    """Pairs in A's order; refuses runs that do not hold the same (task, seed) trials."""
    ka, kb = _by_key(a, names[0]), _by_key(b, names[1])
    missing_b = [k for k in ka if k not in kb]
    missing_a = [k for k in kb if k not in ka]
    if missing_a or missing_b:
        parts = []
        if missing_b:
            parts.append(f"{len(missing_b)} trial(s) of {names[0]} are missing from {names[1]} ({_listing(missing_b)})")
        if missing_a:
            parts.append(f"{len(missing_a)} trial(s) of {names[1]} are missing from {names[0]} ({_listing(missing_a)})")
        raise UnpairedRunsError("--compare-runs: the runs are not paired: " + "; ".join(parts))
    return [(ka[k], kb[k]) for k in ka]


def compare_cell(cell: str, pairs: Sequence[Pair], n_resamples: int, seed: int) -> CellComparison:
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    is_a = [float(x["intent_score"]) for x, _ in pairs]
    is_b = [float(y["intent_score"]) for _, y in pairs]
    es_a = [float(x["exec_score"]) for x, _ in pairs]
    es_b = [float(y["exec_score"]) for _, y in pairs]
    done = [(bool(x["completion_ok"]), bool(y["completion_ok"])) for x, y in pairs]
    only_a = sum(1 for ca, cb in done if ca and not cb)
    only_b = sum(1 for ca, cb in done if cb and not ca)
    is_d = [b - a for a, b in zip(is_a, is_b, strict=True)]
    es_d = [b - a for a, b in zip(es_a, es_b, strict=True)]
    tasks = [str(x["task"]) for x, _ in pairs]
    is_ci = mean_interval(is_d, tasks, n_resamples, seed, low=-1.0, high=1.0)
    es_ci = mean_interval(es_d, tasks, n_resamples, seed + 1, low=-1.0, high=1.0)
    complete_a, complete_b = sum(ca for ca, _ in done), sum(cb for _, cb in done)
    return CellComparison(
        cell=cell, pairs=len(pairs), is_a=mean(is_a), is_b=mean(is_b), is_diff=mean(is_d), is_ci95=is_ci.pair(),
        es_a=mean(es_a), es_b=mean(es_b), es_diff=mean(es_d), es_ci95=es_ci.pair(), complete_a=complete_a,
        complete_b=complete_b, only_a=only_a, only_b=only_b, mcnemar_p=mcnemar_exact(only_a, only_b),
        complete_a_ci95=wilson(complete_a, len(pairs)).pair(), complete_b_ci95=wilson(complete_b, len(pairs)).pair(),
        is_method=is_ci.method, es_method=es_ci.method)


def compare_runs(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], *, n_resamples: int = 10_000,
                 seed: int = 0, names: tuple[str, str] = ("RUN_A", "RUN_B")) -> list[CellComparison]:
    """One comparison per scene × level present (paper order), then ``all``."""
    pairs = pair_trials(a, b, names)
    cells: list[CellComparison] = []
    for scene in SCENES:
        for level in LEVELS:
            group = [p for p in pairs if p[0].get("scene") == scene and p[0].get("level_tag") == level]
            if group:
                cells.append(compare_cell(f"{SCENE_LABEL[scene]}/{level}", group, n_resamples, seed))
    if pairs:
        cells.append(compare_cell("all", pairs, n_resamples, seed))
    return cells


def format_comparison(cells: Sequence[CellComparison], names: tuple[str, str]) -> str:
    """One row per cell; columns as wide as their widest value (``text_table``), so they never run together."""
    a, b = names

    def change(x: float, y: float, diff: float, ci: tuple[float, float], method: str) -> list[str]:
        star = "*" if method == WILSON_BOUND else ""
        return [f"{100 * x:.1f}", f"{100 * y:.1f}", f"{100 * diff:+.1f}",
                f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]{star}"]

    def share(ci: tuple[float, float]) -> str:
        return f"[{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"

    header = ["cell", "pairs", "IS A", "IS B", "IS Δ", "IS Δ 95% CI", "ES A", "ES B", "ES Δ", "ES Δ 95% CI",
              "complete A/B", "A only/B only", "McNemar p", "complete A 95% CI", "complete B 95% CI"]
    rows = [[c.cell, str(c.pairs), *change(c.is_a, c.is_b, c.is_diff, c.is_ci95, c.is_method),
             *change(c.es_a, c.es_b, c.es_diff, c.es_ci95, c.es_method), f"{c.complete_a}/{c.complete_b}",
             f"{c.only_a}/{c.only_b}", f"{c.mcnemar_p:.4f}", share(c.complete_a_ci95), share(c.complete_b_ci95)]
            for c in cells]
    right = [False, True, True, True, True, False, True, True, True, False, True, True, True, False, False]
    title = f"paired comparison: A = {a}, B = {b} (differences are B − A, in points of 100; n = pairs)"
    note = (f"{footnote('IS Δ, ES Δ', 'the mean paired difference')}; complete A/B: Wilson on completed/pairs; "
            "McNemar: exact, on the discordant pairs")
    return title + "\n" + text_table(header, rows, right) + "\n" + note


def comparison_json(cells: Sequence[CellComparison], names: tuple[str, str]) -> dict[str, Any]:
    return {"run_a": names[0], "run_b": names[1], "difference": "B - A", "cells": [asdict(c) for c in cells]}


def plot_comparison(path: str | Path, cells: Sequence[CellComparison], names: tuple[str, str],
                    warnings: Sequence[str] = ()) -> None:
    """ΔIS and ΔES with their intervals per cell, and completion with Wilson intervals and the McNemar p above;
    ``warnings`` (why the runs are not comparable) printed under the panels."""
    import matplotlib.pyplot as plt

    fig = comparison_plot(cells, names)
    for i, warning in enumerate(warnings):
        fig.text(0.01, -0.02 - 0.025 * i, f"warning: not comparable: {warning}", fontsize=8, color="darkred")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def comparison_plot(cells: Sequence[CellComparison], names: tuple[str, str]) -> Any:
    """The figure of :func:`plot_comparison`, returned open (n under every cell, a marker at a zero rate)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(len(cells)))
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 0.9 * len(cells) + 3), 10), sharex=True)
    for ax, metric in zip(axes[:2], ("is", "es"), strict=True):
        diff = [100 * getattr(c, f"{metric}_diff") for c in cells]
        lo = [d - 100 * getattr(c, f"{metric}_ci95")[0] for d, c in zip(diff, cells, strict=True)]
        hi = [100 * getattr(c, f"{metric}_ci95")[1] - d for d, c in zip(diff, cells, strict=True)]
        ax.errorbar(xs, diff, yerr=[lo, hi], fmt="o", capsize=4)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_ylabel(f"Δ{metric.upper()} (B − A, points)")
        ax.grid(axis="y", alpha=0.3)
    width = 0.38
    series = ((-width / 2, "complete_a", f"A: {names[0]}", "C0"), (width / 2, "complete_b", f"B: {names[1]}", "C1"))
    for shift, attr, label, colour in series:
        at = [i + shift for i in xs]
        rates = [100 * getattr(c, attr) / c.pairs for c in cells]
        cis = [getattr(c, f"{attr}_ci95") for c in cells]
        axes[2].bar(at, rates, width, label=label, color=colour)
        axes[2].errorbar(at, rates, fmt="none", ecolor="black", capsize=2, elinewidth=0.8,
                         yerr=[[max(0.0, r - 100 * ci[0]) for r, ci in zip(rates, cis, strict=True)],
                               [max(0.0, 100 * ci[1] - r) for r, ci in zip(rates, cis, strict=True)]])
        zero = [i for i, r in enumerate(rates) if r == 0.0]  # a bar of height 0 is invisible: a marker says "0"
        axes[2].plot([at[i] for i in zero], [0.0] * len(zero), marker="D", markersize=6, color=colour,
                     markeredgecolor="black", linestyle="none", gid=f"zero:{attr}", zorder=5)
    for x, c in zip(xs, cells, strict=True):
        axes[2].text(x, 104, f"p={c.mcnemar_p:.2g}", ha="center", fontsize="small")
    axes[2].set_ylim(-5, 112)
    axes[2].set_ylabel("completed pairs (%), Wilson 95 %")
    axes[2].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")  # outside: never over a bar
    axes[2].set_xticks(xs, [f"{c.cell}\nn={c.pairs}" for c in cells])
    fig.suptitle("Paired comparison (n = pairs): 95 % paired-bootstrap intervals of B − A (over tasks when "
                 "tasks have several rounds;\nWilson bound where the bootstrap collapses); completion with Wilson "
                 "intervals, exact McNemar p")
    fig.tight_layout()
    return fig
