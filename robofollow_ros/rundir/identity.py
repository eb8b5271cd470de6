"""What a resumed run must share with the run it continues: its identity, and the one check of it.

Why: resuming adds to what a directory holds. Results of another selection, model or settings mixed
into it would describe a run that never happened, so every resume compares the settings the
directory recorded with the ones it is asked to continue with and, if any differ, refuses in one
line naming each field that differs.

Each command records its identity in a file it writes anyway, so the check adds nothing on disk:
``robofollow eval`` in ``run.json`` among other fields (``partial``: only the identity's fields are
compared), ``robofollow collect`` in ``meta/robofollow.json`` under ``"collect"``, ``robofollow owda
eval`` as the whole of its ``run.json``. Which fields make the identity is each command's choice;
a field name may be a dotted path into the record (``policy.spec``). The refusal names each field
that differs with both values (long values shortened), so the user can see what to pass instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.errors import RunDirError
from robofollow_ros.rundir.layout import RUN_FILE

_ABSENT = object()
#: What :func:`lookup` gives for a field a record does not hold.
ABSENT = _ABSENT


@dataclass(frozen=True)
class Identity:
    """The settings a resumed run must share, and where its directory records them.

    ``fields``: name -> JSON value. ``record``: the file (relative to the run directory) that holds
    them; ``key``: the object in that file that holds them (None: the file's top level).
    ``partial``: the record holds other fields too (eval's ``run.json``), which are not compared;
    otherwise a recorded field the identity lacks also differs.
    """

    fields: Mapping[str, Any]
    record: str = RUN_FILE
    key: str | None = None
    partial: bool = False

    def __post_init__(self) -> None:
        # Compared with what JSON gives back, where tuples are lists: normalise the same way once.
        object.__setattr__(self, "fields", json.loads(json.dumps(dict(self.fields))))

    def recorded(self, run_dir: Path) -> dict[str, Any] | None:
        """The identity ``run_dir`` recorded; None when its record file does not exist (nothing recorded)."""
        path = Path(run_dir) / self.record
        if not path.is_file():
            return None
        try:
            data = read_json(path)
        except ValueError as exc:
            raise RunDirError(f"--output: {path} is not valid JSON ({exc})") from None
        if self.key is not None and isinstance(data, dict):
            data = data.get(self.key, {})
        if not isinstance(data, dict):
            raise RunDirError(f"--output: {path} does not record a run's settings")
        return data

    def differences(self, recorded: Mapping[str, Any]) -> list[str]:
        """Names of the fields whose recorded value is not this identity's, sorted."""
        names = set(self.fields) if self.partial else set(self.fields) | set(recorded)
        return sorted(n for n in names if lookup(recorded, n) != self.fields.get(n, _ABSENT))

    def describe(self, recorded: Mapping[str, Any], names: list[str]) -> str:
        """``name <recorded> in the run, <this one> now`` for each of ``names``, joined by ``; ``."""
        return "; ".join(f"{name} {show(lookup(recorded, name), self.fields.get(name, _ABSENT))}" for name in names)

    def check(self, run_dir: Path) -> dict[str, Any] | None:
        """The recorded identity (None if none), after refusing one that differs with :class:`RunDirError`."""
        recorded = self.recorded(run_dir)
        if recorded is not None and (differ := self.differences(recorded)):
            raise RunDirError(f"--output: {run_dir} holds another run ({', '.join(differ)} differ: "
                              f"{self.describe(recorded, differ)}); resume it with the settings it was started "
                              "with, or choose another --output")
        return recorded


def lookup(record: Mapping[str, Any], name: str) -> Any:
    """The value at ``name`` in ``record``: a key, or a dotted path through nested objects (``policy.spec``).

    A key that is itself dotted wins over the path; what is not there is the marker ``_ABSENT``."""
    if name in record:
        return record[name]
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _ABSENT
        value = value[part]
    return value


#: Longest rendering of one value in a refusal (a task list can hold hundreds of entries).
_SHOWN_CHARS = 100


def show(recorded: Any, now: Any) -> str:
    """``<recorded> in the run, <now> now``; two long lists are told apart by their length and first difference,
    two long objects by the keys that differ."""
    if isinstance(recorded, list) and isinstance(now, list) and (
            len(_value(recorded, cut=False)) > _SHOWN_CHARS or len(_value(now, cut=False)) > _SHOWN_CHARS):
        first = next((i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
                     min(len(recorded), len(now)))
        where = (f"first difference at #{first + 1}: {_value(_at(recorded, first))} in the run, "
                 f"{_value(_at(now, first))} now")
        return f"({where}) with {len(recorded)} entries in the run, {len(now)} now"
    if isinstance(recorded, Mapping) and isinstance(now, Mapping) and (
            len(_value(recorded, cut=False)) > _SHOWN_CHARS or len(_value(now, cut=False)) > _SHOWN_CHARS):
        keys = sorted(k for k in set(recorded) | set(now) if recorded.get(k, _ABSENT) != now.get(k, _ABSENT))
        if len(keys) == len(set(recorded) | set(now)):  # nothing shared to leave out
            return f"{_value(recorded)} in the run, {_value(now)} now"
        recorded_part = ", ".join(f"{json.dumps(k)}: {_value(recorded.get(k, _ABSENT))}" for k in keys)
        now_part = ", ".join(f"{json.dumps(k)}: {_value(now.get(k, _ABSENT))}" for k in keys)
        return f"(only the keys that differ) {{{recorded_part}}} in the run, {{{now_part}}} now"
    return f"{_value(recorded)} in the run, {_value(now)} now"


def _at(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else _ABSENT


def _value(value: Any, cut: bool = True) -> str:
    if value is _ABSENT:
        return "absent"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN_CHARS or not cut else text[: _SHOWN_CHARS - 3] + "..."
