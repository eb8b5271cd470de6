"""What ``robofollow view`` reads of a run directory, and each trial as the page shows it.

A run is a folder with a ``results.json`` (a list of RoboFollow trials); ``run.json`` (provenance),
``summary.json``, ``mcap/<trial>.mcap`` (recordings: the stage timeline) and ``videos/<trial>.mp4`` / ``.png``
(the video and its contact sheet) are used where they exist. Anything else is refused with one line
(:class:`ViewInputError`), before the site is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.operator_marks import disagrees
from robofollow_ros.evaluation.report import SCENE_LABEL
from robofollow_ros.evaluation.report_views import could_not_execute, failed_stage, trial_name
from robofollow_ros.evaluation.view.timeline import read_timeline
from robofollow_ros.rundir.layout import RECORDINGS_DIR, RESULTS_FILE, RUN_FILE, SUMMARY_FILE, VIDEOS_DIR

#: Fields every trial of results.json must have for the view.
NEEDED = ("task", "seed", "scene", "level_tag", "intent_score", "exec_score", "completion_ok")


class ViewInputError(ValueError):
    """A RUN or --out that the view cannot use; the message is one line naming it."""


@dataclass
class Run:
    """One run directory, read."""

    path: Path
    trials: list[dict[str, Any]]
    record: dict[str, Any] | None  # run.json
    summary: dict[str, Any] | None  # summary.json

    @property
    def label(self) -> str:
        """The directory's name, and the policy SPEC run.json names when it differs."""
        policy = (self.record or {}).get("policy")
        spec = policy.get("spec") if isinstance(policy, Mapping) else None
        name = self.path.resolve().name
        return f"{name} ({spec})" if spec and spec != name else name


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ViewInputError(f"RUN: {path} is not readable JSON ({exc})") from None


def load_run(path: Path) -> Run:
    """The run in ``path``; one-line :class:`ViewInputError` when it is not a run directory."""
    path = Path(path)
    if not path.is_dir():
        raise ViewInputError(f"RUN: {path} is not a folder")
    if not (path / RESULTS_FILE).is_file():
        raise ViewInputError(f"RUN: {path} is not a run directory (no {RESULTS_FILE})")
    trials = _json(path / RESULTS_FILE)
    if not isinstance(trials, list) or not all(isinstance(t, dict) and all(f in t for f in NEEDED) for t in trials):
        raise ViewInputError(f"RUN: {path / RESULTS_FILE} is not a list of RoboFollow trials with "
                             f"{', '.join(NEEDED)}")
    if not trials:
        raise ViewInputError(f"RUN: {path / RESULTS_FILE} holds no trial")
    record = _json(path / RUN_FILE) if (path / RUN_FILE).is_file() else None
    summary = _json(path / SUMMARY_FILE) if (path / SUMMARY_FILE).is_file() else None
    return Run(path, trials, record if isinstance(record, dict) else None,
               summary if isinstance(summary, dict) else None)


def _phase(p: Mapping[str, Any]) -> dict[str, Any]:
    top = float(p.get("max_score", 0.0))
    return {"name": str(p.get("phase")), "max": top, "intent": float(p.get("intent_score", 0.0)),
            "exec": float(p.get("exec_score", 0.0)), "intent_reason": str(p.get("intent_reason", "")),
            "exec_reason": str(p.get("exec_reason", ""))}


def _attempt(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An earlier attempt a redo superseded, as the history lists it."""
    return {"attempt": entry.get("attempt"), "trial_id": entry.get("trial_id"),
            "IS": 100.0 * float(entry.get("intent_score", 0.0)), "ES": 100.0 * float(entry.get("exec_score", 0.0)),
            "complete": bool(entry.get("completion_ok")), "not_executed": could_not_execute(entry),
            "mark": entry.get("operator_mark") if isinstance(entry.get("operator_mark"), Mapping) else None}


def media(run_dir: Path, entry: Mapping[str, Any]) -> dict[str, Path]:
    """The trial's files that exist: ``video`` (MP4), ``sheet`` (contact sheet PNG), ``mcap`` (recording)."""
    name = trial_name(entry)
    candidates = {"video": [run_dir / VIDEOS_DIR / f"{name}.mp4"], "sheet": [run_dir / VIDEOS_DIR / f"{name}.png"],
                  "mcap": [run_dir / RECORDINGS_DIR / f"{name}.mcap"]}
    if entry.get("video"):
        candidates["video"].append(run_dir / str(entry["video"]))
    return {kind: next(p for p in paths if p.is_file()) for kind, paths in candidates.items()
            if any(p.is_file() for p in paths)}


def trial_view(run_dir: Path, entry: Mapping[str, Any]) -> dict[str, Any]:
    """One trial as the page shows it (scores in percent; files as absolute paths, made relative by the site)."""
    not_run = could_not_execute(entry)
    stage, reason = failed_stage(entry)
    complete = bool(entry["completion_ok"]) and not_run is None
    files = media(run_dir, entry)
    timeline, timeline_error = None, None
    if "mcap" in files:
        try:
            timeline = read_timeline(files["mcap"])
        except ValueError as exc:
            timeline_error = str(exc)
    mark = entry.get("operator_mark")
    return {
        "id": trial_name(entry), "task": entry["task"], "scene": SCENE_LABEL.get(entry["scene"], entry["scene"]),
        "level": entry["level_tag"], "round": entry.get("round"), "seed": entry.get("seed"),
        "instruction": entry.get("instruction", ""),
        # an instruction control (``eval --controls``): its name, the true trial it pairs with (same task, layout and
        # seed), the task whose instruction it borrowed and the task that scored it (a swap's other task)
        "control": str(entry.get("control") or "") or None,
        "partner": str(entry["partner"]) if entry.get("control") and entry.get("partner") else None,
        "control_source_task": entry.get("control_source_task"), "scored_task": entry.get("scored_task"),
        "original_verdict": entry.get("original_verdict") if isinstance(entry.get("original_verdict"), Mapping)
        else None,
        "IS": 100.0 * float(entry["intent_score"]), "ES": 100.0 * float(entry["exec_score"]),
        "intent_ok": bool(entry.get("intent_ok")), "exec_ok": bool(entry.get("exec_ok")), "complete": complete,
        "verdict": "not executed" if not_run else ("complete" if complete else "not complete"),
        "fault": not_run, "failed_stage": None if complete else ("not executed" if not_run else stage),
        "reason": None if complete else (not_run or reason),
        "phases": [_phase(p) for p in entry.get("phases") or [] if isinstance(p, Mapping)],
        "mark": mark if isinstance(mark, Mapping) else None, "mark_disagrees": disagrees(entry),
        "attempt": entry.get("attempt", 1),
        "attempts": [_attempt(a) for a in entry.get("superseded_attempts") or [] if isinstance(a, Mapping)],
        "policy_steps": entry.get("policy_steps"), "wall_s": entry.get("wall_s"),
        "files": {kind: str(p) for kind, p in files.items()}, "timeline": timeline, "timeline_error": timeline_error,
    }
