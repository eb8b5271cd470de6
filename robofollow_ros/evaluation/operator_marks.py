"""An operator's mark of a trial (success / failure, progress 0-100, a note), kept beside the automatic verdict.

On the rig a person watches every trial; what they say is evidence too, but never the score: a mark is
stored in the trial's results entry as ``operator_mark`` and the scorer's verdict (``completion_ok``)
stays as it was. Where the two disagree (the operator says success and the scorer failed the trial, or
the reverse) the report lists the trial, since one of them is wrong and a person should look
(``robofollow report``). ROS-free: the trial manager parses the ``/robofollow/trial/mark`` String with
:func:`parse_mark`; the report reads results.json with :func:`disagreements`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

VERDICTS = ("success", "failure")
#: Longest note kept (a note is one line for the report, not a log).
MAX_NOTE_CHARS = 500
#: Longest mark message read (the JSON text).
MAX_MARK_CHARS = 2000


def parse_mark(text: str) -> dict[str, Any]:
    """``{"verdict": "success"|"failure", "progress": 0..100, "note": "..."}`` (each optional, at least a
    verdict or a progress); anything else is a one-line ValueError naming the field and the value."""
    if len(text) > MAX_MARK_CHARS:
        raise ValueError(f"mark: {len(text)} characters, more than {MAX_MARK_CHARS}")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"mark: not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise ValueError(f"mark: expected a JSON object, got {type(payload).__name__}")
    unknown = sorted(set(payload) - {"verdict", "progress", "note"})
    if unknown:
        raise ValueError(f"mark: unknown field {unknown[0]!r}; expected verdict, progress, note")
    mark: dict[str, Any] = {}
    if "verdict" in payload:
        if payload["verdict"] not in VERDICTS:
            raise ValueError(f"mark.verdict: {payload['verdict']!r} is not one of {', '.join(VERDICTS)}")
        mark["verdict"] = payload["verdict"]
    if "progress" in payload:
        progress = payload["progress"]
        if isinstance(progress, bool) or not isinstance(progress, int | float) or not 0 <= progress <= 100:
            raise ValueError(f"mark.progress: {progress!r} is not a number from 0 to 100")
        mark["progress"] = float(progress)
    if "note" in payload:
        note = payload["note"]
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS or "\n" in note:
            raise ValueError(f"mark.note: must be one line of at most {MAX_NOTE_CHARS} characters, got {note!r:.60}")
        mark["note"] = note
    if "verdict" not in mark and "progress" not in mark:
        raise ValueError("mark: give a verdict (success or failure) or a progress (0-100)")
    return mark


def disagrees(entry: Mapping[str, Any]) -> bool:
    """The operator's verdict says the opposite of the scorer's (``completion_ok``)."""
    mark = entry.get("operator_mark")
    if not isinstance(mark, Mapping) or mark.get("verdict") not in VERDICTS:
        return False
    return (mark["verdict"] == "success") != bool(entry.get("completion_ok"))


def disagreements(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per trial whose operator mark disagrees with its automatic verdict."""
    out = []
    for entry in trials:
        if not disagrees(entry):
            continue
        mark = entry["operator_mark"]
        automatic = "success" if entry.get("completion_ok") else "failure"
        note = f" — {mark['note']}" if mark.get("note") else ""
        progress = f", progress {mark['progress']:g}%" if "progress" in mark else ""
        out.append(f"{entry.get('task')} round {entry.get('round')}: operator {mark['verdict']}{progress}, "
                   f"automatic {automatic}{note}")
    return out
