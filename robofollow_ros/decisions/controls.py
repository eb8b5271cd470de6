"""OWDA under RoboFollow's control names (``evaluation.controls``): one vocabulary for both benchmarks.

RoboFollow asks whether a policy *uses* the words by running a trial again with another instruction;
OWDA's families already hold such rewrites, so the same names map onto them:

* ``paraphrase`` (another wording, the same task; behaviour should not change) = OWDA's task-preserving
  pairs (0, 1) and (2, 3): **decision invariance** (both correct and identical), and ``same_decision``
  (identical, right or wrong: RoboFollow's "same verdict").
* ``swap`` (another task on the same layout; does the behaviour follow the new words?) = OWDA's
  task-changing pairs (0, 2) and (1, 3): **decision sensitivity** (both correct and different), and per
  changed instance ``follows_new`` (its own gold decision) and ``keeps_old`` (the gold decision of the
  instruction it was changed from: RoboFollow's "still does the old task"), and per pair ``unchanged``
  (the same decision for both wordings, right or wrong: the words changed, the decision did not).
* ``blank`` (the empty instruction; scored against the true task) = the decider asked ``""`` once per
  anchor, its decision scored against every instance's gold: ``accuracy_blank`` and **language reliance**
  (accuracy with the words minus accuracy without, per instance). The only control that asks the decider
  anything more (one call per anchor, kept in ``controls.jsonl`` so a rerun resumes).
* ``shuffled`` does not apply: an OWDA instruction names its own anchor's objects and actions; another
  anchor's words do not describe a decision on this one.

Intervals are the suite's: percentile bootstrap over anchors (``metrics.cluster_ratio``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.errors import ModelError, OwdaError
from robofollow_ros.decisions.interface import Decider
from robofollow_ros.decisions.metrics import BOOTSTRAP_REPS, Units, cluster_ratio
from robofollow_ros.decisions.prompt import normalised, same_decision
from robofollow_ros.decisions.tasks import CHANGING_PAIRS, PRESERVING_PAIRS, Family

#: The control names that apply to OWDA, in RoboFollow's order; the default asks nothing more of the decider.
OWDA_CONTROLS = ("blank", "swap", "paraphrase")
DEFAULT_CONTROLS = ("swap", "paraphrase")
CONTROLS_FILE = "controls.jsonl"
BLANK = ""
#: What each name measures here (metrics.json's ``controls.<name>.maps_to``).
MAPS_TO = {"paraphrase": "task-preserving pairs (0,1), (2,3): decision invariance",
           "swap": "task-changing pairs (0,2), (1,3): decision sensitivity",
           "blank": "the empty instruction, one call per anchor, scored against every instance's gold decision"}


def parse_owda_controls(value: str | None) -> tuple[str, ...]:
    """``owda eval --controls blank,swap``: names of :data:`OWDA_CONTROLS`, each once; ``shuffled`` is refused
    with why; empty or None: :data:`DEFAULT_CONTROLS`."""
    if value is None:
        return DEFAULT_CONTROLS
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        return DEFAULT_CONTROLS
    for name in names:
        if name == "shuffled":
            raise OwdaError("--controls: shuffled does not apply to OWDA (an instruction names its own anchor's "
                            "objects; another anchor's words describe no decision here); use blank, swap, paraphrase")
        if name not in OWDA_CONTROLS:
            raise OwdaError(f"--controls: {name!r} is not one of {', '.join(OWDA_CONTROLS)}")
        if names.count(name) > 1:
            raise OwdaError(f"--controls: {name} given twice")
    return tuple(c for c in OWDA_CONTROLS if c in names)


def blank_answers(anchors: Sequence[Anchor], decider: Decider, path: Path,
                  write: Callable[[Callable[[], None]], None] | None = None) -> dict[str, tuple[str, ...] | None]:
    """The decider's decision for the empty instruction on each anchor (normalised; None: no decision), asked
    only for anchors ``path`` does not hold yet, each appended at once."""
    done: dict[str, tuple[str, ...] | None] = {}
    if path.is_file():
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if row["control"] == "blank":
                    done[str(row["anchor"])] = None if row["decision"] is None else tuple(row["decision"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise OwdaError(f"output: {path} line {n} is not a control answer; use a fresh --output") from None
    todo = [a for a in anchors if a.anchor_id not in done]
    if not todo:
        return done
    with path.open("a") as fh:
        for anchor in todo:
            try:
                answer = decider.decide(anchor, BLANK)
            except ModelError as exc:
                raise exc.at(f"control blank on anchor {anchor.anchor_id}") from None
            decision = normalised(anchor, answer.decision)
            done[anchor.anchor_id] = decision
            line = json.dumps({"control": "blank", "anchor": anchor.anchor_id, "instruction": BLANK,
                               "raw": answer.raw[:2000], "status": answer.status,
                               "decision": None if decision is None else list(decision)})
            fh.write(line + "\n")
            fh.flush()
    return done


def control_metrics(families: Sequence[Family], anchors: Mapping[str, Anchor], correct: Mapping[str, bool],
                    decisions: Mapping[str, tuple[str, ...] | None], controls: Sequence[str],
                    blank: Mapping[str, tuple[str, ...] | None] | None = None, seed: int = 0,
                    reps: int = BOOTSTRAP_REPS) -> dict[str, Any]:
    """metrics.json's ``controls``: one entry per control asked for (see the module docstring)."""
    rng = np.random.default_rng(seed + 1)

    def ok(i: str) -> bool:
        return bool(correct.get(i, False))

    def ratio(units: Units) -> dict[str, Any]:
        return cluster_ratio(units, rng, reps)

    out: dict[str, Any] = {}
    if "paraphrase" in controls:
        both: Units = []
        same: Units = []
        for f in families:
            for a, b in PRESERVING_PAIRS:
                x, y = f.instances[a].instance_id, f.instances[b].instance_id
                identical = decisions.get(x) is not None and decisions.get(x) == decisions.get(y)
                both.append((f.anchor_id, float(ok(x) and ok(y) and identical), 1.0))
                same.append((f.anchor_id, float(identical), 1.0))
        out["paraphrase"] = {"maps_to": MAPS_TO["paraphrase"], "decision_invariance": ratio(both),
                             "same_decision": ratio(same)}
    if "swap" in controls:
        sensitive: Units = []
        new: Units = []
        old: Units = []
        unchanged: Units = []
        for f in families:
            anchor = anchors[f.anchor_id]
            for a, b in CHANGING_PAIRS:
                before, after = f.instances[a], f.instances[b]
                differ = decisions.get(before.instance_id) != decisions.get(after.instance_id)
                sensitive.append((f.anchor_id, float(ok(before.instance_id) and ok(after.instance_id) and differ), 1.0))
                new.append((f.anchor_id, float(ok(after.instance_id)), 1.0))
                kept = same_decision(anchor, decisions.get(after.instance_id), before.decision)
                old.append((f.anchor_id, float(kept), 1.0))
                unchanged.append((f.anchor_id, float(decisions.get(after.instance_id) is not None and not differ), 1.0))
        out["swap"] = {"maps_to": MAPS_TO["swap"], "decision_sensitivity": ratio(sensitive),
                       "follows_new": ratio(new), "keeps_old": ratio(old), "unchanged": ratio(unchanged)}
    if "blank" in controls:
        if blank is None:
            raise OwdaError("controls: blank asked for but no blank answers given")
        with_words: Units = []
        without: Units = []
        reliance: Units = []
        for f in families:
            anchor = anchors[f.anchor_id]
            for inst in f.instances:
                hit = same_decision(anchor, blank.get(f.anchor_id), inst.decision)
                with_words.append((f.anchor_id, float(ok(inst.instance_id)), 1.0))
                without.append((f.anchor_id, float(hit), 1.0))
                reliance.append((f.anchor_id, float(ok(inst.instance_id)) - float(hit), 1.0))
        out["blank"] = {"maps_to": MAPS_TO["blank"], "accuracy": ratio(with_words), "accuracy_blank": ratio(without),
                        "language_reliance": ratio(reliance),
                        "anchors_asked": len(blank),
                        "no_decision": sum(1 for a in {f.anchor_id for f in families} if blank.get(a) is None)}
    return out


def format_controls(controls: Mapping[str, Any]) -> list[str]:
    """The report's lines for ``controls`` (empty when none was asked for)."""

    def fmt(entry: Mapping[str, Any]) -> str:
        if entry["value"] is None:
            return "   n/a"
        lo, hi = entry["ci95"]
        return f"{entry['value']:+.3f}  [{lo:+.3f}, {hi:+.3f}]  (n {entry['units']}, {entry['anchors']} anchors)"

    lines = []
    rows = {"blank": (("language_reliance", "reliance: accuracy - blank"), ("accuracy_blank", "accuracy, blank")),
            "swap": (("decision_sensitivity", "decision sensitivity"), ("follows_new", "follows the new words"),
                     ("keeps_old", "keeps the old decision"), ("unchanged", "decision unchanged")),
            "paraphrase": (("decision_invariance", "decision invariance"), ("same_decision", "same decision"))}
    for name in OWDA_CONTROLS:
        if name in controls:
            lines.append(f"  control {name} ({controls[name]['maps_to']})")
            lines += [f"    {label:<30} {fmt(controls[name][key])}" for key, label in rows[name]]
    return lines


__all__ = ["CONTROLS_FILE", "DEFAULT_CONTROLS", "MAPS_TO", "OWDA_CONTROLS", "blank_answers", "control_metrics",
           "format_controls", "parse_owda_controls"]
