"""The operator's redo: which trial runs again next, under which id, and what is kept of what it supersedes.

Two ways in (``trial_manager_node``): a redo of the trial under way ends it (an ``operator-abort`` that
is never recorded) and runs it again at once; a redo of a trial already recorded (the last one, or one
named by its trial id on ``/robofollow/trial/redo_trial``) runs it again before the plan goes on and,
when the new attempt is recorded, replaces its results entry. Either way the new entry carries every
earlier attempt in ``superseded_attempts`` (each with its ``attempt``, ``trial_id`` and
``superseded_by_redo: true``), and results.json / SQLite / summaries hold one entry per (task, round):
the newest attempt's. Attempt n > 1 runs as ``<trial id>_attempt<n>`` so that every node sees a new
trial (its own reset and recording).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from robofollow_ros.evaluation.selection import TrialKey

_ATTEMPT = re.compile(r"_attempt\d+$")


@dataclass
class Redo:
    """One trial to run again before the plan goes on."""

    key: TrialKey
    #: The trial is recorded: the new attempt replaces its results entry.
    replaces: bool
    #: The new attempt's number and what it supersedes; 0: read from the recorded entry when it begins
    #: (so that a mark added to it meanwhile is kept).
    attempt: int = 0
    superseded: list[dict[str, Any]] = field(default_factory=list)


def attempt_id(key: TrialKey, attempt: int) -> str:
    """The id attempt ``attempt`` of ``key`` runs under on ``/robofollow/trial``."""
    return key.trial_id + (f"_attempt{attempt}" if attempt > 1 else "")


def strip_attempt(trial_id: str) -> str:
    """``trial_id`` without its ``_attempt<n>`` suffix."""
    return _ATTEMPT.sub("", trial_id.strip())


def find_trial(keys: Iterable[TrialKey], trial_id: str) -> TrialKey | None:
    """The trial of ``keys`` that ``trial_id`` names (with or without an ``_attempt<n>`` suffix)."""
    base = _ATTEMPT.sub("", trial_id.strip())
    return next((k for k in keys if k.trial_id == base), None)


def superseding(entry: dict[str, Any], key: TrialKey) -> tuple[int, list[dict[str, Any]]]:
    """A recorded ``entry`` run again: the new attempt's number, and the attempts it supersedes (the
    entry's own earlier ones, then the entry itself)."""
    old = dict(entry)
    earlier = list(old.pop("superseded_attempts", None) or [])
    attempt = int(old.get("attempt", 1))
    return attempt + 1, [*earlier, dict(old, attempt=attempt, superseded_by_redo=True,
                                        trial_id=attempt_id(key, attempt))]
