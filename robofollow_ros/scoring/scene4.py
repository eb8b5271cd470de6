"""Scene 4 (logic): pickup, stack_on_target, unstack_to_slot with a grasp-stage wrong-arm check.

Running facts: the support under the source at the close and the highest it rose afterwards
(pickup support-lift penalty), the lift latch, the first stage-2 intent frame, the state at the
open frame and the current (eventually last) frame's placement state.
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout, ObjectSpec
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import support_under, xy_dist
from robofollow_ros.scoring.rules_base import release_verdict
from robofollow_ros.scoring.scene1 import LiftingRules
from robofollow_ros.scoring.stages import Phase, gate_pickup, gate_three_stage
from robofollow_ros.scoring.thresholds import (
    FINISH_SCENE4,
    S4_DEFAULT_HALF_HEIGHT,
    S4_PLACE_EXEC_DZ,
    S4_PLACE_EXEC_XY,
    S4_SLOT_GAP,
    S4_SLOT_INTENT_DZ,
    S4_SLOT_INTENT_XY,
    S4_STACK_GAP,
    S4_STACK_INTENT_DZ,
    S4_STACK_INTENT_XY,
    S4_SUPPORT_PENALTY,
    S4_SUPPORT_RISE,
    TABLE_Z,
)

RANK_CLOSE, RANK_LIFT, RANK_S2_INTENT, RANK_OPEN = 1, 2, 3, 4


def half_height(spec: ObjectSpec) -> float:
    """Scene 4 half-heights: cube and sphere 0.024, cylinder 0.025, anything else 0.025."""
    return spec.half_height if spec.shape in ("cube", "sphere", "cylinder") else S4_DEFAULT_HALF_HEIGHT


def conditional_full_success(task: EvalTask, phases: list[Phase], intent: float, exec_: float) -> bool | None:
    """Conditional tasks only: every phase full and both totals >= 1.0; None for other tasks."""
    if not task.is_conditional:
        return None
    return all(p.intent_full and p.exec_full for p in phases) and intent >= 1.0 - 1e-9 and exec_ >= 1.0 - 1e-9


class Scene4Rules(LiftingRules):
    finish_rule = FINISH_SCENE4

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.action = task.action
        self.src_hh = half_height(layout.object(task.source))
        if self.action == "stack_on_target":
            if task.target is None:
                raise ValueError(f"task {task.task_id}: stack_on_target without a target")
            self.target = task.target
            self.tgt_hh = half_height(layout.object(task.target))
        elif self.action == "unstack_to_slot":
            if task.place_slot not in slot_xy:
                raise ValueError(f"task {task.task_id}: place_slot {task.place_slot!r} is not a slot")
            sx, sy = slot_xy[task.place_slot]  # type: ignore[index]
            self.slot_point = (sx, sy, TABLE_Z + self.src_hh + S4_SLOT_GAP)
        self.support: str | None = None
        self.support_max_z = -math.inf
        self.s2_intent_frame: int | None = None
        self.open_ok = False
        self.placed_now = False

    def on_close(self, t: int, frame: Frame) -> None:
        self.support = support_under(self.source, frame.objects, self.candidates)
        super().on_close(t, frame)
        self.close_choice = self.grasp_choice(frame, exclude=self.support)
        self.support_max_z = -math.inf
        self.s2_intent_frame = None
        self.open_ok = False

    def _goal(self, frame: Frame) -> tuple[float, float, float]:
        if self.action == "stack_on_target":
            tgt = frame.objects[self.target]
            return tgt[0], tgt[1], tgt[2] + self.src_hh + self.tgt_hh + S4_STACK_GAP
        return self.slot_point

    def scene_update(self, t: int, frame: Frame) -> None:
        src = frame.objects[self.source]
        placing = self.action in ("stack_on_target", "unstack_to_slot")
        if placing:
            goal = self._goal(frame)
            d_xy, d_z = xy_dist(src, goal), abs(src[2] - goal[2])
            self.placed_now = d_xy <= S4_PLACE_EXEC_XY and d_z <= S4_PLACE_EXEC_DZ
        if self.close is None:
            return
        if self.support is not None and t > self.close:
            z = frame.objects[self.support][2]
            if z > self.support_max_z:
                self.support_max_z = z
        had_open = self.open_frame is not None
        self.advance_phase(t, frame)
        if not placing:
            return
        if self.s2_intent_frame is None:
            lim_xy, lim_z = ((S4_STACK_INTENT_XY, S4_STACK_INTENT_DZ) if self.action == "stack_on_target"
                             else (S4_SLOT_INTENT_XY, S4_SLOT_INTENT_DZ))
            if d_xy <= lim_xy and d_z <= lim_z:
                self.s2_intent_frame = t
        if not had_open and self.open_frame is not None:
            self.open_ok = self.placed_now

    def completion_rank(self) -> int:
        if self.close is None:
            return 0
        if self.open_frame is not None:
            return RANK_OPEN
        if self.s2_intent_frame is not None:
            return RANK_S2_INTENT
        return RANK_LIFT if self.lift_frame is not None else RANK_CLOSE

    def grasp_wrong_arm(self) -> tuple[bool, str]:
        """First arm to close is not the task arm, or the other arm closed (pickups: by the task arm's close)."""
        mine = self.grip[self.arm].first_close
        other = self.grip[self.other]
        theirs = other.first_close
        if theirs is not None and (mine is None or theirs < mine):
            return True, f"{self.other} arm closed first (frame {theirs})"
        if self.action == "pickup":
            if mine is not None and (other.closed_at_0 or (other.first_transition is not None
                                                             and other.first_transition <= mine)):
                return True, f"{self.other} arm closed by the {self.arm} arm's close (frame {mine})"
            return False, "no other-arm close before the grasp"
        if other.has_close:
            return True, f"{self.other} arm closed during the episode"
        return False, "no other-arm close"

    def evaluate(self) -> dict[str, Any]:
        wrong, wrong_why = self.grasp_wrong_arm()
        s1_max = 0.8 if self.action == "pickup" else 0.4
        s1 = self.stage1_s4(s1_max, wrong)
        if self.action == "pickup":
            phases = [s1, self.finish_phase()]
            gate_pickup(phases)
            if self.support is not None and self.support_max_z - self.f0_z(self.support) >= S4_SUPPORT_RISE:
                s1.exec_deduction = S4_SUPPORT_PENALTY
                s1.exec_reason += f"; support {self.support} lifted (-{S4_SUPPORT_PENALTY})"
        else:
            phases = [s1, self.place_stage(wrong), self.finish_phase()]
            gate_three_stage(phases)
        intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
        extras = {"wrong_arm_participated": wrong, "wrong_arm_reason": wrong_why,
                  "conditional_full_success": conditional_full_success(self.task, phases, intent, exec_)}
        return self.assemble(phases, intent, exec_, extras, wrong_arm_penalty=False)

    def f0_z(self, name: str) -> float:
        assert self.f0 is not None
        return self.f0.objects[name][2]

    def stage1_s4(self, max_score: float, wrong: bool) -> Phase:
        if wrong:
            why = "wrong arm participated in grasp stage"
            return Phase("stage1_source_select", max_score, False, why, False, why)
        intent, intent_why = self.wrong_object_phase(*self.close_choice)
        if self.lift_frame is not None:
            exec_ok, exec_why = True, f"lifted at frame {self.lift_frame}"
        elif self.close is None:
            exec_ok, exec_why = False, f"{self.arm} gripper never closed"
        else:
            exec_ok, exec_why = False, f"{self.source} not lifted after the close"
        return Phase("stage1_source_select", max_score, intent, intent_why, exec_ok, exec_why)

    def place_stage(self, wrong: bool) -> Phase:
        name = "stage2_stack" if self.action == "stack_on_target" else "stage2_unstack_slot"
        goal = self.target if self.action == "stack_on_target" else f"slot {self.task.place_slot}"
        if wrong:
            why = "wrong arm participated"
            return Phase(name, 0.4, False, why, False, why)
        if self.s2_intent_frame is not None:
            intent, intent_why = True, f"brought to {goal} at frame {self.s2_intent_frame}"
        else:
            intent, intent_why = False, f"never brought to {goal}"
        exec_ok, exec_why = release_verdict(self.open_frame, self.open_ok, self.placed_now, f"on {goal}")
        return Phase(name, 0.4, intent, intent_why, exec_ok, exec_why)
