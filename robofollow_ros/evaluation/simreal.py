"""``robofollow report --sim-real SIM_RUN RIG_RUN``: does the simulator tell the same story as the rig?

Tasks are paired by task id (rounds averaged per task: the rig usually runs fewer rounds than the
simulator, so pairing trials by seed would throw most of the sim run away). Three views:

* **Agreement**: a task *succeeds* in a run when it completed in more than half of its rounds (one
  round: that trial's verdict). Per task and per level: both succeed / both fail / disagree, with the
  agreement rate, its n and a Wilson 95 % interval.
* **Pearson r** of the per-task completion rates, intent scores and execution scores, with a 95 %
  interval from Fisher's z (z = atanh r, standard error 1/sqrt(n − 3)); none below 4 tasks, and no r
  where a run's values are all equal (the correlation is undefined there).
* **MMRV**, the mean maximum rank violation of SimplerEnv (Li et al. 2024, "Evaluating Real-World Robot
  Manipulation Policies in Simulation", arXiv 2405.05941; ``mean_maximum_rank_violation`` in
  simpler_env/utils/metrics.py of simpler-env/SimplerEnv): for each item i, the largest real-world gap
  |real_i − real_j| over the items j that the simulator orders the other way round
  ((sim_i > sim_j) != (real_i > real_j), strict comparisons as there), 0 when none; MMRV is the mean
  over i. SimplerEnv's items are policies; ours are the tasks of one policy, so MMRV here says how far
  (in rig completion rate) the simulator's ordering of task difficulty is wrong. 0 is perfect; it is in
  the units of the rig's rates (0-1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.scoring.summary import Z95, wilson_interval

METRICS = ("completion", "intent", "exec")
_FIELDS = {"completion": "completion_ok", "intent": "intent_score", "exec": "exec_score"}


@dataclass(frozen=True)
class TaskPair:
    task: str
    level: str
    scene: str
    rounds_sim: int
    rounds_rig: int
    sim: dict[str, float]  # metric -> mean over rounds
    rig: dict[str, float]

    @property
    def verdict(self) -> str:
        s, r = self.sim["completion"] > 0.5, self.rig["completion"] > 0.5
        return "both succeed" if s and r else "both fail" if not (s or r) else "disagree"


@dataclass(frozen=True)
class Agreement:
    group: str  # "L0" ... or "all"
    n: int
    both_succeed: int
    both_fail: int
    disagree: int
    sim_only: int  # succeeded in sim, failed on the rig
    rig_only: int

    @property
    def rate(self) -> float:
        return (self.both_succeed + self.both_fail) / self.n if self.n else 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        return wilson_interval(self.both_succeed + self.both_fail, self.n)


@dataclass(frozen=True)
class Correlation:
    metric: str
    n: int
    r: float | None  # None: undefined (fewer than 2 tasks, or one side constant)
    ci95: tuple[float, float] | None  # None below 4 tasks
    mmrv: float


@dataclass(frozen=True)
class SimReal:
    tasks: list[TaskPair]
    agreement: list[Agreement]
    correlations: list[Correlation]
    sim_only_tasks: list[str]  # tasks the rig did not run
    rig_only_tasks: list[str]


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None when it is undefined (fewer than two points, or either side constant)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"pearson: need two equal-length 1-D sequences, got {a.shape} and {b.shape}")
    if a.size < 2:
        return None
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float((da * da).sum()) * float((db * db).sum()))
    if denom == 0.0:
        return None
    return max(-1.0, min(1.0, float((da * db).sum()) / denom))


def fisher_interval(r: float, n: int, z: float = Z95) -> tuple[float, float] | None:
    """95 % interval of a correlation from Fisher's z transform; None below 4 points."""
    if n < 4:
        return None
    if abs(r) >= 1.0:
        return (r, r)
    centre, half = math.atanh(r), z / math.sqrt(n - 3)
    return math.tanh(centre - half), math.tanh(centre + half)


def mmrv(sim: Sequence[float], real: Sequence[float]) -> float:
    """Mean maximum rank violation (SimplerEnv's definition, see the module docstring)."""
    s, r = np.asarray(sim, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if s.shape != r.shape or s.ndim != 1 or s.size == 0:
        raise ValueError(f"mmrv: need two equal-length non-empty 1-D sequences, got {s.shape} and {r.shape}")
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    gaps = np.where(violated, np.abs(r[:, None] - r[None, :]), 0.0)
    return float(gaps.max(axis=1).mean())


def _per_task(trials: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str, int, dict[str, float]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        grouped.setdefault(str(t["task"]), []).append(t)
    out = {}
    for task, rows in grouped.items():
        means = {m: sum(float(r[f]) for r in rows) / len(rows) for m, f in _FIELDS.items()}
        out[task] = (str(rows[0].get("level_tag") or task.split("_", 1)[0]), str(rows[0].get("scene", "")),
                     len(rows), means)
    return out


def _agreement(group: str, pairs: Sequence[TaskPair]) -> Agreement:
    verdicts = [p.verdict for p in pairs]
    return Agreement(group=group, n=len(pairs), both_succeed=verdicts.count("both succeed"),
                     both_fail=verdicts.count("both fail"), disagree=verdicts.count("disagree"),
                     sim_only=sum(1 for p in pairs if p.verdict == "disagree" and p.sim["completion"] > 0.5),
                     rig_only=sum(1 for p in pairs if p.verdict == "disagree" and p.rig["completion"] > 0.5))


def sim_vs_real(sim: Sequence[Mapping[str, Any]], rig: Sequence[Mapping[str, Any]]) -> SimReal:
    """Pairs the two runs' tasks and computes agreement, r and MMRV; refuses runs with no task in common."""
    for name, trials in (("SIM_RUN", sim), ("RIG_RUN", rig)):
        for t in trials:
            missing = [f for f in ("task", *_FIELDS.values()) if f not in t]
            if missing:
                raise ValueError(f"--sim-real: {name}: a trial lacks {', '.join(missing)}")
    s, r = _per_task(sim), _per_task(rig)
    common = sorted(s.keys() & r.keys(), key=lambda t: (s[t][0], s[t][1], t))
    if not common:
        raise ValueError("--sim-real: the runs share no task id, so there is nothing to pair")
    pairs = [TaskPair(task=t, level=s[t][0], scene=s[t][1], rounds_sim=s[t][2], rounds_rig=r[t][2],
                      sim=s[t][3], rig=r[t][3]) for t in common]
    levels = sorted({p.level for p in pairs})
    agreement = [_agreement(level, [p for p in pairs if p.level == level]) for level in levels]
    agreement.append(_agreement("all", pairs))
    correlations = []
    for metric in METRICS:
        xs = [p.sim[metric] for p in pairs]
        ys = [p.rig[metric] for p in pairs]
        rho = pearson(xs, ys)
        correlations.append(Correlation(metric=metric, n=len(pairs), r=rho,
                                        ci95=None if rho is None else fisher_interval(rho, len(pairs)),
                                        mmrv=mmrv(xs, ys)))
    return SimReal(tasks=pairs, agreement=agreement, correlations=correlations,
                   sim_only_tasks=sorted(s.keys() - r.keys()), rig_only_tasks=sorted(r.keys() - s.keys()))


def format_sim_real(result: SimReal, names: tuple[str, str]) -> str:
    sim_name, rig_name = names
    lines = [f"sim vs real: SIM = {sim_name}, RIG = {rig_name}; {len(result.tasks)} tasks paired by id "
             f"(rounds averaged; a task succeeds when it completed in more than half its rounds)", "",
             "per task (completion / IS / ES, %, rounds):"]
    width = max(len(p.task) for p in result.tasks)
    lines.append(f"{'task':<{width}}  {'level':<5}  {'sim CR/IS/ES':>17}  {'rig CR/IS/ES':>17}  {'rounds':>7}  verdict")
    for p in result.tasks:
        sim_txt = "/".join(f"{100 * p.sim[m]:.0f}" for m in METRICS)
        rig_txt = "/".join(f"{100 * p.rig[m]:.0f}" for m in METRICS)
        lines.append(f"{p.task:<{width}}  {p.level:<5}  {sim_txt:>17}  {rig_txt:>17}  "
                     f"{f'{p.rounds_sim}/{p.rounds_rig}':>7}  {p.verdict}")
    lines += ["", "agreement on success:",
              f"{'group':<6}{'n':>5}{'both succeed':>14}{'both fail':>11}{'disagree':>10}{'sim only':>10}"
              f"{'rig only':>10}  agreement (95% CI)"]
    for a in result.agreement:
        lines.append(f"{a.group:<6}{a.n:>5}{a.both_succeed:>14}{a.both_fail:>11}{a.disagree:>10}{a.sim_only:>10}"
                     f"{a.rig_only:>10}  {100 * a.rate:5.1f}% ({100 * a.ci95[0]:.1f}-{100 * a.ci95[1]:.1f}), n={a.n}")
    lines += ["", "per-task correlation of sim with rig (Pearson r, 95% CI by Fisher z) and MMRV (0 = same order):"]
    for c in result.correlations:
        r_txt = "undefined (a side is constant or n < 2)" if c.r is None else f"{c.r:+.3f}"
        ci_txt = "" if c.ci95 is None else f" ({c.ci95[0]:+.3f}..{c.ci95[1]:+.3f})"
        lines.append(f"{c.metric:<11} n={c.n:<4} r = {r_txt}{ci_txt}   MMRV = {c.mmrv:.3f}")
    if result.sim_only_tasks or result.rig_only_tasks:
        lines.append(f"\nnot paired: {len(result.sim_only_tasks)} task(s) only in SIM, "
                     f"{len(result.rig_only_tasks)} only in RIG (left out)")
    return "\n".join(lines)


def sim_real_json(result: SimReal, names: tuple[str, str]) -> dict[str, Any]:
    return {"sim_run": names[0], "rig_run": names[1],
            "success": "completed in more than half of the task's rounds",
            "tasks": [{**asdict(p), "verdict": p.verdict} for p in result.tasks],
            "agreement": [{**asdict(a), "rate": a.rate, "ci95": list(a.ci95)} for a in result.agreement],
            "correlations": [asdict(c) for c in result.correlations],
            "mmrv_definition": "SimplerEnv (arXiv 2405.05941), items = tasks, in rig-rate units",
            "sim_only_tasks": result.sim_only_tasks, "rig_only_tasks": result.rig_only_tasks}


def plot_sim_real(path: str | Path, result: SimReal, names: tuple[str, str]) -> None:
    """Per-task scatter, rig on x and sim on y, one panel per metric, the diagonal, colour by level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({p.level for p in result.tasks})
    colours = {level: f"C{i}" for i, level in enumerate(levels)}
    fig, axes = plt.subplots(1, len(METRICS), figsize=(15, 6))
    for ax, c in zip(axes, result.correlations, strict=True):
        for k, level in enumerate(levels):
            # tasks on the same spot (rates of few rounds coincide) are one marker sized and labelled by
            # their count, each level nudged sideways so that no level hides another
            spots: dict[tuple[float, float], int] = {}
            for p in result.tasks:
                if p.level == level:
                    spot = (100 * p.rig[c.metric], 100 * p.sim[c.metric])
                    spots[spot] = spots.get(spot, 0) + 1
            nudge = 1.5 * (k - (len(levels) - 1) / 2)
            xs, ys = [x + nudge for x, _ in spots], [y for _, y in spots]
            n_level = sum(spots.values())
            ax.scatter(xs, ys, s=[30 * n ** 0.7 for n in spots.values()], alpha=0.6, color=colours[level],
                       label=f"{level} (n={n_level})", edgecolors="black", linewidths=0.4)
            for x, y, n in zip(xs, ys, spots.values(), strict=True):
                if n > 1:
                    ax.annotate(f"{n}", (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls="--")
        ax.set_xlim(-6, 106)
        ax.set_ylim(-6, 106)
        ax.set_aspect("equal")
        r_txt = "undefined" if c.r is None else f"{c.r:+.2f}"
        ci_txt = "" if c.ci95 is None else f" [{c.ci95[0]:+.2f}, {c.ci95[1]:+.2f}]"
        ax.set_title(f"{c.metric}: r = {r_txt}{ci_txt}\nMMRV = {c.mmrv:.3f}, n = {c.n} tasks", fontsize="medium")
        ax.set_xlabel(f"rig: {Path(names[1]).name} (%)")
        ax.set_ylabel(f"sim: {Path(names[0]).name} (%)")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small")
    total = result.agreement[-1]
    fig.suptitle(f"Sim vs real, per task (rounds averaged): success agreement {100 * total.rate:.0f}% "
                 f"({total.both_succeed + total.both_fail}/{total.n}, 95% CI {100 * total.ci95[0]:.0f}-"
                 f"{100 * total.ci95[1]:.0f}%); r with 95% Fisher-z interval")
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)
