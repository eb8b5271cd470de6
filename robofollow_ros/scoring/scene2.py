"""Scene 2 (attributes, action selection): pickup, stack, place in bowl; the retry bonus.

Running facts: stack keeps the first intent frame (or the last miss before it), the state at the
open frame and a "dropped from the open onward" latch; bowl keeps the first intent frame and the
closest low approach before it, and the state at the open frame. Last-frame checks read the
latest frame. Push lives in ``scene2_push.py`` (its own stage 1).
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.scene1 import LiftingRules
from robofollow_ros.scoring.stages import Phase, completion_ok, gate_pickup, gate_three_stage, totals
from robofollow_ros.scoring.thresholds import (
    BONUS,
    BONUS_BELOW,
    BOWL_DZ,
    BOWL_LOW_LIFT,
    BOWL_XY,
    FINISH_SCENE2,
    GRASP_XY,
    LIFT,
    S2_PICKUP_LIFT,
    STACK_DROP_DZ,
    STACK_DZ,
    STACK_XY,
)

#: Stage-2 phase name of each Scene 2 action.
STAGE2_NAME = {"stack": "stage2_stack", "place_bowl": "stage2_place_bowl", "push": "stage2_push"}


class Scene2Rules(LiftingRules):
    finish_rule = FINISH_SCENE2

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.action = task.action
        self.target = task.target or ""
        self.bowls = tuple(o.name for o in layout.objects if o.role == "bowl")
        self.s2_intent_frame: int | None = None
        self.s2_intent_reason = ""
        self.at_open: tuple[bool, float, float] | None = None
        self.bowl_open: tuple[bool, float] | None = None
        self.dropped = False
        self.best_xy = self.best_low = math.inf

    def start_phase(self, t: int, frame: Frame) -> None:
        super().start_phase(t, frame)
        self.s2_intent_frame = None
        self.s2_intent_reason = ("source never reached valid stack intent pose" if self.action == "stack"
                                 else "no valid low-height in-bowl approach near target bowl")
        self.at_open = self.bowl_open = None
        self.dropped = False
        self.best_xy = self.best_low = math.inf

    # -- geometry of the evaluator ---------------------------------------------------------------
    def stacked(self, frame: Frame) -> tuple[bool, float, float]:
        """``_is_stacked_on_target_at``: (XY <= 0.03 and z gap > 0.005, XY, z gap)."""
        src, tgt = frame.objects[self.source], frame.objects[self.target]
        xy, dz = self.math.xy_dist(src, tgt), src[2] - tgt[2]
        return xy <= STACK_XY and dz > STACK_DZ, xy, dz

    def in_bowl(self, frame: Frame) -> tuple[bool, float]:
        """``_is_in_bowl_at``: (XY <= 0.04 and source z <= bowl z + 0.06, XY)."""
        src, bowl = frame.objects[self.source], frame.objects[self.target]
        xy = self.math.xy_dist(src, bowl)
        return xy <= BOWL_XY and src[2] <= bowl[2] + BOWL_DZ, xy

    def target_bowl_nearest(self, frame: Frame) -> bool:
        return self.math.nearest(frame.objects[self.source], frame.objects, self.bowls)[0] == self.target

    # -- per frame -----------------------------------------------------------------------------------
    def phase_update(self, t: int, frame: Frame) -> None:
        super().phase_update(t, frame)
        if self.action == "stack":
            self._stack_update(t, frame)
        elif self.action == "place_bowl":
            self._bowl_update(t, frame)

    def _stack_update(self, t: int, frame: Frame) -> None:
        src, tgt = frame.objects[self.source], frame.objects[self.target]
        if self.s2_intent_frame is None and self.lifted_after_close:
            ee_src = self.math.xy_dist(frame.ee(self.arm), src)
            if src[2] > tgt[2] + STACK_DZ and ee_src <= GRASP_XY:
                self.s2_intent_frame, self.s2_intent_reason = t, "ok"
            else:
                self.s2_intent_reason = (f"need source above target and ee-source<={GRASP_XY * 100:.0f}cm; got "
                                         f"z_diff={(src[2] - tgt[2]) * 100:.1f}cm ee_source={ee_src * 100:.1f}cm")
        if self.open_frame == t:
            self.at_open = self.stacked(frame)
        if self.open_frame is not None and src[2] <= tgt[2] + STACK_DROP_DZ:
            self.dropped = True

    def _bowl_update(self, t: int, frame: Frame) -> None:
        if self.open_frame == t:
            self.bowl_open = self.in_bowl(frame)
        if self.s2_intent_frame is not None or t <= (self.close or 0):
            return
        low = frame.objects[self.source][2] - self.z0
        if low >= BOWL_LOW_LIFT:
            return
        inside, xy = self.in_bowl(frame)
        nearest_ok = self.target_bowl_nearest(frame)
        self.best_xy, self.best_low = min(self.best_xy, xy), min(self.best_low, low)
        if nearest_ok and xy <= BOWL_XY and inside:
            self.s2_intent_frame = t

    def completion_anchor(self, chain: str) -> tuple[str, int]:
        if self.action in ("stack", "place_bowl"):
            if self.open_frame is not None:
                return "open", self.open_frame
            if self.s2_intent_frame is not None:
                return "intent", self.s2_intent_frame
        return self.lift_anchor()

    # -- stages --------------------------------------------------------------------------------------
    def stage1_phase(self) -> Phase:
        if self.action == "pickup":
            return self.stage1("stage1_source_select", 0.8, S2_PICKUP_LIFT)
        return self.stage1("stage1_source_select", 0.4, LIFT)

    def stage2_phase(self) -> Phase:
        name = STAGE2_NAME[self.action]
        if self.close is None:
            return Phase.failed(name, 0.4, "no grasp close event")
        intent_ok = self.s2_intent_frame is not None
        assert self.last is not None
        if self.action == "stack":
            exec_ok, exec_why = False, "gripper never opened with stable stacked result"
            if intent_ok and self.at_open is not None:
                open_ok, open_xy, open_dz = self.at_open
                final_ok, final_xy, final_dz = self.stacked(self.last)
                exec_ok = open_ok and final_ok and not self.dropped
                exec_why = "ok" if exec_ok else (
                    f"open(xy={open_xy * 100:.1f}cm,z_diff={open_dz * 100:.1f}cm), "
                    f"final(xy={final_xy * 100:.1f}cm,z_diff={final_dz * 100:.1f}cm), dropped={self.dropped}")
            elif intent_ok:
                exec_why = "no gripper-open event after close"
            return Phase.verdict(name, 0.4, intent_ok, self.s2_intent_reason, exec_ok, exec_why)
        exec_ok, exec_why = False, "gripper never opened with object placed in target bowl"
        if intent_ok and self.bowl_open is not None:
            in_open, xy_open = self.bowl_open
            in_final, xy_final = self.in_bowl(self.last)
            exec_ok = in_open and xy_open <= BOWL_XY and in_final and xy_final <= BOWL_XY
            exec_why = "ok" if exec_ok else (f"open(xy={xy_open * 100:.1f}cm,in_bowl={in_open}), "
                                             f"final(xy={xy_final * 100:.1f}cm,in_bowl={in_final})")
        elif intent_ok:
            exec_why = "no gripper-open event after close"
        if intent_ok:
            intent_why = "ok"
        elif math.isfinite(self.best_xy) and math.isfinite(self.best_low):
            intent_why = (f"best low-height approach: h={self.best_low * 100:.1f}cm, xy={self.best_xy * 100:.1f}cm "
                          f"(need <={BOWL_XY * 100:.0f}cm and in target bowl)")
        else:
            intent_why = self.s2_intent_reason
        return Phase.verdict(name, 0.4, intent_ok, intent_why, exec_ok, exec_why)

    def retry_final(self) -> tuple[bool, str]:
        """``_final_target_ok_for_bonus`` at the last frame."""
        assert self.last is not None
        if self.action == "stack":
            ok, xy, dz = self.stacked(self.last)
            return ok, "ok" if ok else f"final stack mismatch: xy={xy * 100:.1f}cm, z_diff={dz * 100:.1f}cm"
        if self.action == "place_bowl":
            inside, xy = self.in_bowl(self.last)
            nearest_ok = self.target_bowl_nearest(self.last)
            ok = inside and nearest_ok
            return ok, "ok" if ok else (f"final place mismatch: in_bowl={inside}, nearest={nearest_ok}, "
                                        f"xy={xy * 100:.1f}cm")
        return False, "action has no target-based bonus"

    def evaluate(self) -> dict[str, Any]:
        if self.action == "pickup":
            phases = gate_pickup([self.stage1_phase(), self.finish_phase()])
        else:
            phases = gate_three_stage([self.stage1_phase(), self.stage2_phase(), self.finish_phase()])
        return self.finish_entry(phases, *self.retry_final())

    def evaluate_empty(self) -> dict[str, Any]:
        missing = "trajectory/source missing"
        finish = Phase.failed("stage3_finish", 0.2, "empty trajectory")
        if self.action == "pickup":
            phases = gate_pickup([Phase.failed("stage1_source_select", 0.8, missing), finish])
        else:
            s1 = "stage1_push_setup" if self.action == "push" else "stage1_source_select"
            phases = gate_three_stage([Phase.failed(s1, 0.4, missing),
                                       Phase.failed(STAGE2_NAME[self.action], 0.4, "source/target trajectory missing"),
                                       finish])
        return self.finish_entry(phases, False, "empty trajectory")

    def finish_entry(self, phases: list[Phase], final_ok: bool, final_why: str) -> dict[str, Any]:
        """Retry bonus (capped at the maximum), then the wrong-arm penalty, then completion."""
        intent, exec_, max_total = totals(phases)
        intent_bonus = BONUS if final_ok and intent < BONUS_BELOW else 0.0
        exec_bonus = BONUS if final_ok and exec_ < BONUS_BELOW else 0.0
        intent_after = min(max_total, float(intent + intent_bonus))
        exec_after = min(max_total, float(exec_ + exec_bonus))
        retry = {"final_target_ok": bool(final_ok), "final_target_reason": final_why,
                 "intent_bonus": intent_bonus, "exec_bonus": exec_bonus,
                 "intent_score_after_bonus": intent_after, "exec_score_after_bonus": exec_after}
        intent_note = f" (+{intent_bonus:.1f} retry bonus)" if intent_bonus > 0.0 else ""
        exec_note = f" (+{exec_bonus:.1f} retry bonus)" if exec_bonus > 0.0 else ""
        entry = self.with_wrong_arm(phases, intent_after, exec_after, max_total, intent_note, exec_note)
        entry["completion_ok"] = completion_ok(self.action, entry["intent_score"], entry["exec_score"], phases,
                                               retry_ok=bool(final_ok))
        entry["retry_bonus"] = retry
        return entry

