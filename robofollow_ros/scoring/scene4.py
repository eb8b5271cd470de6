"""Scene 4 (logic): pickup, stack_on_target, unstack_to_slot with the grasp-stage wrong-arm check.

Running facts from the close: the support under the source at the close and how high it rose
(pickup support-lift penalty), the nearest object with that support excluded, the first lift and
the highest lift, the first stage-2 intent frame (or the closest misses before it) and the state
at the open frame; last-frame checks read the latest frame.

Completion has two chains because the wrong-arm verdict, known only at the end, changes it: the
evaluator skips stage-2 intent and the lift when the wrong arm took part. Each chain's anchor
only moves to the current frame, so each keeps its own finish tracker.
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout, ObjectSpec
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.rules_base import LAST_FRAME, SceneRules
from robofollow_ros.scoring.stages import (
    Phase,
    completion_ok,
    full_success,
    gate_pickup,
    gate_three_stage,
    totals,
)
from robofollow_ros.scoring.thresholds import (
    FINISH_SCENE4,
    GRASP_XY,
    LIFT,
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


def half_height(spec: ObjectSpec) -> float:
    """Scene 4 half-heights: cube and sphere size[0], cylinder size[1], anything else 0.025."""
    return spec.half_height if spec.shape in ("cube", "sphere", "cylinder") else S4_DEFAULT_HALF_HEIGHT


def scene4_candidates(layout: Layout) -> tuple[str, ...]:
    """Candidates in the order the Scene 4 scene creates them (first wins a distance tie): objects
    standing on the table, then those in a container, then stacked ones."""
    objs = [o for o in layout.objects if o.is_candidate]
    rank = {o.name: 2 if o.on_top_of else 1 if o.in_container else 0 for o in objs}
    return tuple(sorted((o.name for o in objs), key=lambda name: rank[name]))


def scene4_entry(rules: SceneRules, phases: list[Phase]) -> dict[str, Any]:
    """Scene 4's results entry: no bonus, no penalty; ``conditional_full_success`` for conditional tasks."""
    intent, exec_, max_total = totals(phases)
    entry = rules.entry(phases, intent, exec_, max_total)
    entry["completion_ok"] = completion_ok(rules.task.action, intent, exec_, phases)
    entry["conditional_full_success"] = full_success(phases, intent, exec_) if rules.task.is_conditional else None
    return entry


class Scene4Rules(SceneRules):
    finish_rule = FINISH_SCENE4

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.action = task.action
        self.src_hh = half_height(layout.object(task.source))
        self.target = task.target or ""
        if self.action == "stack_on_target":
            if task.target is None:
                raise ValueError(f"task {task.task_id}: stack_on_target without a target")
            self.tgt_hh = half_height(layout.object(task.target))
        elif self.action == "unstack_to_slot":
            if task.place_slot not in slot_xy:
                raise ValueError(f"task {task.task_id}: place_slot {task.place_slot!r} is not a slot")
            self.slot = slot_xy[task.place_slot]  # type: ignore[index]
            self.slot_z = TABLE_Z + self.src_hh + S4_SLOT_GAP
        self.placing = self.action in ("stack_on_target", "unstack_to_slot")
        self._reset_phase()

    @staticmethod
    def candidate_order(layout: Layout) -> tuple[str, ...]:
        return scene4_candidates(layout)

    def _reset_phase(self) -> None:
        self.support: str | None = None
        self.support_rise = 0.0
        self.close_choice: str | None = None
        self.close_src_xy = 0.0
        self.max_lift = 0.0
        self.s2_intent_frame: int | None = None
        self.best_xy = self.best_z = math.inf
        self.at_open: tuple[float, float] | None = None

    def start_phase(self, t: int, frame: Frame) -> None:
        self._reset_phase()
        ee = frame.ee(self.arm)
        self.support = self.math.support_under(self.source, frame.objects, self.candidates)
        self.close_choice = self.math.nearest(ee, frame.objects, self.candidates, exclude=self.support)[0]
        self.close_src_xy = self.math.xy_dist(ee, frame.objects[self.source])

    def place_error(self, frame: Frame) -> tuple[float, float]:
        """(XY, |z error|) of the source from where stage 2 wants it in this frame."""
        src = frame.objects[self.source]
        if self.action == "stack_on_target":
            tgt = frame.objects[self.target]
            expected = tgt[2] + self.src_hh + self.tgt_hh + S4_STACK_GAP
            return self.math.xy_dist(src, tgt), abs(src[2] - expected)
        return self.math.norm2(src[0] - self.slot[0], src[1] - self.slot[1]), abs(src[2] - self.slot_z)

    def phase_update(self, t: int, frame: Frame) -> None:
        assert self.f0 is not None
        lift = frame.objects[self.source][2] - self.z0
        if lift > self.max_lift:
            self.max_lift = lift
        if self.support is not None:
            rise = frame.objects[self.support][2] - self.f0.objects[self.support][2]
            if rise > self.support_rise:
                self.support_rise = rise
        if not self.placing:
            return
        if self.open_frame == t:
            self.at_open = self.place_error(frame)
        if self.s2_intent_frame is not None or t <= (self.close or 0):
            return
        xy, dz = self.place_error(frame)
        self.best_xy, self.best_z = min(self.best_xy, xy), min(self.best_z, dz)
        lim_xy, lim_z = ((S4_STACK_INTENT_XY, S4_STACK_INTENT_DZ) if self.action == "stack_on_target"
                         else (S4_SLOT_INTENT_XY, S4_SLOT_INTENT_DZ))
        if xy <= lim_xy and dz <= lim_z:
            self.s2_intent_frame = t

    # -- wrong arm and completion ----------------------------------------------------------------------
    def wrong_arm_in_grasp(self) -> bool:
        """The task arm did not close first, or the other arm closed (pickups: by the task arm's close)."""
        mine, theirs = self.track.first_close, self.other_track.first_close
        if self.action == "pickup":
            other_closed = theirs is not None and mine is not None and theirs <= mine
        else:
            other_closed = theirs is not None
        first_is_mine = mine is not None and (theirs is None or mine <= theirs)
        return other_closed or not first_is_mine

    def finish_chains(self) -> tuple[str, ...]:
        return ("clean", "wrong_arm")

    def completion_anchor(self, chain: str) -> tuple[str, int]:
        if self.close is None:
            return LAST_FRAME
        if self.placing and self.open_frame is not None:
            return "open", self.open_frame
        if chain == "clean":
            if self.s2_intent_frame is not None:
                return "intent", self.s2_intent_frame
            if self.lift_frame is not None:
                return "lift", self.lift_frame
        return "close", self.close

    # -- stages --------------------------------------------------------------------------------------
    def stage1(self, max_score: float, wrong: bool) -> Phase:
        name = "stage1_source_select"
        if self.close is None:
            return Phase.failed(name, max_score, "operating arm never closed gripper")
        if wrong:
            return Phase.failed(name, max_score, "wrong arm participated in grasp stage")
        intent_ok = self.close_choice == self.source and self.close_src_xy < GRASP_XY
        exec_ok = intent_ok and self.lift_frame is not None
        intent_why = "ok" if intent_ok else (
            f"at first close: closest={self.close_choice}, source_xy={self.close_src_xy * 100:.1f}cm")
        if exec_ok:
            exec_why = "ok"
        elif intent_ok:
            exec_why = f"source lift={self.max_lift * 100:.1f}cm (need >= {LIFT * 100:.1f}cm)"
        else:
            exec_why = "intent not correct at first close"
        return Phase.verdict(name, max_score, intent_ok, intent_why, exec_ok, exec_why)

    def stage2(self, wrong: bool) -> Phase:
        stack = self.action == "stack_on_target"
        name, what = ("stage2_stack", "stack") if stack else ("stage2_unstack_slot", "slot")
        if wrong:
            return Phase.failed(name, 0.4, "wrong arm participated in stage1/2")
        intent_ok = self.s2_intent_frame is not None
        exec_ok, exec_why = False, "no gripper-open event after close"
        if intent_ok and self.at_open is not None:
            assert self.last is not None
            open_xy, open_z = self.at_open
            fin_xy, fin_z = self.place_error(self.last)
            exec_ok = (open_xy <= S4_PLACE_EXEC_XY and open_z <= S4_PLACE_EXEC_DZ
                       and fin_xy <= S4_PLACE_EXEC_XY and fin_z <= S4_PLACE_EXEC_DZ)
            exec_why = "ok" if exec_ok else (f"open(xy={open_xy * 100:.1f}cm,z={open_z * 100:.1f}cm), "
                                             f"final(xy={fin_xy * 100:.1f}cm,z={fin_z * 100:.1f}cm)")
        intent_why = "ok" if intent_ok else (
            f"best {what} pose xy={self.best_xy * 100:.1f}cm z_err={self.best_z * 100:.1f}cm")
        return Phase.verdict(name, 0.4, intent_ok, intent_why, exec_ok, exec_why)

    def evaluate(self) -> dict[str, Any]:
        wrong = self.wrong_arm_in_grasp()
        finish = self.finish_phase("wrong_arm" if wrong else "clean")
        if self.action != "pickup":
            return scene4_entry(self, gate_three_stage([self.stage1(0.4, wrong), self.stage2(wrong), finish]))
        phases = gate_pickup([self.stage1(0.8, wrong), finish])
        if self.close is not None and not wrong and self.support is not None and self.support_rise >= S4_SUPPORT_RISE:
            s1 = phases[0]
            s1.exec_score = max(0.0, s1.exec_score - S4_SUPPORT_PENALTY)
            note = (f"support-lift penalty: support={self.support}, lift={self.support_rise * 100:.1f}cm >= "
                    f"{S4_SUPPORT_RISE * 100:.1f}cm, -{S4_SUPPORT_PENALTY:.2f}")
            s1.exec_reason = note if s1.exec_reason == "ok" else f"{s1.exec_reason}; {note}"
        return scene4_entry(self, phases)

    def evaluate_empty(self) -> dict[str, Any]:
        missing = "trajectory/source missing"
        finish = Phase.failed("stage3_finish", 0.2, "empty trajectory")
        if self.action == "pickup":
            return scene4_entry(self, gate_pickup([Phase.failed("stage1_source_select", 0.8, missing), finish]))
        stage2 = (Phase.failed("stage2_stack", 0.4, "source/target trajectory missing")
                  if self.action == "stack_on_target" else Phase.failed("stage2_unstack_slot", 0.4, "source missing"))
        return scene4_entry(self, gate_three_stage([Phase.failed("stage1_source_select", 0.4, missing), stage2,
                                                    finish]))

