"""OWDA metrics as the benchmark defines them, with bootstrap intervals over anchors.

- atomic / compositional accuracy: exact executable-decision accuracy over instances.
- DI (decision invariance): over task-preserving pairs (0, 1) and (2, 3) of every family, the share
  where both decisions are correct *and* identical after normalisation (sets sorted, sequences as is).
- DS (decision sensitivity): over task-changing pairs (0, 2) and (1, 3), the share where both are
  correct *and* differ (the gold decisions differ by construction; the check is explicit anyway).
- CCS (conditional composition success): over compositional *instances* whose matched atomic instances
  (same anchor, scope and constraint, one per constituent; ``Instance.matched``) are all correct, the
  share that is correct. ``None`` when no instance qualifies. The family-level variant (constituent
  families entirely correct) is reported as an extra, ``ccs_family_level``, and labelled so.
- breakdowns: compositional accuracy by depth K and by type, atomic accuracy by operator.
- ``answers``: how many replies mapped to a decision, were format failures or invalid decisions.

Every figure is a ratio of sums over units (instances or pairs). Its 95 % interval is a percentile
bootstrap that resamples *anchors* with replacement, each with all its units: families on one anchor
share a physical state and often a base task, so they are near-duplicates, not independent draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robofollow_ros.decisions.tasks import CHANGING_PAIRS, COMPOSITION_TYPES, PRESERVING_PAIRS, Family, Instance

BOOTSTRAP_REPS = 1000
Units = list[tuple[str, float, float]]  # (cluster = anchor id, numerator, denominator)


def cluster_ratio(units: Units, rng: np.random.Generator, reps: int) -> dict[str, Any]:
    """sum(num) / sum(den) with a 95 % percentile interval resampling clusters."""
    clusters = sorted({c for c, _, _ in units})
    if not units or sum(d for _, _, d in units) == 0:
        return {"value": None, "ci95": None, "units": int(sum(d for _, _, d in units)), "anchors": len(clusters)}
    index = {c: i for i, c in enumerate(clusters)}
    num = np.zeros(len(clusters))
    den = np.zeros(len(clusters))
    for c, n, d in units:
        num[index[c]] += n
        den[index[c]] += d
    draw = rng.integers(0, len(clusters), size=(reps, len(clusters)))
    dsum = den[draw].sum(axis=1)
    stats = np.divide(num[draw].sum(axis=1), dsum, out=np.full(reps, np.nan), where=dsum > 0)
    lo, hi = np.nanpercentile(stats, [2.5, 97.5])
    return {"value": round(float(num.sum() / den.sum()), 6), "ci95": [round(float(lo), 6), round(float(hi), 6)],
            "units": int(den.sum()), "anchors": len(clusters)}


def compute_metrics(families: Sequence[Family], correct: Mapping[str, bool],
                    decisions: Mapping[str, tuple[str, ...] | None] | None = None,
                    statuses: Mapping[str, str] | None = None, seed: int = 0,
                    reps: int = BOOTSTRAP_REPS) -> dict[str, Any]:
    """Metrics for per-instance ``correct`` (missing ids count as wrong).

    ``decisions`` holds each prediction in normalised form (``prompt.normalised``); without it, two
    correct predictions of one gold decision are taken as identical (they must be).
    """
    rng = np.random.default_rng(seed)

    def ok(i: str) -> bool:
        return bool(correct.get(i, False))

    def same(a: Instance, b: Instance) -> bool:
        if decisions is None:  # a correct prediction is its gold decision
            return a.decision == b.decision
        return decisions.get(a.instance_id) == decisions.get(b.instance_id)

    def accuracy(fams: Sequence[Family]) -> dict[str, Any]:
        return cluster_ratio([(f.anchor_id, float(ok(i.instance_id)), 1.0) for f in fams for i in f.instances], rng,
                             reps)

    def pairs(fams: Sequence[Family], which: tuple[tuple[int, int], ...], identical: bool) -> dict[str, Any]:
        units: Units = []
        for f in fams:
            for a, b in which:
                x, y = f.instances[a], f.instances[b]
                hit = ok(x.instance_id) and ok(y.instance_id) and same(x, y) == identical
                units.append((f.anchor_id, float(hit), 1.0))
        return cluster_ratio(units, rng, reps)

    atomic = [f for f in families if f.kind == "atomic"]
    comp = [f for f in families if f.kind == "compositional"]
    by_id = {f.family_id: f for f in families}
    eligible: Units = [(f.anchor_id, float(ok(i.instance_id)), 1.0) for f in comp for i in f.instances
                       if i.matched and all(ok(m) for m in i.matched)]
    family_level = [f for f in comp if all(c in by_id and all(ok(i.instance_id) for i in by_id[c].instances)
                                           for c in f.constituents)]
    counts = {"ok": 0, "format_failure": 0, "invalid_decision": 0, "missing": 0}
    for f in families:
        for i in f.instances:
            status = (statuses or {}).get(i.instance_id, "ok" if i.instance_id in correct else "missing")
            counts[status] = counts.get(status, 0) + 1
    return {
        "atomic_accuracy": accuracy(atomic),
        "compositional_accuracy": accuracy(comp),
        "decision_invariance": pairs(list(families), PRESERVING_PAIRS, identical=True),
        "decision_sensitivity": pairs(list(families), CHANGING_PAIRS, identical=False),
        "conditional_composition_success": cluster_ratio(eligible, rng, reps),
        "ccs_family_level": {**accuracy(family_level), "note": "extra: over compositional families whose matched "
                             "atomic families are correct in all four instances"},
        "by_k": {str(k): accuracy([f for f in comp if f.depth == k]) for k in sorted({f.depth for f in comp})},
        "by_type": {t: accuracy([f for f in comp if f.type == t]) for t in COMPOSITION_TYPES
                    if any(f.type == t for f in comp)},
        "atomic_by_op": {op: accuracy([f for f in atomic if f.ops == (op,)]) for op in ("N", "E", "Q", "T")
                         if any(f.ops == (op,) for f in atomic)},
        "instances": sum(len(f.instances) for f in families),
        "ccs_eligible_instances": len(eligible),
        "answers": counts,
        "bootstrap": {"reps": reps, "seed": seed, "unit": "anchor", "interval": "percentile 95%",
                      "why": "families on one anchor share its state and often a base task: resampled together"},
    }
