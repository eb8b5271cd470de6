"""Stage records and the rules that combine stages into totals: gates, completion, messages.

Each stage is all-or-nothing, separately for intent and execution; gates zero later stages when
earlier ones are not full (and, as the official evaluator does, replace that stage's reason with
the gate's, whether or not the stage had passed on its own); totals are plain sums. The helpers
here are scene-independent so each scene module only says which stages it has and how each is
decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robofollow_ros.scoring.thresholds import FULL_EPS, OK_FRACTION, PICKUP_COMPLETE


@dataclass
class Phase:
    """One scored stage (the evaluator's ``PhaseResult``): scores are 0 or ``max_score``."""

    name: str
    intent_score: float
    intent_reason: str
    exec_score: float
    exec_reason: str
    max_score: float

    @classmethod
    def verdict(cls, name: str, max_score: float, intent_ok: bool, intent_reason: str, exec_ok: bool,
                exec_reason: str) -> Phase:
        return cls(name, max_score if intent_ok else 0.0, intent_reason, max_score if exec_ok else 0.0,
                   exec_reason, max_score)

    @classmethod
    def failed(cls, name: str, max_score: float, reason: str) -> Phase:
        """Zero for intent and execution, one reason for both."""
        return cls(name, 0.0, reason, 0.0, reason, max_score)

    @property
    def intent_full(self) -> bool:
        return self.intent_score + FULL_EPS >= self.max_score

    @property
    def exec_full(self) -> bool:
        return self.exec_score + FULL_EPS >= self.max_score

    def gate_intent(self, reason: str) -> None:
        self.intent_score, self.intent_reason = 0.0, reason

    def gate_exec(self, reason: str) -> None:
        self.exec_score, self.exec_reason = 0.0, reason

    def as_result(self) -> dict[str, Any]:
        """RoboFollow's ``phases[]`` entry."""
        return {"phase": self.name, "intent_score": self.intent_score, "intent_reason": self.intent_reason,
                "exec_score": self.exec_score, "exec_reason": self.exec_reason, "max_score": self.max_score}


def gate_three_stage(phases: list[Phase]) -> list[Phase]:
    """Gates of the three-stage evaluators (S1-S4): later stages need the earlier ones full."""
    s1, s2, s3 = phases
    if not s1.intent_full:
        s2.gate_intent("gated: stage1 intent not full")
    if not s1.intent_full or not s2.intent_full:
        s3.gate_intent("gated: prior intent not full")
    if not (s1.intent_full and s1.exec_full and s2.intent_full):
        s2.gate_exec("gated: stage1 intent/exec or stage2 intent incomplete")
    if not (s1.intent_full and s1.exec_full and s2.intent_full and s2.exec_full and s3.intent_full):
        s3.gate_exec("gated: prior intent/exec not full")
    return phases


def gate_pickup(phases: list[Phase]) -> list[Phase]:
    """Gates of the two-stage pickup evaluators: the finish stage needs stage 1 full."""
    s1, s3 = phases
    if not s1.intent_full:
        s3.gate_intent("gated: stage1 intent not full")
    if not (s1.intent_full and s1.exec_full and s3.intent_full):
        s3.gate_exec("gated: stage1 intent/exec or stage3 intent incomplete")
    return phases


def totals(phases: list[Phase]) -> tuple[float, float, float]:
    """(intent, exec, max) sums, added in stage order as the evaluator's ``sum()`` does."""
    return (sum(p.intent_score for p in phases), sum(p.exec_score for p in phases),
            sum(p.max_score for p in phases))


def is_pickup_like(action: str) -> bool:
    action = action.strip().lower()
    return action in ("pickup", "sequence_pickups") or action.startswith("pickup")


#: Precedence rule 4: the first existing stage whose execution > 0 decides completion.
COMPLETION_STAGES = ("stage2_stack", "stage2_unstack_slot", "stage2_place_bowl", "stage2_push")


def completion_ok(action: str, intent: float, exec_: float, phases: list[Phase],
                  final_target_ok: bool | None = None, retry_ok: bool | None = None) -> bool:
    """The evaluator's ``is_complete``: pickups by score, then the final-layout signals, then a stage."""
    if is_pickup_like(action):
        return intent >= PICKUP_COMPLETE and exec_ >= PICKUP_COMPLETE
    if final_target_ok is not None:
        return bool(final_target_ok)
    if retry_ok is not None:
        return bool(retry_ok)
    by_name = {p.name: p.exec_score for p in phases}
    if "stage3_orientation" in by_name:
        return by_name["stage3_orientation"] > 0.0
    for name in COMPLETION_STAGES:
        if name in by_name:
            return by_name[name] > 0.0
    return False


def full_success(phases: list[Phase], intent: float, exec_: float) -> bool:
    """The evaluator's ``is_full_success`` (Scene 4 ``conditional_full_success``)."""
    total = sum(p.max_score for p in phases)
    return bool(phases) and all(p.intent_full and p.exec_full for p in phases) \
        and intent + FULL_EPS >= total and exec_ + FULL_EPS >= total


def ok_flags(intent: float, exec_: float, max_total: float) -> tuple[bool, bool]:
    return intent >= max_total * OK_FRACTION, exec_ >= max_total * OK_FRACTION


def score_message(kind: str, score: float, ok: bool, max_total: float) -> str:
    """``intent_msg`` / ``exec_msg`` before any bonus or penalty note: "ok" or "intent_score=0.40/1.00"."""
    return "ok" if ok else f"{kind}_score={score:.2f}/{max_total:.2f}"
