"""Scene 1 (spatial relations): source selection, relative placement, finish, final-layout bonus.

Running facts: the close frame's nearest object; the first lift after the close; the first open
after the close and whether the relation held there; the first lifted on-table relation frame
(stage-2 intent); and the length of the current run of frames that pass the relation on the table,
which answers "all of the last 10 frames" in O(1).
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.events import opened
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.rules_base import SceneRules
from robofollow_ros.scoring.stages import Phase, add_bonus, gate_pickup, gate_three_stage
from robofollow_ros.scoring.thresholds import (
    FINAL_TARGET_WINDOW,
    FINISH_SCENE1,
    LIFT,
    ON_TABLE_DZ,
    RELATION_COS,
    RELATION_DIRECTION,
    RELATION_MAX_DIST,
    RELATION_MIN_DIST,
)

#: Completion anchors of a relation task, by priority (0 = the last frame).
RANK_LIFT, RANK_S2_INTENT, RANK_OPEN = 1, 2, 3


def relation_holds(src: tuple[float, ...], tgt: tuple[float, ...], direction: tuple[float, float]) -> bool:
    """1e-6 < |v| <= 0.12 and cos(v, d) >= cos 45 deg, v = source xy - target xy."""
    vx, vy = src[0] - tgt[0], src[1] - tgt[1]
    norm = math.hypot(vx, vy)
    if not (RELATION_MIN_DIST < norm <= RELATION_MAX_DIST):
        return False
    return (vx * direction[0] + vy * direction[1]) / norm >= RELATION_COS


class LiftingRules(SceneRules):
    """Stage 1 shared by Scenes 1-3: the wrong-object test at the close and a lift after it."""

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.close_choice: tuple[str | None, float] = (None, math.inf)
        self.lift_frame: int | None = None
        self.open_frame: int | None = None
        self.lifted_before_open = False
        self.prev_g = 1.0

    def on_close(self, t: int, frame: Frame) -> None:
        self.close_choice = self.grasp_choice(frame)
        self.lift_frame = None
        self.open_frame = None
        self.lifted_before_open = False
        self.prev_g = frame.gripper(self.arm)

    def advance_phase(self, t: int, frame: Frame) -> bool:
        """Lift latch and open event after the close; returns whether the source is lifted now."""
        lifted = frame.objects[self.source][2] - self.z0 >= LIFT
        if lifted and self.lift_frame is None:
            self.lift_frame = t
        g = frame.gripper(self.arm)
        if self.open_frame is None:
            if lifted:
                self.lifted_before_open = True
            if t > (self.close or 0) and opened(self.prev_g, g):
                self.open_frame = t
        self.prev_g = g
        return lifted

    def stage1(self, name: str, max_score: float, min_lift: float) -> Phase:
        intent, intent_why = self.wrong_object_phase(*self.close_choice)
        rise = self.src_max_z - self.z0
        if not intent:
            exec_ok, exec_why = False, "intent failed"
        elif rise >= min_lift:
            exec_ok, exec_why = True, f"lifted {rise:.3f} m"
        else:
            exec_ok, exec_why = False, f"not lifted: max rise {rise:.3f} < {min_lift}"
        return Phase(name, max_score, intent, intent_why, exec_ok, exec_why)


class Scene1Rules(LiftingRules):
    finish_rule = FINISH_SCENE1

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.direction = RELATION_DIRECTION.get(task.action)
        self.target = task.target
        self.final_run = 0
        self.s2_intent_frame: int | None = None
        self.open_relation_ok = False

    def on_close(self, t: int, frame: Frame) -> None:
        super().on_close(t, frame)
        self.s2_intent_frame = None
        self.open_relation_ok = False

    def placed(self, frame: Frame) -> bool:
        """On the table and in the named relation to the target."""
        assert self.direction is not None and self.target is not None
        src = frame.objects[self.source]
        return abs(src[2] - self.z0) <= ON_TABLE_DZ and relation_holds(src, frame.objects[self.target], self.direction)

    def scene_update(self, t: int, frame: Frame) -> None:
        ok = self.direction is not None and self.placed(frame)
        self.final_run = self.final_run + 1 if ok else 0
        if self.close is None:
            return
        had_open = self.open_frame is not None
        self.advance_phase(t, frame)
        if not had_open and self.open_frame is not None:
            self.open_relation_ok = ok
        if self.s2_intent_frame is None and self.lift_frame is not None and ok:
            self.s2_intent_frame = t

    def completion_rank(self) -> int:
        if self.close is None:
            return 0
        if self.direction is not None:
            if self.open_frame is not None:
                return RANK_OPEN
            if self.s2_intent_frame is not None:
                return RANK_S2_INTENT
        return RANK_LIFT if self.lift_frame is not None else 0

    def evaluate(self) -> dict[str, Any]:
        if self.direction is None:
            phases = [self.stage1("stage1_source_select", 0.8, LIFT), self.finish_phase()]
            gate_pickup(phases)
            intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
            return self.assemble(phases, intent, exec_, {"final_target_ok": None})
        phases = [self.stage1("stage1_source_select", 0.4, LIFT), self.stage2(), self.finish_phase()]
        gate_three_stage(phases)
        intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
        final_ok = self.n >= FINAL_TARGET_WINDOW and self.final_run >= FINAL_TARGET_WINDOW
        if final_ok:
            final_why = f"last {FINAL_TARGET_WINDOW} frames on the table {self.task.action} {self.target}"
        elif self.n < FINAL_TARGET_WINDOW:
            final_why = f"only {self.n} frames (< {FINAL_TARGET_WINDOW})"
        else:
            final_why = f"relation held on the table for only the last {self.final_run} frames"
        intent_bonus, intent = add_bonus(intent, final_ok)
        exec_bonus, exec_ = add_bonus(exec_, final_ok)
        extras = {"final_target_ok": final_ok, "final_target_reason": final_why,
                  "final_target_window": FINAL_TARGET_WINDOW, "intent_bonus": intent_bonus, "exec_bonus": exec_bonus}
        return self.assemble(phases, intent, exec_, extras, final_target_ok=final_ok)

    def stage2(self) -> Phase:
        rel = f"{self.task.action} {self.target}"
        if self.s2_intent_frame is not None:
            intent, intent_why = True, f"placed {rel} at frame {self.s2_intent_frame}"
        else:
            intent, intent_why = False, f"never lifted and then on the table {rel}"
        if not intent:
            exec_ok, exec_why = False, "intent failed"
        elif self.open_frame is None:
            exec_ok, exec_why = False, "gripper never opened after the close"
        elif not self.lifted_before_open:
            exec_ok, exec_why = False, f"not lifted between close and open (frame {self.open_frame})"
        elif not self.open_relation_ok:
            exec_ok, exec_why = False, f"at open frame {self.open_frame} not on the table {rel}"
        else:
            exec_ok, exec_why = True, f"released {rel} at frame {self.open_frame}"
        return Phase("stage2_relative_place", 0.4, intent, intent_why, exec_ok, exec_why)
