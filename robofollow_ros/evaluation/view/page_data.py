"""The numbers ``robofollow view`` embeds in its page: Table 1 of every run with n and intervals (the
``report`` statistics, :mod:`robofollow_ros.evaluation.intervals`), the published models, each trial,
paired comparisons and provenance.

Every figure is computed here, in Python, by the same functions ``robofollow report`` prints with; the page
only lays them out, so the browser and the terminal never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from robofollow_ros.benchmark import LEVELS
from robofollow_ros.benchmark.loader import DATA_DIR
from robofollow_ros.evaluation import comparability
from robofollow_ros.evaluation.compare import compare_runs
from robofollow_ros.evaluation.intervals import FOOTNOTE, footnote
from robofollow_ros.evaluation.report import PRIVILEGED_MARK, is_privileged, protocol_differences, published_table
from robofollow_ros.evaluation.report_views import cell_stats, executed_count, published_cells
from robofollow_ros.evaluation.view.runs import Run, trial_view
from robofollow_ros.rundir.atomic import read_json

#: The mean row's intervals (``report``'s footnote says the same).
MEAN_NOTE = ("mean row: unweighted mean over the scenes present; IS, ES resampled within each scene, CR Wilson "
             "with n summed")
#: run.json fields the provenance panel shows first (the whole record follows).
PROVENANCE_KEYS = ("status", "started_utc", "finished_utc", "model", "policy", "privileged", "execution", "max_steps",
                   "actions_per_step", "stepper", "render", "rig", "seeds", "expected_trials", "git", "code_sha256",
                   "package", "python", "reference", "resumes", "stopped_early")


def published() -> list[dict[str, Any]]:
    """Every published model: id, name, family and its Table 1 cells with the protocol's n (no intervals)."""
    models = read_json(DATA_DIR / "results.json")["models"]
    return [{"id": m["id"], "name": m["name"], "family": m.get("family", ""),
             "cells": published_cells(published_table(m["id"]))} for m in models]


def true_trials(trials: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The trials of the true instructions: an instruction control's (``eval --controls``) are not Table 1's."""
    return [t for t in trials if not t.get("control")]


def controls_data(trials: Sequence[Mapping[str, Any]], n_resamples: int, seed: int) -> dict[str, Any] | None:
    """The run's instruction controls as ``report RUN --controls`` computes them (``control_stats``): the report
    and its rows (control, cell, measure, n, value and interval); None for a run without control trials."""
    from robofollow_ros.evaluation.control_stats import control_report, control_rows

    report = control_report(trials, n_resamples, seed)
    if not report:
        return None
    return {"report": report, "rows": control_rows(report), "footnote": CONTROLS_NOTE}


#: What the controls table's intervals are (``control_stats.format_controls`` says the same).
CONTROLS_NOTE = ("95 % intervals: IS, ES, CR differences (true − control) paired bootstrap over tasks (pairs of a task "
                 "together; * = every resample equal, so the Wilson bound at the mean); shares (CR_true, CR_control, "
                 "follows_new, still_old, same_verdict) Wilson; McNemar exact two-sided on the discordant pairs. "
                 "n = pairs (a control trial with its true trial: same task, layout and seed)")


def run_data(key: str, run: Run, n_resamples: int, seed: int) -> dict[str, Any]:
    """One run: label, marks, Table 1 cells with n and intervals (true-instruction trials only), its trials (the
    controls' too, each naming its control and partner), its controls' statistics and its provenance."""
    privileged = is_privileged(run.record)
    true = true_trials(run.trials)
    differences = protocol_differences(run.record, true)
    record = run.record or {}
    return {
        "key": key, "label": run.label, "dir": str(run.path.resolve()),
        "tags": [t for t, on in (("privileged", privileged),
                                 ("subset", any(d.startswith("a subset") for d in differences))) if on],
        "marks": ([PRIVILEGED_MARK] if privileged else []) + differences,
        "cells": cell_stats(true, n_resamples, seed),
        "trials_total": len(true), "executed": executed_count(true),
        "control_trials": len(run.trials) - len(true),
        "trials": [trial_view(run.path, t) for t in run.trials],
        "controls": controls_data(run.trials, n_resamples, seed),
        "provenance": {k: record[k] for k in PROVENANCE_KEYS if k in record},
        "record": run.record, "summary": run.summary,
    }


def _paired(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any], list[Any]]:
    """Trials of A and B paired on (task, round, seed), in A's order; and the unpaired of each."""
    def key(t: Mapping[str, Any]) -> tuple[str, Any, Any]:
        return str(t["task"]), t.get("round"), t.get("seed")

    kb = {key(t): t for t in b}
    pairs = [(t, kb[key(t)]) for t in a if key(t) in kb]
    ka = {key(t) for t in a}
    return pairs, [t for t in a if key(t) not in kb], [t for t in b if key(t) not in ka]


def comparison(ka: str, a: Run, kb: str, b: Run, n_resamples: int, seed: int) -> dict[str, Any]:
    """Run B against run A on the trials both ran (same task, round and seed): per cell and over all pairs, the
    ``report --compare-runs`` statistics; each pair's trial ids; what is unpaired; why they are not comparable."""
    from robofollow_ros.evaluation.report_views import trial_name

    pairs, only_a, only_b = _paired(true_trials(a.trials), true_trials(b.trials))
    cells = compare_runs([x for x, _ in pairs], [y for _, y in pairs], n_resamples=n_resamples, seed=seed,
                         names=(a.label, b.label)) if pairs else []
    traits = [comparability.traits(r.label, r.record, true_trials(r.trials)) for r in (a, b)]
    return {"a": ka, "b": kb, "cells": [asdict(c) for c in cells],
            "pairs": [{"a": trial_name(x), "b": trial_name(y)} for x, y in pairs],
            "only_a": [trial_name(t) for t in only_a], "only_b": [trial_name(t) for t in only_b],
            "warnings": comparability.warnings(traits),
            "footnote": (f"{footnote('IS Δ, ES Δ', 'the mean paired difference')}; complete A/B: Wilson on "
                         "completed/pairs; McNemar: exact, on the discordant pairs")}


def page_data(runs: Sequence[Run], n_resamples: int, seed: int) -> dict[str, Any]:
    """Everything the page shows; run keys ``r1``, ``r2`` … in the order given. With two runs or more, each
    later run is compared with the first."""
    keys = [f"r{i}" for i in range(1, len(runs) + 1)]
    # Each run's own marks (privileged, subset) are printed with it; here only what sets runs apart.
    traits = [replace(comparability.traits(r.label, r.record, true_trials(r.trials)), privileged=False, subset=None)
              for r in runs]
    out = [run_data(key, r, n_resamples, seed) for key, r in zip(keys, runs, strict=True)]
    labels = [r.label for r in runs]
    for data, run in zip(out, runs, strict=True):
        if labels.count(run.label) > 1:  # two folders of one name: their full paths set them apart
            data["label"] = f"{run.label} [{run.path.resolve()}]"
    return {
        "levels": list(LEVELS), "footnote": f"{FOOTNOTE}; {n_resamples} resamples, seed {seed}; {MEAN_NOTE}",
        "bootstrap": n_resamples, "seed": seed,
        "runs": out,
        "published": published(),
        "comparisons": [comparison(keys[0], runs[0], k, r, n_resamples, seed)
                        for k, r in zip(keys[1:], runs[1:], strict=True)],
        "not_comparable": comparability.warnings(traits) if len(runs) > 1 else [],
    }
