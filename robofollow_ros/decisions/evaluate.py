"""Run a decider over a suite and write ``predictions.jsonl`` and ``metrics.json``.

Predictions are appended one line per instance as they arrive, so an interrupted run over a slow
endpoint resumes where it stopped (instances already in the file are not asked again). The output
is a ``rundir.RunDirectory``: locked while the run writes it (a second ``owda eval`` into it is
refused), and its ``run.json`` (model, suite seed, counts) is the identity a rerun must share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from robofollow_ros.decisions.errors import ModelError, OwdaError
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.interface import Decider
from robofollow_ros.decisions.metrics import compute_metrics
from robofollow_ros.decisions.prompt import normalised, same_decision
from robofollow_ros.rundir import Identity, RunDirectory, RunDirError
from robofollow_ros.rundir.layout import METRICS_FILE, PREDICTIONS_FILE, RUN_FILE


def _done(path: Path) -> dict[str, dict[str, Any]]:
    """Predictions already recorded, by instance id (a resumed run asks only for the rest)."""
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                out[str(row["id"])] = {"correct": bool(row["correct"]), "status": str(row.get("status", "ok")),
                                       "decision": None if row["decision"] is None else tuple(row["decision"])}
            except (json.JSONDecodeError, KeyError, TypeError):
                raise OwdaError(f"output: {path} line {n} is not a prediction; use a fresh --output") from None
    return out


def _open_output(out_dir: Path, identity: Identity) -> RunDirectory:
    """Resume only the same run: predictions of another model or suite must never be mixed in."""
    try:
        directory = RunDirectory.resume(out_dir, identity=identity, resume_hint="run the same command again")
    except RunDirError as exc:
        raise OwdaError(str(exc)) from None
    if directory.recorded_identity is None:
        with directory.errors():  # OWDA's files keep their ASCII escapes
            directory.write_json(RUN_FILE, identity.fields, ensure_ascii=True)
    return directory


def run_evaluation(suite: Suite, decider: Decider, out_dir: Path, suite_dir: str = "",
                   on_progress: Callable[[int, int], None] | None = None, bootstrap_seed: int = 0,
                   record: Mapping[str, Any] | None = None, controls: tuple[str, ...] | None = None
                   ) -> dict[str, Any]:
    """Ask ``decider`` every instance not answered yet, then score them all.

    ``record``: more of the model's identity for ``run.json`` and ``metrics.json`` (a factory's
    ``{"factory", "kwargs"}``); a resumed run must match it as it must match the model's name.
    A ``ModelError`` (no answer at all) stops the run naming the instance; the answers so far are kept.
    ``controls``: RoboFollow's control names that apply here (``decisions.controls``; None: swap and
    paraphrase, which ask nothing more); ``blank`` asks the empty instruction once per anchor.
    """
    from robofollow_ros.decisions.controls import CONTROLS_FILE, DEFAULT_CONTROLS, blank_answers, control_metrics

    controls = DEFAULT_CONTROLS if controls is None else controls
    record = dict(record or {})
    identity = Identity({"model": decider.name, **record, "suite_seed": suite.seed, "counts": suite.counts()})
    with _open_output(out_dir, identity) as directory:
        rows = _done(directory.path / PREDICTIONS_FILE)
        _ask_the_rest(suite, decider, directory, rows, on_progress)
        metrics = compute_metrics(suite.families, {k: r["correct"] for k, r in rows.items()},
                                  {k: r["decision"] for k, r in rows.items()},
                                  {k: r["status"] for k, r in rows.items()}, seed=bootstrap_seed)
        blank = None
        if "blank" in controls:
            with directory.errors():
                blank = blank_answers(suite.anchors, decider, directory.path / CONTROLS_FILE)
        metrics["controls"] = control_metrics(
            suite.families, {a.anchor_id: a for a in suite.anchors}, {k: r["correct"] for k, r in rows.items()},
            {k: r["decision"] for k, r in rows.items()}, controls, blank, seed=bootstrap_seed)
        result = {"model": decider.name, **record, "suite": suite_dir, "suite_seed": suite.seed,
                  "counts": suite.counts(), "controls": list(controls), "metrics": metrics}
        with directory.errors():
            directory.write_json(METRICS_FILE, result, ensure_ascii=True)
    return result


def _ask_the_rest(suite: Suite, decider: Decider, directory: RunDirectory, rows: dict[str, dict[str, Any]],
                  on_progress: Callable[[int, int], None] | None) -> None:
    """Ask for every instance not in ``rows`` yet, adding each answer to ``rows`` and, at once, to the file."""
    anchors = {a.anchor_id: a for a in suite.anchors}
    total = sum(len(f.instances) for f in suite.families)
    done = len(rows)
    with directory.errors():
        predictions = (directory.path / PREDICTIONS_FILE).open("a")
    with predictions as fh:
        for fam in suite.families:
            anchor = anchors[fam.anchor_id]
            for inst in fam.instances:
                if inst.instance_id in rows:
                    continue
                try:
                    answer = decider.decide(anchor, inst.text)
                except ModelError as exc:
                    raise exc.at(f"instance {inst.instance_id}") from None
                hit = same_decision(anchor, answer.decision, inst.decision)
                decision = normalised(anchor, answer.decision)
                rows[inst.instance_id] = {"correct": hit, "status": answer.status, "decision": decision}
                line = json.dumps({"id": inst.instance_id, "family": fam.family_id, "raw": answer.raw[:2000],
                                   "status": answer.status, "decision": None if decision is None else list(decision),
                                   "gold": list(inst.decision), "correct": hit})
                with directory.errors():
                    fh.write(line + "\n")
                    fh.flush()
                done += 1
                if on_progress is not None:
                    on_progress(done, total)


def load_metrics(out_dir: Path) -> dict[str, Any]:
    path = out_dir / METRICS_FILE
    if not path.is_file():
        raise OwdaError(f"report: {path} not found; run `robofollow owda eval --output {out_dir}` first")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise OwdaError(f"report: {path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or "metrics" not in data:
        raise OwdaError(f"report: {path} has no 'metrics' field")
    return data


def format_report(data: dict[str, Any]) -> str:
    m = data["metrics"]

    def fmt(entry: dict[str, Any]) -> str:
        if entry["value"] is None:
            return "   n/a"
        lo, hi = entry["ci95"]
        return f"{entry['value']:.3f}  [{lo:.3f}, {hi:.3f}]  ({entry['units']} over {entry['anchors']} anchors)"

    lines = [f"model  {data.get('model')}   suite {data.get('suite') or '-'} (seed {data.get('suite_seed')})",
             f"  atomic accuracy                    {fmt(m['atomic_accuracy'])}",
             f"  compositional accuracy             {fmt(m['compositional_accuracy'])}",
             f"  decision invariance (DI)           {fmt(m['decision_invariance'])}",
             f"  decision sensitivity (DS)          {fmt(m['decision_sensitivity'])}",
             f"  conditional composition (CCS)      {fmt(m['conditional_composition_success'])}",
             f"  CCS, family level (extra)          {fmt(m['ccs_family_level'])}"]
    for k, entry in m["by_k"].items():
        lines.append(f"  compositional K={k}                  {fmt(entry)}")
    for t, entry in m["by_type"].items():
        lines.append(f"  compositional {t:<6}               {fmt(entry)}")
    for op, entry in m["atomic_by_op"].items():
        lines.append(f"  atomic {op}                           {fmt(entry)}")
    a = m["answers"]
    lines.append(f"  answers: {a['ok']} mapped to a decision, {a['format_failure']} format failures, "
                 f"{a['invalid_decision']} invalid decisions, {a['missing']} missing")
    from robofollow_ros.decisions.controls import format_controls

    lines += format_controls(m.get("controls", {}))
    lines.append(f"  (95 % intervals: bootstrap over anchors, {m['bootstrap']['reps']} resamples)")
    return "\n".join(lines)
