"""Stage records and the rules that combine stages into totals: gates, bonuses, penalties, completion.

Each stage is all-or-nothing, separately for intent and execution; gates zero later stages when
earlier ones are not full; totals are sums. The helpers here are scene-independent so each scene
module only says which stages it has and how each is decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robofollow_ros.scoring.thresholds import BONUS, BONUS_BELOW, FULL_EPS, OK_FRACTION, PICKUP_COMPLETE


@dataclass
class Phase:
    """One scored stage: binary intent and execution (0 or max) with the reason for each."""

    name: str
    max_score: float
    intent_ok: bool
    intent_reason: str
    exec_ok: bool
    exec_reason: str
    intent_gated: bool = False
    exec_gated: bool = False
    #: Execution points removed after the gates (Scene 4 support-lift penalty).
    exec_deduction: float = 0.0

    @property
    def intent(self) -> float:
        return self.max_score if self.intent_ok and not self.intent_gated else 0.0

    @property
    def exec(self) -> float:
        raw = self.max_score if self.exec_ok and not self.exec_gated else 0.0
        return max(0.0, raw - self.exec_deduction)

    @property
    def intent_full(self) -> bool:
        return self.intent + FULL_EPS >= self.max_score

    @property
    def exec_full(self) -> bool:
        return self.exec + FULL_EPS >= self.max_score

    def gate_intent(self, why: str) -> None:
        """Zero intent because an earlier stage is not full; a stage failing on its own keeps its reason."""
        if self.intent_ok and not self.intent_gated:
            self.intent_gated = True
            self.intent_reason = f"gated: {why}"

    def gate_exec(self, why: str) -> None:
        if self.exec_ok and not self.exec_gated:
            self.exec_gated = True
            self.exec_reason = f"gated: {why}"

    def as_result(self) -> dict[str, Any]:
        """RoboFollow's ``phases[]`` entry."""
        return {"phase": self.name, "intent_score": self.intent, "intent_reason": self.intent_reason,
                "exec_score": self.exec, "exec_reason": self.exec_reason, "max_score": self.max_score}


def gate_three_stage(phases: list[Phase]) -> None:
    """Gates of the three-stage evaluators (S1-S4): later stages need the earlier ones full."""
    s1, s2, s3 = phases
    if not s1.intent_full:
        s2.gate_intent(f"{s1.name} intent not full")
    if not (s1.intent_full and s2.intent_full):
        s3.gate_intent(f"{s1.name} and {s2.name} intent not full")
    if not (s1.intent_full and s1.exec_full and s2.intent_full):
        s2.gate_exec(f"{s1.name} intent/exec or {s2.name} intent not full")
    if not (s1.intent_full and s1.exec_full and s2.intent_full and s2.exec_full and s3.intent_full):
        s3.gate_exec(f"{s1.name}, {s2.name} or {s3.name} intent not full")


def gate_pickup(phases: list[Phase]) -> None:
    """Gates of the two-stage pickup evaluator: the finish stage needs stage 1 full."""
    s1, s3 = phases
    if not s1.intent_full:
        s3.gate_intent(f"{s1.name} intent not full")
    if not (s1.intent_full and s1.exec_full and s3.intent_full):
        s3.gate_exec(f"{s1.name} intent/exec or {s3.name} intent not full")


def add_bonus(score: float, earned: bool, cap: float | None = None) -> tuple[float, float]:
    """(+0.3 if the final layout is right and the score is below 0.5, new score), optionally capped."""
    if not earned or score >= BONUS_BELOW:
        return 0.0, score
    new = score + BONUS
    if cap is not None:
        new = min(cap, new)
    return new - score, new


def is_pickup_like(action: str) -> bool:
    return action in ("pickup", "sequence_pickups") or action.startswith("pickup")


#: Precedence rule 4: the first existing stage whose execution > 0 decides completion.
COMPLETION_STAGES = ("stage3_orientation", "stage2_stack", "stage2_unstack_slot", "stage2_place_bowl", "stage2_push")


def completion_ok(action: str, intent: float, exec_: float, phases: list[Phase],
                  final_target_ok: bool | None, retry_ok: bool | None) -> bool:
    """The completion rule's precedence (spec d, "Completion rule")."""
    if is_pickup_like(action):
        return intent >= PICKUP_COMPLETE and exec_ >= PICKUP_COMPLETE
    if final_target_ok is not None:
        return final_target_ok
    if retry_ok is not None:
        return retry_ok
    by_name = {p.name: p for p in phases}
    for name in COMPLETION_STAGES:
        if name in by_name:
            return by_name[name].exec > 0
    return False


def ok_flags(intent: float, exec_: float, max_total: float = 1.0) -> tuple[bool, bool]:
    return intent >= OK_FRACTION * max_total, exec_ >= OK_FRACTION * max_total


def messages(phases: list[Phase]) -> tuple[str, str]:
    """``intent_msg`` / ``exec_msg``: the stage reasons joined in stage order."""
    return ("; ".join(f"{p.name}: {p.intent_reason}" for p in phases),
            "; ".join(f"{p.name}: {p.exec_reason}" for p in phases))
