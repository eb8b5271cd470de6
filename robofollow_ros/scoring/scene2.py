"""Scene 2 (attributes, action selection): pickup, stack, place in bowl, push; retry bonus.

Running facts per action, all latched or overwritten per frame: stack/bowl keep the first intent
frame, the state at the open frame, a "dropped after the open" flag and the current frame's state
(which is the last frame's state when the trial ends); push keeps the first moved-on-table frame,
two "nearest at some such frame" latches, the best projected displacement since the close and the
maximum projection from frame 0 (retry bonus).
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame, Vec3
from robofollow_ros.scoring.geometry import nearest, xy_dist
from robofollow_ros.scoring.rules_base import release_verdict
from robofollow_ros.scoring.scene1 import LiftingRules
from robofollow_ros.scoring.stages import Phase, add_bonus, gate_pickup, gate_three_stage
from robofollow_ros.scoring.thresholds import (
    BOWL_DZ,
    BOWL_LOW_LIFT,
    BOWL_XY,
    FINISH_SCENE2,
    GRASP_XY,
    LIFT,
    PUSH_CLOSE_THRESHOLD,
    PUSH_COS,
    PUSH_EE_OFFSET,
    PUSH_EXEC_DIST,
    PUSH_EXEC_XY,
    PUSH_INTENT_DIST,
    PUSH_MIN_MOVE,
    PUSH_NEAR_TABLE,
    PUSH_ON_TABLE_DZ,
    PUSH_RETRY_DIST,
    S2_PICKUP_LIFT,
    STACK_DROP_DZ,
    STACK_DZ,
    STACK_XY,
)


class Scene2Rules(LiftingRules):
    finish_rule = FINISH_SCENE2

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        self.action = task.action
        if self.action == "push":
            self.close_threshold = PUSH_CLOSE_THRESHOLD
        super().__init__(task, layout, slot_xy)
        self.target = task.target or ""
        self.bowls = tuple(o.name for o in layout.objects if o.role == "bowl")
        self.u = (0.0, 0.0)
        self.retry_best = -math.inf
        self.placed_now = False
        self.nearest_bowl_now = False
        self._reset_phase(None)

    def _reset_phase(self, close_xy: tuple[float, float] | None) -> None:
        self.s2_intent_frame: int | None = None
        self.open_ok = False
        self.dropped_at: int | None = None
        self.close_xy = close_xy
        self.first_moved: int | None = None
        self.near_table_first = False
        self.setup_intent: int | None = None
        self.setup_exec: int | None = None
        self.best_push = -math.inf

    def on_close(self, t: int, frame: Frame) -> None:
        super().on_close(t, frame)
        src = frame.objects[self.source]
        self._reset_phase((src[0], src[1]))

    def in_bowl(self, src: Vec3, bowl: Vec3) -> bool:
        """XY(source, bowl) <= 0.04 and source z <= bowl z + 0.06."""
        return xy_dist(src, bowl) <= BOWL_XY and src[2] <= bowl[2] + BOWL_DZ

    def scene_update(self, t: int, frame: Frame) -> None:
        objs = frame.objects
        src = objs[self.source]
        if self.action == "push":
            self._push_frame0_and_retry(t, src)
        elif self.action == "stack":
            tgt = objs[self.target]
            self.placed_now = xy_dist(src, tgt) <= STACK_XY and src[2] - tgt[2] > STACK_DZ
        elif self.action == "place_bowl":
            self.placed_now = self.in_bowl(src, objs[self.target])
            self.nearest_bowl_now = nearest(src, objs, self.bowls)[0] == self.target
        if self.close is None:
            return
        had_open = self.open_frame is not None
        self.advance_phase(t, frame)
        just_opened = not had_open and self.open_frame is not None
        if self.action == "stack":
            tgt = objs[self.target]
            if (self.s2_intent_frame is None and self.lift_frame is not None and src[2] > tgt[2] + STACK_DZ
                    and xy_dist(frame.ee(self.arm), src) <= GRASP_XY):
                self.s2_intent_frame = t
            if just_opened:
                self.open_ok = self.placed_now
            if self.open_frame is not None and self.dropped_at is None and src[2] <= tgt[2] + STACK_DROP_DZ:
                self.dropped_at = t
        elif self.action == "place_bowl":
            if (self.s2_intent_frame is None and src[2] - self.z0 < BOWL_LOW_LIFT and self.placed_now
                    and self.nearest_bowl_now):
                self.s2_intent_frame = t
            if just_opened:
                self.open_ok = self.placed_now
        elif self.action == "push":
            self._push_phase(t, frame, src)

    def _push_frame0_and_retry(self, t: int, src: tuple[float, ...]) -> None:
        assert self.f0 is not None
        s0 = self.f0.objects[self.source]
        if t == 0:
            tg = self.f0.objects[self.target]
            dx, dy = tg[0] - s0[0], tg[1] - s0[1]
            norm = math.hypot(dx, dy)
            self.u = (dx / norm, dy / norm) if norm > 0 else (0.0, 0.0)
        proj = (src[0] - s0[0]) * self.u[0] + (src[1] - s0[1]) * self.u[1]
        if proj > self.retry_best:
            self.retry_best = proj

    def _push_phase(self, t: int, frame: Frame, src: tuple[float, ...]) -> None:
        assert self.close_xy is not None
        dx, dy = src[0] - self.close_xy[0], src[1] - self.close_xy[1]
        moved = math.hypot(dx, dy)
        if src[2] - self.z0 <= PUSH_ON_TABLE_DZ and moved >= PUSH_MIN_MOVE:
            ee = frame.ee(self.arm)
            if self.first_moved is None:
                self.first_moved = t
                self.near_table_first = abs(ee[2] - PUSH_EE_OFFSET - self.z0) <= PUSH_NEAR_TABLE
            chosen, dist = self.grasp_choice(frame)
            if chosen == self.source:
                if dist < GRASP_XY and self.setup_intent is None:
                    self.setup_intent = t
                if dist < PUSH_EXEC_XY and self.setup_exec is None:
                    self.setup_exec = t
        if self.close is not None and t > self.close and moved > 0:
            ux, uy = self.u
            proj = dx * ux + dy * uy
            ee = frame.ee(self.arm)
            behind = (ee[0] - src[0]) * ux + (ee[1] - src[1]) * uy <= 0
            if proj / moved >= PUSH_COS and behind and proj > self.best_push:
                self.best_push = proj
                if self.s2_intent_frame is None and proj >= PUSH_INTENT_DIST:
                    self.s2_intent_frame = t

    def completion_rank(self) -> int:
        if self.close is None:
            return 0
        if self.action == "push":
            return 2 if self.s2_intent_frame is not None else 1
        if self.action in ("stack", "place_bowl"):
            if self.open_frame is not None:
                return 3
            if self.s2_intent_frame is not None:
                return 2
        return 1 if self.lift_frame is not None else 0

    # -- scoring ------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        if self.action == "pickup":
            phases = [self.stage1("stage1_source_select", 0.8, S2_PICKUP_LIFT), self.finish_phase()]
            gate_pickup(phases)
            intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
            return self.assemble(phases, intent, exec_, {"retry_bonus": None})
        if self.action == "push":
            phases = [self.push_setup(), self.push_stage(), self.finish_phase()]
        elif self.action == "stack":
            phases = [self.stage1("stage1_source_select", 0.4, LIFT), self.stack_stage(), self.finish_phase()]
        else:
            phases = [self.stage1("stage1_source_select", 0.4, LIFT), self.bowl_stage(), self.finish_phase()]
        gate_three_stage(phases)
        intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
        retry_ok, retry_why = self.retry_final()
        intent_bonus, intent = add_bonus(intent, retry_ok, cap=1.0)
        exec_bonus, exec_ = add_bonus(exec_, retry_ok, cap=1.0)
        retry = {"final_target_ok": retry_ok, "final_target_reason": retry_why, "intent_bonus": intent_bonus,
                 "exec_bonus": exec_bonus, "intent_score_after_bonus": intent, "exec_score_after_bonus": exec_}
        return self.assemble(phases, intent, exec_, {"retry_bonus": retry}, retry_ok=retry_ok)

    def retry_final(self) -> tuple[bool, str]:
        if self.action == "push":
            ok = self.retry_best >= PUSH_RETRY_DIST
            return ok, f"max push along target direction {self.retry_best:.4f} m (need {PUSH_RETRY_DIST})"
        if self.action == "stack":
            return self.placed_now, ("last frame stacked on " if self.placed_now else "last frame not stacked on ") \
                + self.target
        ok = self.placed_now and self.nearest_bowl_now
        return ok, ("last frame in " if ok else "last frame not in ") + self.target

    def push_setup(self) -> Phase:
        if self.close is None:
            why = f"{self.arm} gripper never closed below {PUSH_CLOSE_THRESHOLD}"
            return Phase("stage1_push_setup", 0.4, False, why, False, why)
        if self.first_moved is None:
            why = "source never moved on the table after the close"
            return Phase("stage1_push_setup", 0.4, False, why, False, why)
        if self.setup_intent is not None:
            intent_why = f"pushing {self.source} at frame {self.setup_intent}"
        else:
            intent_why = f"{self.source} never the nearest object within {GRASP_XY} while it moved"
        if not self.near_table_first:
            exec_ok, exec_why = False, f"gripper not near the table at frame {self.first_moved}"
        elif self.setup_exec is None:
            exec_ok, exec_why = False, f"{self.source} never the nearest object within {PUSH_EXEC_XY} while it moved"
        else:
            exec_ok, exec_why = True, f"near the table, pushing {self.source}"
        return Phase("stage1_push_setup", 0.4, self.setup_intent is not None, intent_why, exec_ok, exec_why)

    def push_stage(self) -> Phase:
        best = self.best_push
        shown = f"{best:.4f}" if best > -math.inf else "none"
        i_ok, e_ok = best >= PUSH_INTENT_DIST, best >= PUSH_EXEC_DIST
        return Phase("stage2_push", 0.4, i_ok, f"best push toward {self.target} {shown} m (need {PUSH_INTENT_DIST})",
                     e_ok, f"best push toward {self.target} {shown} m (need {PUSH_EXEC_DIST})")

    def stack_stage(self) -> Phase:
        if self.s2_intent_frame is not None:
            intent, intent_why = True, f"held above {self.target} at frame {self.s2_intent_frame}"
        else:
            intent, intent_why = False, f"never lifted above {self.target} with the gripper at the source"
        exec_ok, exec_why = release_verdict(self.open_frame, self.open_ok, self.placed_now, f"on {self.target}")
        if exec_ok and self.dropped_at is not None:
            exec_ok, exec_why = False, f"dropped off {self.target} at frame {self.dropped_at}"
        return Phase("stage2_stack", 0.4, intent, intent_why, exec_ok, exec_why)

    def bowl_stage(self) -> Phase:
        if self.s2_intent_frame is not None:
            intent, intent_why = True, f"lowered into {self.target} at frame {self.s2_intent_frame}"
        else:
            intent, intent_why = False, f"never low inside {self.target} (nearest bowl)"
        exec_ok, exec_why = release_verdict(self.open_frame, self.open_ok, self.placed_now, f"in {self.target}")
        return Phase("stage2_place_bowl", 0.4, intent, intent_why, exec_ok, exec_why)
