"""``robofollow report --rank RUN...``: a Bradley-Terry leaderboard of runs from paired trials.

Why Bradley-Terry on pairs: two runs that saw the same task with the same seed faced the same layout
and the same difficulty, so "which one did better on this trial" is free of the protocol's mix of easy
and hard tasks (RoboArena ranks policies the same way). The model: P(i beats j) = σ(θ_i − θ_j).

A comparison: trials of two runs with the same (task, seed). The winner is the run that completed the
task; when both completed or both failed, the higher intent score (IS), then the higher execution score
(ES) wins -- the stage-wise partial credit separates two failures that got different distances. Only a
trial that ties on all three (e.g. both scored zero) counts as half a win to each side.

Fit: Newton's method on the log-posterior with backtracking, batched over bootstrap resamples. Prior:
every run plays ``prior`` virtual games against a fixed reference of strength 0, won half and lost half,
which keeps a run that won every comparison finite and barely moves the others (1 virtual game against
hundreds of real ones). Strengths are reported centred (mean θ = 0).

Intervals: percentile bootstrap resampling *tasks* (all seeds and all run pairs of a task go together,
since a task's trials share its difficulty), refitting each resample.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.scoring.summary import wilson_interval

#: Virtual games per run against the reference (half won, half lost): the weak prior.
PRIOR_GAMES = 1.0
#: Newton stops when every |gradient| is below this, relative to the number of games.
_TOL = 1e-9
_MAX_ITER = 200
#: Bootstrap resamples fitted at a time (memory: chunk x runs x runs floats).
_CHUNK = 1000


@dataclass(frozen=True)
class RankedRun:
    """One run of the leaderboard."""
    rank: int
    model: str  # the run's policy SPEC (run.json), else its directory name
    run_dir: str
    strength: float  # centred log-strength θ
    ci95: tuple[float, float]
    comparisons: int  # paired comparisons this run took part in
    wins: float  # won comparisons (ties count half)
    trials: int
    completed: int
    completion_ci95: tuple[float, float]  # Wilson, per trial


@dataclass(frozen=True)
class Ranking:
    runs: list[RankedRun]
    tasks: int  # tasks with at least one comparison (the bootstrap's units)
    comparisons: int
    unpaired: dict[str, int] = field(default_factory=dict)  # run -> its trials no other run shares
    n_resamples: int = 0


def outcome(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Score of trial ``a`` against trial ``b``: 1 (a wins), 0 (b wins) or 0.5 (tie on completion, IS and ES)."""
    key_a = (bool(a["completion_ok"]), float(a["intent_score"]), float(a["exec_score"]))
    key_b = (bool(b["completion_ok"]), float(b["intent_score"]), float(b["exec_score"]))
    return 1.0 if key_a > key_b else 0.0 if key_a < key_b else 0.5


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _objective(theta: np.ndarray, wins: np.ndarray, prior: float) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    return ((wins * _log_sigmoid(diff)).sum(axis=(1, 2))
            + 0.5 * prior * (_log_sigmoid(theta) + _log_sigmoid(-theta)).sum(axis=1))


def fit_bradley_terry(wins: np.ndarray, prior: float = PRIOR_GAMES) -> np.ndarray:
    """Posterior-mode log-strengths, centred, of ``wins[..., i, j]`` (games i won against j; halves allowed).

    ``wins`` is (k, k) or a batch (B, k, k); the result is (k,) or (B, k)."""
    w = np.asarray(wins, dtype=np.float64)
    single = w.ndim == 2
    if single:
        w = w[None]
    if w.ndim != 3 or w.shape[1] != w.shape[2] or w.shape[1] < 2:
        raise ValueError(f"wins: need a (k, k) matrix of k >= 2 runs, got shape {np.shape(wins)}")
    if prior <= 0:
        raise ValueError(f"prior: must be > 0 (it keeps an unbeaten run finite), got {prior}")
    batch, k = w.shape[0], w.shape[1]
    w = w * (1.0 - np.eye(k))
    games = w + w.transpose(0, 2, 1)
    theta = np.zeros((batch, k))
    tol = _TOL * max(1.0, float(games.sum(axis=(1, 2)).max()))  # relative: float sums of many games
    for _ in range(_MAX_ITER):
        diff = theta[:, :, None] - theta[:, None, :]
        s = 1.0 / (1.0 + np.exp(-diff))
        s0 = 1.0 / (1.0 + np.exp(-theta))
        grad = (w - games * s).sum(axis=2) + 0.5 * prior * (1.0 - 2.0 * s0)
        if np.abs(grad).max() < tol:
            break
        curv = games * s * (1.0 - s)  # the negative Hessian: Laplacian of the games plus the prior's diagonal
        neg_hess = -curv
        idx = np.arange(k)
        neg_hess[:, idx, idx] = curv.sum(axis=2) + prior * s0 * (1.0 - s0)
        step = np.linalg.solve(neg_hess, grad[..., None])[..., 0]
        base = _objective(theta, w, prior)
        slope = (grad * step).sum(axis=1)
        t = np.ones(batch)
        for _ in range(40):  # backtracking (Armijo), per resample
            trial = theta + t[:, None] * step
            bad = _objective(trial, w, prior) < base + 1e-4 * t * slope - 1e-12 * np.abs(base)
            if not bad.any():
                break
            t = np.where(bad, t / 2.0, t)
        theta = theta + t[:, None] * step
    theta = theta - theta.mean(axis=1, keepdims=True)
    return theta[0] if single else theta


def load_run(run_dir: Path, flag: str) -> tuple[str, list[dict[str, Any]]]:
    """(model label, trials) of a run directory: the label is run.json's policy SPEC, else its ``model``,
    else the directory name. One line naming ``flag`` when it is not a run."""
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise ValueError(f"{flag}: {run_dir} has no results.json")
    try:
        trials = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{flag}: {path} is not readable JSON ({exc})") from None
    needed = ("task", "seed", "completion_ok", "intent_score", "exec_score")
    if not isinstance(trials, list) or not all(isinstance(t, dict) and all(f in t for f in needed) for t in trials):
        raise ValueError(f"{flag}: {path} is not a list of RoboFollow trials with {', '.join(needed)}")
    trials = [t for t in trials if not t.get("control")]  # instruction controls: robofollow report RUN --controls
    label = Path(run_dir).name
    try:
        run = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        run = None
    if isinstance(run, dict):
        policy = run.get("policy")
        spec = policy.get("spec") if isinstance(policy, dict) else None
        label = str(spec or run.get("model") or label)
    return label, trials


def _keyed(trials: Sequence[Mapping[str, Any]], name: str) -> dict[tuple[str, int], Mapping[str, Any]]:
    out: dict[tuple[str, int], Mapping[str, Any]] = {}
    for t in trials:
        key = (str(t["task"]), int(t["seed"]))
        if key in out:
            raise ValueError(f"--rank: {name} holds trial {key[0]} seed {key[1]} twice")
        out[key] = t
    return out


def task_win_matrices(runs: Sequence[Sequence[Mapping[str, Any]]], names: Sequence[str]
                      ) -> tuple[list[str], np.ndarray, dict[str, int]]:
    """Per task, the (k, k) matrix of wins from every pair of runs on every shared seed.

    Returns (task ids, array (tasks, k, k), unpaired trial count per run name)."""
    keyed = [_keyed(r, n) for r, n in zip(runs, names, strict=True)]
    k = len(runs)
    per_task: dict[str, np.ndarray] = {}
    paired: list[set[tuple[str, int]]] = [set() for _ in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            for key in keyed[i].keys() & keyed[j].keys():
                score = outcome(keyed[i][key], keyed[j][key])
                m = per_task.setdefault(key[0], np.zeros((k, k)))
                m[i, j] += score
                m[j, i] += 1.0 - score
                paired[i].add(key)
                paired[j].add(key)
    unpaired = {n: len(keyed[i]) - len(paired[i]) for i, n in enumerate(names) if len(keyed[i]) > len(paired[i])}
    tasks = sorted(per_task)
    stack = np.stack([per_task[t] for t in tasks]) if tasks else np.zeros((0, k, k))
    return tasks, stack, unpaired


def _connected(games: np.ndarray) -> bool:
    k = games.shape[0]
    seen, todo = {0}, [0]
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(games[i] > 0):
            if int(j) not in seen:
                seen.add(int(j))
                todo.append(int(j))
    return len(seen) == k


def bootstrap_strengths(per_task: np.ndarray, n_resamples: int, seed: int, prior: float = PRIOR_GAMES) -> np.ndarray:
    """(n_resamples, k) centred strengths, each fitted on tasks drawn with replacement."""
    rng = np.random.default_rng(seed)
    n_tasks = per_task.shape[0]
    out = np.empty((n_resamples, per_task.shape[1]))
    flat = per_task.reshape(n_tasks, -1)
    for start in range(0, n_resamples, _CHUNK):
        stop = min(n_resamples, start + _CHUNK)
        picks = rng.integers(0, n_tasks, size=(stop - start, n_tasks))
        counts = np.stack([np.bincount(row, minlength=n_tasks) for row in picks]).astype(np.float64)
        wins = (counts @ flat).reshape(stop - start, *per_task.shape[1:])
        out[start:stop] = fit_bradley_terry(wins, prior)
    return out


def rank_runs(runs: Sequence[Sequence[Mapping[str, Any]]], names: Sequence[str], run_dirs: Sequence[str], *,
              n_resamples: int = 10_000, seed: int = 0, prior: float = PRIOR_GAMES) -> Ranking:
    """The leaderboard of ``runs`` (each a results.json list), strongest first."""
    if len(runs) < 2:
        raise ValueError(f"--rank: need at least two runs to compare, got {len(runs)}")
    tasks, per_task, unpaired = task_win_matrices(runs, names)
    if not tasks:
        raise ValueError("--rank: the runs share no (task, seed) trial, so there is nothing to compare")
    total = per_task.sum(axis=0)
    games = total + total.T
    if not _connected(games):
        raise ValueError("--rank: the runs fall into groups that share no (task, seed) trial; "
                         "strengths across groups would come from the prior alone")
    theta = fit_bradley_terry(total, prior)
    boot = bootstrap_strengths(per_task, n_resamples, seed, prior)
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
    order = sorted(range(len(runs)), key=lambda i: -theta[i])
    out = []
    for rank, i in enumerate(order, start=1):
        done = sum(1 for t in runs[i] if bool(t["completion_ok"]))
        out.append(RankedRun(rank=rank, model=names[i], run_dir=str(run_dirs[i]), strength=float(theta[i]),
                             ci95=(float(lo[i]), float(hi[i])), comparisons=round(float(games[i].sum())),
                             wins=float(total[i].sum()), trials=len(runs[i]), completed=done,
                             completion_ci95=wilson_interval(done, len(runs[i]))))
    return Ranking(runs=out, tasks=len(tasks), comparisons=round(float(total.sum())), unpaired=unpaired,
                   n_resamples=n_resamples)


def unique_names(labels: Sequence[str], run_dirs: Sequence[Path]) -> list[str]:
    """Labels, with the directory name added where two runs share one (the same SPEC run twice)."""
    return [f"{label} ({Path(d).name})" if labels.count(label) > 1 else label
            for label, d in zip(labels, run_dirs, strict=True)]


def published_rows(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """The published models' completion rates (percent): per level (mean over scenes) and overall
    (mean of the 16 scene x level cells), highest first; from the benchmark's results.json."""
    from robofollow_ros.benchmark.loader import DATA_DIR
    from robofollow_ros.rundir.atomic import read_json

    data = read_json((data_dir or DATA_DIR) / "results.json")
    rows = []
    for m in data["models"]:
        levels = [float(cell["CR"]) for cell in m["mean"]]
        cells = [float(cell["CR"]) for scene in m["scenes"].values() for cell in scene]
        rows.append({"model": m["name"], "id": m["id"], "family": m.get("family", ""),
                     "cr_levels": levels, "cr": sum(cells) / len(cells)})
    return sorted(rows, key=lambda r: -r["cr"])


def format_ranking(ranking: Ranking, published: Sequence[Mapping[str, Any]],
                   marks: Mapping[str, Sequence[str]] | None = None) -> str:
    """The leaderboard, then the published rows for reference (not in the fit); ``marks`` tags a run's row
    (``[privileged, subset]``: comparability.RunTraits.tags)."""
    marks = marks or {}
    label = {r.model: f"{r.model} [{', '.join(marks[r.model])}]" if marks.get(r.model) else r.model
             for r in ranking.runs}
    width = max([len(v) for v in label.values()] + [5])
    head = (f"{'rank':>4}  {'model':<{width}}  {'strength θ':>10}  {'95% interval':>17}  {'n comparisons':>13}"
            f"  {'wins':>7}  completion % (n trials, 95% CI)")
    lines = [f"Bradley-Terry ranking: {ranking.comparisons} paired comparisons on {ranking.tasks} tasks "
             f"(pairs by task and seed; win = completion, ties broken by IS then ES, full ties half; "
             f"intervals: {ranking.n_resamples} task-bootstrap resamples)", head, "-" * len(head)]
    for r in ranking.runs:
        cr = 100.0 * r.completed / r.trials if r.trials else 0.0
        cr_txt = (f"{cr:5.1f} (n={r.trials}, {100 * r.completion_ci95[0]:.1f}-{100 * r.completion_ci95[1]:.1f})")
        lines.append(f"{r.rank:>4}  {label[r.model]:<{width}}  {r.strength:>+10.3f}  "
                     f"{f'{r.ci95[0]:+.3f}..{r.ci95[1]:+.3f}':>17}  {r.comparisons:>13}  {r.wins:>7.1f}  {cr_txt}")
    lines.append("θ: log-strength, mean 0; P(A beats B) = 1 / (1 + exp(θ_B − θ_A))")
    for name, n in ranking.unpaired.items():
        lines.append(f"note: {n} trial(s) of {name} share no (task, seed) with another run and are not in the fit")
    if published:
        lines += ["", "published models, for reference only: NOT in the fit (Bradley-Terry needs paired trials; "
                      "these are completion rates of the whole protocol, mean of the 16 scene x level cells; "
                      "the runs' column above is per trial over their own trials)"]
        pw = max(len(p["model"]) for p in published)
        lines.append(f"{'model':<{pw}}  {'family':<8}  {'CR %':>6}  " + "  ".join(f"{f'L{i}':>6}" for i in range(4)))
        for p in published:
            lines.append(f"{p['model']:<{pw}}  {p['family']:<8}  {p['cr']:>6.1f}  "
                         + "  ".join(f"{v:>6.1f}" for v in p["cr_levels"]))
    return "\n".join(lines)


def ranking_json(ranking: Ranking, published: Sequence[Mapping[str, Any]],
                 marks: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    return {"method": "bradley-terry", "win": "completion, then intent score, then exec score; full ties half",
            "prior_games": PRIOR_GAMES, "bootstrap": {"unit": "task", "resamples": ranking.n_resamples},
            "tasks": ranking.tasks, "comparisons": ranking.comparisons, "unpaired": ranking.unpaired,
            "runs": [{**r.__dict__, "marks": list((marks or {}).get(r.model, []))} for r in ranking.runs],
            "published": {"in_fit": False, "rows": list(published)}}
