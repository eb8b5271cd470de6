"""Scene 1 (spatial relations): source selection, relative placement, finish, final-layout bonus.

Running facts: the close frame's nearest object; the lift latches (from the close for execution
and completion, from the frame after it for stage-2 intent); the first open after the close and
the relation there; the first lifted on-table relation frame (stage-2 intent) or the last
relation failure before it; and the last 10 frames' relation verdicts, which answer
``final_target_ok`` in O(1).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.rules_base import SceneRules, stage1_reasons
from robofollow_ros.scoring.stages import Phase, completion_ok, gate_pickup, gate_three_stage, totals
from robofollow_ros.scoring.thresholds import (
    BONUS,
    BONUS_BELOW,
    FINAL_TARGET_WINDOW,
    FINISH_SCENE1,
    GRASP_XY,
    LIFT,
    ON_TABLE_DZ,
    RELATION_COS,
    RELATION_DIRECTION,
    RELATION_MAX_DIST,
    RELATION_MIN_DIST,
)


class LiftingRules(SceneRules):
    """Stage 1 shared by Scenes 1-3: the wrong-object test at the first close, a lift anywhere."""

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.close_choice: str | None = None
        self.close_src_xy = 0.0
        #: Lift latch searched from the frame after the close (stage-2 intent loops).
        self.lifted_after_close = False

    def start_phase(self, t: int, frame: Frame) -> None:
        ee = frame.ee(self.arm)
        self.close_choice = self.math.nearest(ee, frame.objects, self.candidates)[0]
        self.close_src_xy = self.math.xy_dist(ee, frame.objects[self.source])
        self.lifted_after_close = False

    def phase_update(self, t: int, frame: Frame) -> None:
        if t > (self.close or 0) and frame.objects[self.source][2] - self.z0 >= LIFT:
            self.lifted_after_close = True

    def stage1(self, name: str, max_score: float, need_lift: float) -> Phase:
        if self.close is None:
            return Phase.failed(name, max_score, "operating arm never closed gripper")
        intent_ok = self.close_choice == self.source and self.close_src_xy < GRASP_XY
        max_lift = self.src_max_z - self.z0
        exec_ok = intent_ok and max_lift >= need_lift
        intent_why, exec_why = stage1_reasons(self.close_choice, self.close_src_xy, intent_ok, exec_ok, max_lift,
                                              need_lift, self.wrong_arm())
        return Phase.verdict(name, max_score, intent_ok, intent_why, exec_ok, exec_why)


class Scene1Rules(LiftingRules):
    finish_rule = FINISH_SCENE1

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.direction = RELATION_DIRECTION.get(task.action) if task.target is not None else None
        self.target = task.target
        self.rel_now: tuple[bool, str] = (False, "")
        self.on_table_now = False
        #: (frame, relation ok, relation reason, on the table) of the last 10 frames.
        self.window: deque[tuple[int, bool, str, bool]] = deque(maxlen=FINAL_TARGET_WINDOW)
        self.s2_intent_frame: int | None = None
        self.s2_intent_reason = ""
        self.at_open: tuple[bool, str, bool, bool] | None = None

    def start_phase(self, t: int, frame: Frame) -> None:
        super().start_phase(t, frame)
        self.s2_intent_frame = None
        self.s2_intent_reason = "source never returned to table in correct relative pose"
        self.at_open = None

    def relation(self, frame: Frame) -> tuple[bool, str]:
        """The evaluator's ``_relation_ok_at``: near enough, not overlapping, within 45 degrees."""
        assert self.direction is not None and self.target is not None
        src, tgt = frame.objects[self.source], frame.objects[self.target]
        vx, vy = src[0] - tgt[0], src[1] - tgt[1]
        dist = self.math.norm2(vx, vy)
        if dist > RELATION_MAX_DIST:
            return False, f"distance={dist * 100:.1f}cm > {RELATION_MAX_DIST * 100:.0f}cm"
        if dist < RELATION_MIN_DIST:
            return False, "source/target overlap"
        cos = self.math.cos_sim(vx, vy, *self.direction)
        if cos < RELATION_COS:
            return False, f"relation angle mismatch (cos={cos:.3f})"
        return True, "ok"

    def frame_update(self, t: int, frame: Frame) -> None:
        if self.direction is None:
            return
        self.rel_now = self.relation(frame)
        self.on_table_now = abs(frame.objects[self.source][2] - self.z0) <= ON_TABLE_DZ
        self.window.append((t, self.rel_now[0], self.rel_now[1], self.on_table_now))

    def phase_update(self, t: int, frame: Frame) -> None:
        super().phase_update(t, frame)
        if self.direction is None:
            return
        if self.open_frame == t:
            self.at_open = (self.rel_now[0], self.rel_now[1], self.on_table_now, self.lift_frame is not None)
        if self.s2_intent_frame is None and self.lifted_after_close and self.on_table_now:
            if self.rel_now[0]:
                self.s2_intent_frame, self.s2_intent_reason = t, "ok"
            else:
                self.s2_intent_reason = self.rel_now[1]

    def completion_anchor(self, chain: str) -> tuple[str, int]:
        if self.direction is not None:
            if self.open_frame is not None:
                return "open", self.open_frame
            if self.s2_intent_frame is not None:
                return "intent", self.s2_intent_frame
        return self.lift_anchor()

    # -- scoring ------------------------------------------------------------------------------------
    def stage2(self) -> Phase:
        name = "stage2_relative_place"
        if self.close is None:
            return Phase.failed(name, 0.4, "no grasp close event")
        intent_ok = self.s2_intent_frame is not None
        exec_ok, exec_why = False, "gripper never opened in correct relative pose"
        if intent_ok and self.at_open is not None:
            rel_ok, rel_why, on_table, lifted_before_open = self.at_open
            if lifted_before_open and on_table and rel_ok:
                exec_ok, exec_why = True, "ok"
            else:
                exec_why = rel_why if not rel_ok else "source not on table when gripper opened"
        elif intent_ok:
            exec_why = "no gripper-open event after close"
        return Phase.verdict(name, 0.4, intent_ok, self.s2_intent_reason, exec_ok, exec_why)

    def final_target(self) -> tuple[bool, str]:
        if self.direction is None:
            return False, "n/a (no relation target)"
        if self.n < FINAL_TARGET_WINDOW:
            return False, f"trajectory too short for final {FINAL_TARGET_WINDOW}-frame check"
        for t, rel_ok, rel_why, on_table in self.window:
            if not rel_ok:
                return False, f"final-window failed at t={t}: {rel_why}"
            if not on_table:
                return False, f"final-window failed at t={t}: source not on table"
        return True, f"ok (last {FINAL_TARGET_WINDOW} frames)"

    def evaluate(self) -> dict[str, Any]:
        if self.task.action == "pickup":
            phases = gate_pickup([self.stage1("stage1_source_select", 0.8, LIFT), self.finish_phase()])
        else:
            phases = gate_three_stage([self.stage1("stage1_source_select", 0.4, LIFT), self.stage2(),
                                       self.finish_phase()])
        return self.finish_entry(phases, *self.final_target())

    def evaluate_empty(self) -> dict[str, Any]:
        missing = "trajectory/source missing"
        if self.task.action == "pickup":
            phases = gate_pickup([Phase.failed("stage1_source_select", 0.8, missing),
                                  Phase.failed("stage3_finish", 0.2, "empty trajectory")])
        else:
            phases = gate_three_stage([Phase.failed("stage1_source_select", 0.4, missing),
                                       Phase.failed("stage2_relative_place", 0.4, "no grasp close event"),
                                       Phase.failed("stage3_finish", 0.2, "empty trajectory")])
        return self.finish_entry(phases, False, "n/a (no relation target)")

    def finish_entry(self, phases: list[Phase], final_ok: bool, final_why: str) -> dict[str, Any]:
        """Final-layout bonus, then the wrong-arm penalty, then completion (``run_once`` of Scene 1)."""
        intent, exec_, max_total = totals(phases)
        intent_bonus = exec_bonus = 0.0
        if final_ok:
            if intent < BONUS_BELOW:
                intent_bonus = BONUS
                intent += intent_bonus
            if exec_ < BONUS_BELOW:
                exec_bonus = BONUS
                exec_ += exec_bonus
        entry = self.with_wrong_arm(phases, intent, exec_, max_total)
        entry["completion_ok"] = completion_ok(self.task.action, entry["intent_score"], entry["exec_score"], phases,
                                               final_target_ok=final_ok)
        entry.update(final_target_ok=final_ok, final_target_reason=final_why,
                     final_target_window=FINAL_TARGET_WINDOW, intent_bonus=intent_bonus, exec_bonus=exec_bonus)
        return entry

