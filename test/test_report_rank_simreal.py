"""``robofollow report --rank`` and ``--sim-real`` on constructed runs: the Bradley-Terry fit against known
strengths and a closed-form two-run mode, the task bootstrap's coverage, Pearson r / Fisher z / MMRV against
the formulas computed here independently, agreement counts, and the CLI with its scatter PNG."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.ranking import bootstrap_strengths, fit_bradley_terry, outcome, rank_runs
from robofollow_ros.evaluation.simreal import fisher_interval, mmrv, pearson, sim_vs_real
from said import error_lines
from test_cli_tasks import ROBOFOLLOW

TASKS = default_registry().eval_tasks()


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _trial(task: Any, seed: int, done: bool, is_: float | None = None, es: float | None = None) -> dict[str, Any]:
    score = float(done) if is_ is None else is_
    return {"task": task.task_id, "scene": task.scene, "level_tag": task.level, "seed": seed, "round": seed,
            "completion_ok": done, "intent_score": score, "exec_score": score if es is None else es}


def _write_run(path: Path, trials: list[dict[str, Any]], spec: str | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps(trials), encoding="utf-8")
    if spec:
        (path / "run.json").write_text(json.dumps({"policy": {"spec": spec, "kwargs": {}}}), encoding="utf-8")
    return path


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "report", *args], capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- ranking


def test_a_win_is_completion_then_intent_then_exec_and_a_full_tie_is_half() -> None:
    t = TASKS[0]
    assert outcome(_trial(t, 1, True, 0.4, 0.4), _trial(t, 1, False, 1.0, 1.0)) == 1.0  # completion first
    assert outcome(_trial(t, 1, False, 0.3, 0.0), _trial(t, 1, False, 0.7, 0.0)) == 0.0  # then IS
    assert outcome(_trial(t, 1, False, 0.7, 0.4), _trial(t, 1, False, 0.7, 0.3)) == 1.0  # then ES
    assert outcome(_trial(t, 1, False, 0.0, 0.0), _trial(t, 1, False, 0.0, 0.0)) == 0.5  # both zero


def test_fit_recovers_known_strengths_from_their_expected_win_counts() -> None:
    theta = np.array([1.0, 0.3, -0.2, -1.1])  # already centred
    games = 100_000.0  # so many that the one-game prior moves nothing at 1e-3
    wins = np.array([[games * _sigmoid(a - b) if i != j else 0.0 for j, b in enumerate(theta)]
                     for i, a in enumerate(theta)])
    fitted = fit_bradley_terry(wins)
    assert fitted == pytest.approx(theta, abs=1e-3)
    assert list(np.argsort(-fitted)) == [0, 1, 2, 3]


def test_a_run_that_always_wins_stays_finite_at_the_closed_form_posterior_mode() -> None:
    n = 50
    fitted = fit_bradley_terry(np.array([[0.0, n], [0.0, 0.0]]))
    # With θ_A = x = −θ_B the log-posterior's derivative is 2n(1 − σ(2x)) + (1 − 2σ(x)) (one virtual game
    # per run against θ = 0, half won). Its root, by bisection:
    lo, hi = 0.0, 20.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 2 * n * (1 - _sigmoid(2 * mid)) + 1 - 2 * _sigmoid(mid) > 0 else (lo, mid)
    assert np.all(np.isfinite(fitted))
    assert fitted == pytest.approx([lo, -lo], abs=1e-7)
    assert 2.0 < lo < 4.0


def test_three_runs_with_known_completion_rates_are_ranked_in_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rates = {"model-a": 0.85, "model-b": 0.5, "model-c": 0.15}
    tasks = TASKS[:40]
    runs = {name: [_trial(t, s, bool(rng.random() < p)) for t in tasks for s in (1, 2, 3)]
            for name, p in rates.items()}
    dirs = [_write_run(tmp_path / name, trials, spec=f"baseline:{name}") for name, trials in runs.items()]
    ranking = rank_runs(list(runs.values()), list(runs), [str(d) for d in dirs], n_resamples=500)
    assert [r.model for r in ranking.runs] == ["model-a", "model-b", "model-c"]
    assert ranking.comparisons == 3 * 40 * 3 and ranking.tasks == 40
    assert all(r.comparisons == 2 * 40 * 3 for r in ranking.runs)
    assert ranking.runs[0].ci95[0] > ranking.runs[2].ci95[1]  # A and C are separated
    for r in ranking.runs:
        assert r.ci95[0] <= r.strength <= r.ci95[1]
    # the CLI: labels from run.json's policy SPEC, the published rows beside and out of the fit
    proc = _report("--rank", *map(str, reversed(dirs)), "--bootstrap", "300")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"])]
    assert [row[1] for row in rows] == ["baseline:model-a", "baseline:model-b", "baseline:model-c"]
    assert "NOT in the fit" in proc.stdout and "π₀.₅" in proc.stdout
    js = json.loads(_report("--rank", *map(str, dirs), "--bootstrap", "300", "--json").stdout)
    assert js["published"]["in_fit"] is False and len(js["published"]["rows"]) >= 2
    assert [r["model"] for r in js["runs"]] == ["baseline:model-a", "baseline:model-b", "baseline:model-c"]


def test_task_bootstrap_interval_covers_the_true_strengths() -> None:
    rng = np.random.default_rng(11)
    theta = np.array([0.6, 0.0, -0.6])
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    covered = checked = 0
    for k in range(60):
        per_task = np.zeros((60, 3, 3))
        for i in range(3):
            for j in range(i + 1, 3):
                won = rng.random(60) < p[i, j]
                per_task[:, i, j], per_task[:, j, i] = won, ~won
        boot = bootstrap_strengths(per_task, 400, seed=k)
        lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
        covered += int(((lo <= theta) & (theta <= hi)).sum())
        checked += 3
    assert 0.88 <= covered / checked <= 0.995


def test_rank_refuses_runs_that_share_nothing_or_one_run(tmp_path: Path) -> None:
    a = _write_run(tmp_path / "a", [_trial(TASKS[0], 1, True)])
    b = _write_run(tmp_path / "b", [_trial(TASKS[1], 1, False)])
    for args, phrase in (((str(a), str(b)), "share no (task, seed)"), ((str(a),), "at least two runs")):
        proc = _report("--rank", *args, "--bootstrap", "10")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(error_lines(proc.stderr)) == 1 and phrase in proc.stderr


# ---------------------------------------------------------------- sim vs real


def test_pearson_and_fisher_interval_match_the_formulas() -> None:
    x = [0.1, 0.4, 0.35, 0.8, 0.9, 0.2, 0.55]
    y = [0.0, 0.5, 0.2, 0.7, 1.0, 0.3, 0.4]
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    r = sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    assert pearson(x, y) == pytest.approx(r, rel=1e-12)
    z, se = 0.5 * math.log((1 + r) / (1 - r)), 1 / math.sqrt(n - 3)
    lo, hi = fisher_interval(r, n) or (math.nan, math.nan)
    assert (lo, hi) == (pytest.approx(math.tanh(z - 1.959964 * se)), pytest.approx(math.tanh(z + 1.959964 * se)))
    assert pearson([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None  # constant side: undefined, not 0 or nan
    assert fisher_interval(0.5, 3) is None


def _mmrv_by_hand(sim: list[float], real: list[float]) -> float:
    worst = []
    for i in range(len(sim)):
        gaps = [abs(real[i] - real[j]) for j in range(len(sim)) if (sim[i] > sim[j]) != (real[i] > real[j])]
        worst.append(max(gaps, default=0.0))
    return sum(worst) / len(worst)


def test_mmrv_matches_simplerenv_definition() -> None:
    # sim orders 0 > 1 > 2, real orders 1 > 2 > 0: violations (0,1) gap 0.4, (0,2) gap 0.2, (1,2) none
    # -> per item max: 0.4, 0.4, 0.2 -> MMRV = 1.0 / 3
    assert mmrv([0.9, 0.5, 0.1], [0.2, 0.6, 0.4]) == pytest.approx(1.0 / 3)
    assert mmrv([0.1, 0.5, 0.9], [0.0, 0.3, 1.0]) == 0.0  # same order: no violation
    rng = np.random.default_rng(5)
    for _ in range(20):
        sim, real = rng.integers(0, 4, 12) / 3, rng.integers(0, 4, 12) / 3  # ties, as per-task rates have
        assert mmrv(sim, real) == pytest.approx(_mmrv_by_hand(list(sim), list(real)))


def _sim_rig() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    l0 = [t for t in TASKS if t.level == "L0"][:4]
    l1 = [t for t in TASKS if t.level == "L1"][:3]
    # (sim rounds, rig rounds) completion per task
    plan = [((1, 1, 1), (1,)), ((1, 1, 0), (0,)), ((0, 0, 0), (0,)), ((0, 1, 0), (1,)),  # L0: S S / S F / F F / F S
            ((1, 1, 1), (1,)), ((0, 0, 1), (0,)), ((1, 0, 1), (1,))]  # L1: S S / F F / S S
    sim, rig = [], []
    for task, (s, r) in zip(l0 + l1, plan, strict=True):
        sim += [_trial(task, k, bool(v)) for k, v in enumerate(s, start=1)]
        rig += [_trial(task, k, bool(v)) for k, v in enumerate(r, start=1)]
    rig.append(_trial(TASKS[-1], 1, True))  # a task the sim did not run: left out, counted
    return sim, rig


def test_agreement_counts_per_task_and_level() -> None:
    sim, rig = _sim_rig()
    result = sim_vs_real(sim, rig)
    rows = {a.group: a for a in result.agreement}
    assert (rows["L0"].n, rows["L0"].both_succeed, rows["L0"].both_fail, rows["L0"].disagree) == (4, 1, 1, 2)
    assert (rows["L0"].sim_only, rows["L0"].rig_only) == (1, 1)
    assert (rows["L1"].n, rows["L1"].both_succeed, rows["L1"].both_fail, rows["L1"].disagree) == (3, 2, 1, 0)
    assert (rows["all"].n, rows["all"].rate) == (7, pytest.approx(5 / 7))
    assert result.rig_only_tasks == [TASKS[-1].task_id] and result.sim_only_tasks == []
    cr = next(c for c in result.correlations if c.metric == "completion")
    planned: dict[str, list[float]] = {t["task"]: [] for t in sim}
    for t in sim:
        planned[t["task"]].append(float(t["completion_ok"]))
    sim_rates = [sum(planned[p.task]) / len(planned[p.task]) for p in result.tasks]
    rig_rates = [float(next(t["completion_ok"] for t in rig if t["task"] == p.task)) for p in result.tasks]
    assert [p.sim["completion"] for p in result.tasks] == pytest.approx(sim_rates)
    assert sorted(sim_rates) == pytest.approx(sorted([1, 2 / 3, 0, 1 / 3, 1, 1 / 3, 2 / 3]))
    assert cr.mmrv == pytest.approx(_mmrv_by_hand(sim_rates, rig_rates))
    assert cr.r == pytest.approx(float(np.corrcoef(sim_rates, rig_rates)[0, 1]))


def test_sim_real_cli_writes_the_scatter_and_json(tmp_path: Path) -> None:
    sim, rig = _sim_rig()
    s, r = _write_run(tmp_path / "sim", sim), _write_run(tmp_path / "rig", rig)
    png = tmp_path / "scatter.png"
    proc = _report("--sim-real", str(s), str(r), "--png", str(png), "--json")
    assert proc.returncode == 0, proc.stderr
    js = json.loads(proc.stdout)
    assert js["png"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(str(png)).shape[1] > 1000  # three panels drawn
    assert {a["group"]: a["disagree"] for a in js["agreement"]} == {"L0": 2, "L1": 0, "all": 2}
    assert [c["metric"] for c in js["correlations"]] == ["completion", "intent", "exec"]
    text = _report("--sim-real", str(s), str(r), "--no-plot")
    assert text.returncode == 0 and "MMRV" in text.stdout and "1 only in RIG" in text.stdout
    bad = _report("--sim-real", str(s), str(tmp_path / "nowhere"), "--no-plot")
    assert bad.returncode == 2 and len(error_lines(bad.stderr)) == 1 and "no results.json" in bad.stderr
