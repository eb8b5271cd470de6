"""What a decision model is: the interface ``owda eval`` drives, and what a user's decider may return.

A decider is asked one item at a time with what an evaluated model may see and nothing more: the
**anchor** (the physical state: every object's id, shape, colour, size, position and support, and the
candidate decision space -- object ids, or action ids with their ``requires``/``after`` relations) and
the **instruction** text. It never receives the task's spec, its gold decision, the family, the role of
the instance (base, preserving, changing) or the other instances: those are the answer key.

A chat model gets the same two things rendered by ``prompt.user_prompt(anchor, instruction)`` under
``prompt.SYSTEM_PROMPT``; a Python decider that wraps a model of its own can build that very prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from robofollow_ros.decisions.anchors import Anchor

#: ``Answer.status`` values: mapped to a decision, no decision in the reply, a decision outside the space.
STATUSES = ("ok", "format_failure", "invalid_decision")


@dataclass(frozen=True)
class Answer:
    """One answer as it is recorded: the raw reply, the decision it maps to (None: none), and why not."""

    raw: str
    decision: tuple[str, ...] | None
    #: ok | format_failure (no JSON object with a decision) | invalid_decision (outside the decision space)
    status: str = "ok"


class Decider(Protocol):
    """What ``owda eval`` drives (the built-ins, and a user's decider once loaded and checked).

    ``name``: the model as ``run.json`` and ``metrics.json`` name it (its ``--model`` SPEC).
    ``decide(anchor, instruction)``: the decision for one item, as an :class:`Answer`; a model that
    could not answer at all (not a wrong answer) raises ``errors.ModelError``, which stops the run.
    """

    name: str

    def decide(self, anchor: Anchor, instruction: str) -> Answer: ...


#: What a user's ``decide`` may return (``module:function`` deciders); see :class:`UserDecider`.
UserAnswer = Answer | Sequence[str] | str


class UserDecider(Protocol):
    """What a ``module:function`` factory returns: any object with this one method.

    ``decide(anchor, instruction)`` receives its own copy of the anchor and the instruction (see the
    module doc: never the answer key) and returns one of

    * a list or tuple of candidate ids: the decision (a set for object-centric anchors, an ordered
      sequence for action-sequence anchors);
    * a string: a reply in the benchmark's output format (``{"decision": [ids]}``), read exactly as a
      chat model's reply is (``prompt.read_reply``);
    * an :class:`Answer` (what the built-in deciders return), whose decision is checked again.

    Ids outside the decision space, an empty decision or a repeated action are *invalid decisions* and a
    string with no usable JSON object a *format failure*: scored wrong, as for any model. Anything else
    (None, a number, a list holding a non-string, an exception) is not an answer: the run stops with one
    line naming the model and the item. Each call is bounded by ``owda eval --timeout``.
    """

    def decide(self, anchor: Anchor, instruction: str) -> UserAnswer: ...
