"""OWDA metrics with bootstrap intervals over families.

- atomic / compositional accuracy: exact executable-decision accuracy over instances.
- DI (decision invariance): over task-preserving pairs (0, 1) and (2, 3) of every family, both correct
  (their gold decisions are identical, so both correct = identical after normalisation).
- DS (decision sensitivity): over task-changing pairs (0, 2) and (1, 3), both correct (their gold
  decisions differ, so both correct = they differ as the changed constraint requires).
- CCS (conditional composition success): over compositional families whose matched atomic
  constituent families are all fully correct (all four instances), the fraction of compositional
  instances that are correct. ``None`` when no family qualifies.
- breakdowns: compositional accuracy by depth K and by type, atomic accuracy by operator.

Every figure is a ratio of per-family sums; its 95 % interval resamples that metric's families with
replacement (percentile bootstrap, seeded, so a report is reproducible).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robofollow_ros.decisions.tasks import CHANGING_PAIRS, COMPOSITION_TYPES, PRESERVING_PAIRS, Family

BOOTSTRAP_REPS = 1000


def _ratio(num: Sequence[float], den: Sequence[float], rng: np.random.Generator, reps: int) -> dict[str, Any]:
    n = np.asarray(num, dtype=float)
    d = np.asarray(den, dtype=float)
    if n.size == 0 or d.sum() == 0:
        return {"value": None, "ci95": None, "families": int(n.size)}
    idx = rng.integers(0, n.size, size=(reps, n.size))
    dsum = d[idx].sum(axis=1)
    stats = np.divide(n[idx].sum(axis=1), dsum, out=np.full(reps, np.nan), where=dsum > 0)
    lo, hi = np.nanpercentile(stats, [2.5, 97.5])
    return {"value": round(float(n.sum() / d.sum()), 6), "ci95": [round(float(lo), 6), round(float(hi), 6)],
            "families": int(n.size)}


def compute_metrics(families: Sequence[Family], correct: Mapping[str, bool], seed: int = 0,
                    reps: int = BOOTSTRAP_REPS) -> dict[str, Any]:
    """Metrics for the predictions ``correct`` (instance id -> exact match); missing ids count as wrong."""
    rng = np.random.default_rng(seed)

    def ok(fam: Family) -> list[bool]:
        return [bool(correct.get(i.instance_id, False)) for i in fam.instances]

    def pair_hits(fam: Family, pairs: tuple[tuple[int, int], ...]) -> int:
        c = ok(fam)
        return sum(c[a] and c[b] for a, b in pairs)

    def acc(fams: list[Family]) -> dict[str, Any]:
        return _ratio([sum(ok(f)) for f in fams], [len(f.instances) for f in fams], rng, reps)

    def pairs(fams: list[Family], which: tuple[tuple[int, int], ...]) -> dict[str, Any]:
        return _ratio([pair_hits(f, which) for f in fams], [len(which)] * len(fams), rng, reps)

    atomic = [f for f in families if f.kind == "atomic"]
    comp = [f for f in families if f.kind == "compositional"]
    by_id = {f.family_id: f for f in families}

    def solved(fid: str) -> bool:
        return fid in by_id and all(ok(by_id[fid]))

    eligible = [f for f in comp if all(solved(c) for c in f.constituents)]
    metrics: dict[str, Any] = {
        "atomic_accuracy": acc(atomic),
        "compositional_accuracy": acc(comp),
        "decision_invariance": pairs(list(families), PRESERVING_PAIRS),
        "decision_sensitivity": pairs(list(families), CHANGING_PAIRS),
        "conditional_composition_success": acc(eligible),
        "by_k": {str(k): acc([f for f in comp if f.depth == k]) for k in sorted({f.depth for f in comp})},
        "by_type": {t: acc([f for f in comp if f.type == t]) for t in COMPOSITION_TYPES
                    if any(f.type == t for f in comp)},
        "atomic_by_op": {op: acc([f for f in atomic if f.ops == (op,)]) for op in ("N", "E", "Q", "T")
                         if any(f.ops == (op,) for f in atomic)},
        "instances": sum(len(f.instances) for f in families),
        "ccs_eligible_families": len(eligible),
        "bootstrap": {"reps": reps, "seed": seed, "unit": "family", "interval": "percentile 95%"},
    }
    return metrics
