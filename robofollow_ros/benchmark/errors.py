"""Errors of the benchmark registry, each naming where the bad value came from."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RegistryError(ValueError):
    """A data file holds a record the benchmark cannot use; the message names file, record and field."""

    def __init__(self, file: str, record: str, field: str, problem: str) -> None:
        self.file, self.record, self.field = file, record, field
        super().__init__(f"{file}: record {record!r}: field {field!r}: {problem}")


class UnknownTaskError(KeyError):
    """No task has this id; the message suggests the closest ids."""

    def __init__(self, task_id: str, known: Iterable[str], kind: str = "task") -> None:
        self.task_id = task_id
        self.suggestions = difflib.get_close_matches(task_id, list(known), n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        self.message = f"unknown {kind} id {task_id!r}{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.message
