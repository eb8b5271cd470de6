"""The suite's table: per operator and composition type, how many valid distinct family seeds there were
(for compositions: found before the quota was met), how many families, instances and distinct
instructions (per anchor) the suite holds, and how many seeds the validator's checks turned down
while generating, and why.

Duplicates are counted here independently of the generator's own bookkeeping: two families on one
anchor are the same when they hold the same set of sentences (so a family and its mirror collide).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from robofollow_ros.decisions.generator import Suite


def suite_table(suite: Suite) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    sentence_sets: Counter[tuple[str, frozenset[str]]] = Counter()
    for f in suite.families:
        label = f.type
        row = rows.setdefault(label, {"kind": f.kind, "type": label, "families": 0, "instances": 0,
                                      "texts": set(), "duplicates": 0})
        row["families"] += 1
        row["instances"] += len(f.instances)
        row["texts"].update((f.anchor_id, i.text) for i in f.instances)
        sentence_sets[(f.anchor_id, frozenset(i.text for i in f.instances))] += 1
    for f in suite.families:
        if sentence_sets[(f.anchor_id, frozenset(i.text for i in f.instances))] > 1:
            rows[f.type]["duplicates"] += 1
    order = ["N", "E", "Q", "T", "E+N", "E+Q", "N+Q", "E+N+Q"]
    out = []
    for label in sorted(set(rows) | set(suite.rejections), key=lambda t: order.index(t) if t in order else 99):
        row = rows.get(label, {"kind": "compositional" if "+" in label else "atomic", "type": label, "families": 0,
                               "instances": 0, "texts": set(), "duplicates": 0})
        reasons = suite.rejections.get(label, {})
        out.append({"kind": row["kind"], "type": label, "valid_seeds": suite.available.get(label, 0),
                    "families": row["families"], "instances": row["instances"],
                    "distinct_sentences": len(row["texts"]), "duplicate_families": row["duplicates"],
                    "rejected": sum(reasons.values()), "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))})
    return out


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| operator / type | valid distinct seeds | families | instances | distinct instructions | "
             "duplicate families | seeds rejected | why (count) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        why = "; ".join(f"{k} ({v})" for k, v in r["reasons"].items()) or "-"
        lines.append(f"| {r['type']} | {r['valid_seeds']} | {r['families']} | {r['instances']} | "
                     f"{r['distinct_sentences']} | {r['duplicate_families']} | {r['rejected']} | {why} |")
    return "\n".join(lines)
