"""What instruction controls measure (``robofollow report RUN --controls``), with n and 95 % intervals.

Every control trial pairs with its true trial (``partner``: same task, layout and seed), per scene × level
and overall:

* **language reliance** (``blank``, ``shuffled``): IS, ES and CR of the true trials minus the control's.
  IS/ES: mean of the per-pair differences with the paired bootstrap over tasks (``intervals.mean_interval``
  clustered by task: pairs of one task resampled together). CR: the same paired bootstrap of the completion
  differences, the exact McNemar p (``paired_stats``) on the discordant pairs, and each side's Wilson share.
* **instruction sensitivity** (``swap``): the share of swap trials that complete the *new* task (its rules
  score the trial) and the share that still complete the *old* one (``original_verdict``); Wilson.
* **paraphrase invariance** (``paraphrase``): the share of pairs with the same completion verdict (Wilson),
  and the CR difference as for reliance.

A policy that uses the words shows reliance > 0, follows swaps, and keeps its verdict under paraphrase; one
that ignores them shows reliance near 0 and still does the old task on a swap.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.controls import CONTROLS
from robofollow_ros.evaluation.intervals import WILSON_BOUND, Interval, mean_interval, wilson
from robofollow_ros.evaluation.paired_stats import mcnemar_exact

ALL = "all"
Pair = tuple[Mapping[str, Any], Mapping[str, Any]]


def trial_id(entry: Mapping[str, Any]) -> str:
    return f"{entry['task']}_r{int(entry.get('round') or 0)}_s{entry.get('seed')}"


def control_pairs(trials: Sequence[Mapping[str, Any]]) -> dict[str, list[Pair]]:
    """control -> (true trial, control trial) for every control trial whose partner is in ``trials``."""
    true = {trial_id(e): e for e in trials if not e.get("control")}
    out: dict[str, list[Pair]] = defaultdict(list)
    for entry in trials:
        control = entry.get("control")
        if control and entry.get("partner") in true:
            out[str(control)].append((true[str(entry["partner"])], entry))
    return {c: out[c] for c in CONTROLS if c in out}


def _done(entry: Mapping[str, Any]) -> float:
    return 1.0 if entry.get("completion_ok") else 0.0


def _interval(values: Sequence[float], tasks: Sequence[str], n_resamples: int, seed: int, low: float = -1.0
              ) -> dict[str, Any]:
    ci: Interval = mean_interval(values, tasks, n_resamples=n_resamples, seed=seed, low=low, high=1.0)
    return {"value": sum(values) / len(values), "ci": [ci.lo, ci.hi], "method": ci.method}


def _share(k: int, n: int) -> dict[str, Any]:
    ci = wilson(k, n)
    return {"k": k, "value": k / n, "ci": [ci.lo, ci.hi], "method": ci.method}


def difference_stats(pairs: Sequence[Pair], n_resamples: int, seed: int) -> dict[str, Any]:
    """True minus control: IS/ES/CR paired differences (bootstrap over tasks), McNemar, each side's Wilson CR."""
    tasks = [str(t["task"]) for t, _ in pairs]
    out: dict[str, Any] = {"n": len(pairs)}
    for metric, key in (("IS", "intent_score"), ("ES", "exec_score")):
        out[metric] = _interval([float(t[key]) - float(c[key]) for t, c in pairs], tasks, n_resamples, seed)
    out["CR"] = _interval([_done(t) - _done(c) for t, c in pairs], tasks, n_resamples, seed)
    only_true = sum(1 for t, c in pairs if _done(t) and not _done(c))
    only_control = sum(1 for t, c in pairs if _done(c) and not _done(t))
    out["CR"].update(only_true=only_true, only_control=only_control, mcnemar_p=mcnemar_exact(only_true, only_control))
    out["CR_true"] = _share(sum(int(_done(t)) for t, _ in pairs), len(pairs))
    out["CR_control"] = _share(sum(int(_done(c)) for _, c in pairs), len(pairs))
    return out


def swap_stats(pairs: Sequence[Pair]) -> dict[str, Any]:
    n = len(pairs)
    new = sum(int(_done(c)) for _, c in pairs)
    old = sum(1 for _, c in pairs if (c.get("original_verdict") or {}).get("completion_ok"))
    return {"n": n, "follows_new": _share(new, n), "still_old": _share(old, n),
            "CR_true": _share(sum(int(_done(t)) for t, _ in pairs), n)}


def paraphrase_stats(pairs: Sequence[Pair], n_resamples: int, seed: int) -> dict[str, Any]:
    same = sum(1 for t, c in pairs if bool(t.get("completion_ok")) == bool(c.get("completion_ok")))
    return {**difference_stats(pairs, n_resamples, seed), "same_verdict": _share(same, len(pairs))}


def _stats(control: str, pairs: Sequence[Pair], n_resamples: int, seed: int) -> dict[str, Any]:
    if control == "swap":
        return swap_stats(pairs)
    if control == "paraphrase":
        return paraphrase_stats(pairs, n_resamples, seed)
    return difference_stats(pairs, n_resamples, seed)


def control_report(trials: Sequence[Mapping[str, Any]], n_resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """control -> cell (``all``, ``scene1/L0``, ...) -> its statistics; cells in scene, level order."""
    out: dict[str, Any] = {}
    for control, pairs in control_pairs(trials).items():
        cells: dict[str, list[Pair]] = defaultdict(list)
        for pair in pairs:
            cells[f"{pair[0]['scene']}/{pair[0]['level_tag']}"].append(pair)
        out[control] = {ALL: _stats(control, pairs, n_resamples, seed),
                        **{cell: _stats(control, cells[cell], n_resamples, seed) for cell in sorted(cells)}}
    return out


# -- views ---------------------------------------------------------------------------------------------
def _pct(d: Mapping[str, Any]) -> str:
    lo, hi = d["ci"]
    star = "*" if d["method"] == WILSON_BOUND else ""
    return f"{100 * d['value']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]{star}"


def _share_text(d: Mapping[str, Any], n: int) -> str:
    lo, hi = d["ci"]
    return f"{d['k']}/{n} {100 * d['value']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def format_controls(report: Mapping[str, Any]) -> str:
    """The text view: one block per control, a line per cell."""
    if not report:
        return "no control trials in this run (robofollow eval --controls)"
    lines: list[str] = []
    for control, cells in report.items():
        if control == "swap":
            lines.append("swap — instruction sensitivity: completes the NEW task / still completes the OLD task")
            for cell, s in cells.items():
                lines.append(f"  {cell:<10} n={s['n']:<4} new {_share_text(s['follows_new'], s['n'])}   "
                             f"old {_share_text(s['still_old'], s['n'])}")
            continue
        what = "paraphrase invariance" if control == "paraphrase" else "language reliance (true − control)"
        lines.append(f"{control} — {what}: IS, ES, CR differences in points; McNemar p on CR")
        for cell, s in cells.items():
            extra = (f"   same verdict {_share_text(s['same_verdict'], s['n'])}" if control == "paraphrase" else "")
            lines.append(f"  {cell:<10} n={s['n']:<4} IS {_pct(s['IS'])}  ES {_pct(s['ES'])}  CR {_pct(s['CR'])} "
                         f"p={s['CR']['mcnemar_p']:.3g} (CR {_share_text(s['CR_true'], s['n'])} → "
                         f"{_share_text(s['CR_control'], s['n'])}){extra}")
    lines.append("95 % intervals: differences paired bootstrap over tasks (pairs of a task together; * = every "
                 "resample equal, so the Wilson bound at the mean); shares Wilson; McNemar exact two-sided on the "
                 "discordant pairs")
    return "\n".join(lines)


def control_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """controls.csv: one row per control, cell and measure."""
    rows: list[dict[str, Any]] = []
    for control, cells in report.items():
        for cell, s in cells.items():
            scene, _, level = cell.partition("/")
            for measure, d in s.items():
                if not isinstance(d, Mapping):
                    continue
                rows.append({"control": control, "scene": scene, "level": level or ALL, "measure": measure,
                             "n": s["n"], "k": d.get("k", ""), "value": round(d["value"], 6),
                             "ci_lo": round(d["ci"][0], 6), "ci_hi": round(d["ci"][1], 6), "method": d["method"],
                             "mcnemar_p": d.get("mcnemar_p", "")})
    return rows


def write_controls_csv(path: Path, report: Mapping[str, Any]) -> Path:
    rows = control_rows(report)
    fields = ["control", "scene", "level", "measure", "n", "k", "value", "ci_lo", "ci_hi", "method", "mcnemar_p"]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


#: The measure each control's bar shows in the plot.
PLOTTED = {"blank": "CR", "shuffled": "CR", "swap": "follows_new", "paraphrase": "same_verdict"}


def plot_controls(path: Path, report: Mapping[str, Any], title: str = "") -> Path:
    """One bar per measure (overall), its 95 % interval and n: reliance CR differences, swap shares, invariance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars: list[tuple[str, Mapping[str, Any], int]] = []
    for control, cells in report.items():
        s = cells[ALL]
        if control == "swap":
            bars += [("swap: new task", s["follows_new"], s["n"]), ("swap: old task", s["still_old"], s["n"])]
        elif control == "paraphrase":
            bars.append(("paraphrase: same verdict", s["same_verdict"], s["n"]))
        else:
            bars.append((f"CR true − {control}", s["CR"], s["n"]))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(bars)), 3.6))
    xs = range(len(bars))
    values = [100 * d["value"] for _, d, _ in bars]
    err = [[100 * (d["value"] - d["ci"][0]) for _, d, _ in bars], [100 * (d["ci"][1] - d["value"]) for _, d, _ in bars]]
    ax.bar(xs, values, yerr=err, capsize=4, color="#4c72b0")
    zeros = [x for x, v in zip(xs, values, strict=True) if v == 0]
    if zeros:  # a bar of height 0 is invisible: a diamond and a "0" say the value was measured
        ax.scatter(zeros, [0.0] * len(zeros), marker="D", s=36, color="#4c72b0", zorder=3)
        for x in zeros:
            ax.annotate("0", (x, 0.0), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylim(bottom=min(ax.get_ylim()[0], -8.0))  # room under 0 for the zero marker
    ax.set_xticks(list(xs), [f"{name}\nn={n}" for name, _, n in bars], fontsize=8)
    ax.set_ylabel("points (%), 95 % interval")
    ax.set_title(title or "instruction controls")
    fig.text(0.01, 0.01, "95 % intervals: differences paired bootstrap over tasks (* Wilson bound at the mean where "
             "every resample is equal); shares Wilson; n = pairs", fontsize=6, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["control_pairs", "control_report", "control_rows", "format_controls", "plot_controls",
           "write_controls_csv"]
