"""Table and plot of a perturbation run (``perturb_eval.run_perturbation_eval``'s report)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.intervals import wilson
from robofollow_ros.perception.perturb_score import GOALS

#: Under each table: what its intervals are.
INTERVALS_NOTE = ("95 % intervals: Wilson on k of n (identity: correct of the identity checks; a confidence bin: "
                  "poses > 2 cm off of the bin's poses); n in brackets")


def _mm(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.1f}"


def _verdict(item: dict[str, Any]) -> str:
    if not item.get("goal_level"):
        return "(no goal)"
    return "met" if item.get("goals_met") else "**NOT met**"


def markdown_table(report: dict[str, Any]) -> str:
    """One row per item: errors (the largest with the confidence it was published at), identity, misses, named
    objects the tracker did not locate, false detections, drift reports, goal verdict."""
    rows = ["| perturbation | median mm | p95 mm | max mm (at confidence) | identity | misses | not located "
            "| false det. | unexplained | drift reported | goals |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for item in report["items"]:
        identity = item["identity_accuracy"]
        drift = item["drift_reported_share"]
        at = item.get("max_error_confidence")
        worst = _mm(item["max_error_m"]) + ("" if at is None else f" ({at:.2f})")
        rows.append(
            f"| {item['name']} | {_mm(item['median_error_m'])} | {_mm(item['p95_error_m'])} "
            f"| {worst} | {share_ci(identity, item['identity_checks'], 2)} "
            f"| {item['misses']} | {item.get('not_located', 0)} | {item['false_detections']} "
            f"| {item['unexplained_segments']} | {'—' if drift is None else f'{drift * 100:.0f} %'} "
            f"| {_verdict(item)} |")
    return "\n".join(rows) + "\n\n" + INTERVALS_NOTE


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f} %"


def share_ci(value: float | None, n: int, digits: int = 0) -> str:
    """A share of n with its Wilson 95 % interval and n: ``99.50 % [98.84, 99.79] (1125)``; the count is the
    share × n, rounded (the report keeps the share)."""
    if value is None or not n:
        return f"— ({n})"
    ci = wilson(round(value * n), n)
    return f"{value * 100:.{digits}f} % [{ci.lo * 100:.{digits}f}, {ci.hi * 100:.{digits}f}] ({n})"


def monotone(reliability: list[dict[str, Any]]) -> bool:
    """Whether the share of poses > 2 cm off never rises with confidence (empty bins skipped)."""
    shares = [b["share_over_2cm"] for b in reliability if b["n"]]
    return all(high <= low for low, high in pairwise(shares))


def doubt_table(report: dict[str, Any]) -> str:
    """Issue 37's figures per item: p50/p95 of named objects, confident-wrong counts, and the reliability
    diagram as the share of published poses > 2 cm off per confidence bin (n in brackets)."""
    bins = [b["bin"] for b in report["items"][0].get("reliability", [])]
    rows = ["| family | identity | p50 mm | p95 mm | poses | > 2 cm at ≥ 0.9 | > 3 cm at ≥ 0.5 | "
            + " | ".join(f"> 2 cm, conf {b}" for b in bins) + " | monotone |",
            "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(bins) + "---|"]
    for item in report["items"]:
        identity = item["identity_accuracy"]
        cells = [share_ci(b["share_over_2cm"], b["n"]) for b in item.get("reliability", [])]
        rows.append(f"| {item['name']} | {share_ci(identity, item.get('identity_checks', 0), 2)} "
                    f"| {_mm(item['median_error_m'])} | {_mm(item['p95_error_m'])} | {item.get('poses_published', 0)} "
                    f"| {item.get('confident_wrong_2cm_09', '—')} | {item.get('confident_wrong_3cm_05', '—')} | "
                    + " | ".join(cells) + f" | {'yes' if monotone(item.get('reliability', [])) else '**no**'} |")
    return "\n".join(rows) + "\n\n" + INTERVALS_NOTE


def reliability_plot(report: dict[str, Any], path: Path) -> None:
    """The reliability diagram per family: share of published poses > 2 cm off in each confidence bin (marker
    area ∝ poses in the bin), beside the confident-wrong counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = report["items"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    cmap = plt.get_cmap("tab20")
    for k, item in enumerate(items):
        bins = [b for b in item.get("reliability", []) if b["n"]]
        centres = [sum(float(v) for v in b["bin"].split("–")) / 2 for b in bins]
        shares = [100 * b["share_over_2cm"] for b in bins]
        left.plot(centres, shares, color=cmap(k % 20), linewidth=1, label=item["name"])
        left.scatter(centres, shares, s=[6 + 60 * (b["n"] / max(1, item["poses_published"])) ** 0.5 * 4 for b in bins],
                     color=cmap(k % 20))
    left.axvline(0.5, color="grey", linestyle=":", linewidth=1)
    left.axvline(0.9, color="grey", linestyle=":", linewidth=1)
    left.set_xlim(0, 1)
    left.set_ylim(-2, 102)
    left.set_xlabel("published confidence (bin centre); dotted: 0.5 (stage monitor, reset check), 0.9")
    left.set_ylabel("poses > 2 cm off (%)")
    left.legend(fontsize=7, ncol=2, loc="upper right")
    names = [i["name"] for i in items]
    positions = list(range(len(items)))
    right.barh([p - 0.2 for p in positions], [i.get("confident_wrong_2cm_09", 0) for i in items], height=0.4,
               color="#bc4b51", label="> 2 cm at ≥ 0.9")
    right.barh([p + 0.2 for p in positions], [i.get("confident_wrong_3cm_05", 0) for i in items], height=0.4,
               color="#f4a259", label="> 3 cm at ≥ 0.5")
    right.set_yticks(positions, names)
    right.invert_yaxis()
    right.set_xlim(0, max(5, *(i.get("confident_wrong_3cm_05", 0) for i in items)) + 1)
    right.set_xlabel("confident-wrong poses (goal: 0)")
    right.legend(loc="lower right", fontsize=8)
    figure.suptitle(f"perception's confidence under a real bench's faults: n = {report['trials']} trials, "
                    f"{sum(i.get('poses_published', 0) for i in items)} poses", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot(report: dict[str, Any], path: Path) -> None:
    """Bars of median / p95 error and identity accuracy per item, with the goal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = report["items"]
    names = [i["name"] for i in items]
    median = [(i["median_error_m"] or 0.0) * 1000 for i in items]
    p95 = [(i["p95_error_m"] or 0.0) * 1000 for i in items]
    identity = [(i["identity_accuracy"] or 0.0) * 100 for i in items]
    positions = list(range(len(items)))
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 0.32 * len(items) + 1.6), sharey=True)
    left.barh([p + 0.2 for p in positions], p95, height=0.4, color="#f4a259", label="p95")
    left.barh([p - 0.2 for p in positions], median, height=0.4, color="#5b8e7d", label="median")
    left.axvline(GOALS["median_error_m"] * 1000, color="#5b8e7d", linestyle="--", linewidth=1)
    left.axvline(GOALS["p95_error_m"] * 1000, color="#f4a259", linestyle="--", linewidth=1)
    left.set_xlabel("position error (mm); dashed: goals 10 / 20 mm")
    left.set_xlim(0, max(25.0, 1.1 * max(p95, default=0.0)))
    left.legend(loc="upper right")
    colours = ["#5b8e7d" if not i.get("goal_level") or i.get("goals_met") else "#bc4b51" for i in items]
    right.barh(positions, identity, color=colours)
    right.axvline(GOALS["identity_accuracy"] * 100, color="black", linestyle="--", linewidth=1)
    right.set_xlim(min(90.0, min(identity) - 1), 100.5)
    right.set_xlabel("identity accuracy (%); dashed: 99 %; red: a goal missed")
    left.set_yticks(positions, [f"{n}{' *' if i.get('goal_level') else ''}" for n, i in zip(names, items, strict=True)])
    left.invert_yaxis()
    figure.suptitle(f"perception under perturbations: {report['trials']} trials, policy {report['policy']} "
                    f"(* = item at a goal level)", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
