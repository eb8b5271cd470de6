"""Errors of the OWDA core; each names the field or constraint at fault so a user can fix it."""

from __future__ import annotations


class OwdaError(ValueError):
    """Base class: bad anchors, tasks, suites or model answers."""


class AnchorError(OwdaError):
    """An anchor's catalog is inconsistent (unknown object, cyclic preconditions, ...)."""


class TaskError(OwdaError):
    """A task is invalid; ``constraint`` names the constraint that failed (N, E, Q, T, scope, family, ...)."""

    def __init__(self, constraint: str, message: str) -> None:
        super().__init__(f"{constraint}: {message}")
        self.constraint = constraint


class ParseError(OwdaError):
    """An instruction or a model answer cannot be mapped onto the decision space."""


class ModelError(OwdaError):
    """The model gave no answer to score: unreachable, timed out, raised, or answered in a form no decider may.

    Not a wrong answer (that is scored): the evaluation stops, keeping the answers so far for a resumed run.
    """

    def at(self, item: str) -> ModelError:
        """The same kind of error, its message prefixed with the item it happened on."""
        return type(self)(f"{item}: {self}")
