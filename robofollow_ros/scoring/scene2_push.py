"""Scene 2 push: push setup (stage 1), the push itself (stage 2), finish, and the push retry bonus.

Both grippers' closes use the 0.25 threshold (the task arm's setup and the other arm's wrong-arm
check alike). Running facts from the close onward: the first frame the source moved on the table
and whether the gripper was near the table there, whether the source was ever the nearest object
within 0.07 / 0.08 while moving, the best projected push toward the target from the close-frame
position (and its frame, which anchors completion); from frame 0: the best projection for the
retry bonus.
"""

from __future__ import annotations

import math

import numpy as np

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame, Vec3
from robofollow_ros.scoring.scene2 import Scene2Rules
from robofollow_ros.scoring.stages import Phase
from robofollow_ros.scoring.thresholds import (
    GRASP_XY,
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
)

#: The gripper must be on the source's back side: (EE - source) . u <= -this.
BACKSIDE_MARGIN = 0.0


class PushRules(Scene2Rules):
    close_threshold = PUSH_CLOSE_THRESHOLD

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        self.desired = (0.0, 0.0)
        self.u: tuple[float, float] | None = None
        self.retry_best = 0.0
        self.ref = (0.0, 0.0)
        self._reset_push()

    def _reset_push(self) -> None:
        self.pushed_on_table = False
        self.max_on_table_move = self.max_leave_table = 0.0
        self.move_eval: tuple[float, bool] | None = None
        self.best_src_xy = math.inf
        self.setup_intent = self.setup_exec = False
        self.best_projected, self.best_cos = 0.0, -1.0
        self.best_t: int | None = None
        self.best_backside = math.inf
        self.directional = False

    def start_phase(self, t: int, frame: Frame) -> None:
        super().start_phase(t, frame)
        src = frame.objects[self.source]
        self.ref = (src[0], src[1])
        self._reset_push()

    def frame_update(self, t: int, frame: Frame) -> None:
        src = frame.objects[self.source]
        assert self.f0 is not None
        s0 = self.f0.objects[self.source]
        if t == 0:
            tg = frame.objects[self.target]
            self.desired = (tg[0] - s0[0], tg[1] - s0[1])
            dn = self.math.norm2(*self.desired)
            self.u = (self.desired[0] / dn, self.desired[1] / dn) if dn >= 1e-8 else None
        if self.u is not None:
            projected = self.math.dot2(src[0] - s0[0], src[1] - s0[1], *self.u)
            if projected > self.retry_best:
                self.retry_best = projected

    def phase_update(self, t: int, frame: Frame) -> None:
        super().phase_update(t, frame)
        if t <= (self.close or 0):
            return
        src, ee = frame.objects[self.source], frame.ee(self.arm)
        dx, dy = src[0] - self.ref[0], src[1] - self.ref[1]
        move = self.math.norm2(dx, dy)
        self._setup_frame(frame, src, ee, move)
        if self.u is not None and move >= 1e-6:
            self._push_frame(t, src, ee, dx, dy)

    def _setup_frame(self, frame: Frame, src: Vec3, ee: Vec3, move: float) -> None:
        lift = max(0.0, src[2] - self.z0)
        self.max_leave_table = max(self.max_leave_table, lift)
        on_table = lift <= PUSH_ON_TABLE_DZ
        if on_table:
            self.max_on_table_move = max(self.max_on_table_move, move)
        if not on_table or move < PUSH_MIN_MOVE:
            return
        self.pushed_on_table = True
        src_xy = self.math.xy_dist(ee, src)
        if self.move_eval is None:
            offset = abs(ee[2] - PUSH_EE_OFFSET - self.z0)
            self.move_eval = (offset, offset <= PUSH_NEAR_TABLE)
        if self.math.nearest(ee, frame.objects, self.candidates)[0] != self.source:
            return
        self.best_src_xy = min(self.best_src_xy, src_xy)
        if src_xy < GRASP_XY:
            self.setup_intent = True
        if self.move_eval[1] and src_xy < PUSH_EXEC_XY:
            self.setup_exec = True

    def _push_frame(self, t: int, src: Vec3, ee: Vec3, dx: float, dy: float) -> None:
        assert self.u is not None
        cos = self.math.cos_sim(dx, dy, *self.desired)
        if cos < PUSH_COS:
            return
        self.directional = True
        backside = self.math.dot2(ee[0] - src[0], ee[1] - src[1], *self.u)
        if backside < self.best_backside:
            self.best_backside = backside
        if backside > -BACKSIDE_MARGIN:
            return
        projected = self.math.dot2(dx, dy, *self.u)
        if projected > self.best_projected:
            self.best_projected, self.best_cos, self.best_t = projected, cos, t

    def completion_anchor(self, chain: str) -> tuple[str, int]:
        if self.close is not None:
            if self.best_t is not None and self.best_projected >= PUSH_INTENT_DIST:
                return "push", self.best_t
            return "close", self.close
        return self.lift_anchor()

    # -- stages --------------------------------------------------------------------------------------
    def stage1_phase(self) -> Phase:
        name = "stage1_push_setup"
        if self.close is None:
            return Phase.failed(name, 0.4, "operating arm never fully closed gripper")
        not_pushed = ("source not pushed on-table (on_table_move="
                      f"{self.max_on_table_move * 100:.1f}cm, max_lift={self.max_leave_table * 100:.1f}cm)")
        never_nearest = "on-table push detected but source was never nearest to gripper"
        if self.setup_intent:
            intent_why = "ok"
        elif not self.pushed_on_table:
            intent_why = not_pushed
        elif math.isfinite(self.best_src_xy):
            intent_why = (f"on-table push detected with source-nearest frame, best source_xy="
                          f"{self.best_src_xy * 100:.1f}cm (need < {GRASP_XY * 100:.0f}cm)")
        else:
            intent_why = never_nearest
        if self.setup_exec:
            exec_why = "ok"
        elif not self.pushed_on_table:
            exec_why = not_pushed
        elif self.move_eval is None:
            exec_why = "no valid 0.5cm push-move event found"
        elif not self.move_eval[1]:
            exec_why = (f"at first 0.5cm source move, contact point not near table enough: offset="
                        f"{self.move_eval[0] * 100:.1f}cm (need < {PUSH_NEAR_TABLE * 100:.0f}cm)")
        elif math.isfinite(self.best_src_xy):
            exec_why = (f"need source_xy<{PUSH_EXEC_XY * 100:.0f}cm after 0.5cm move event; got "
                        f"{self.best_src_xy * 100:.1f}cm")
        else:
            exec_why = never_nearest
        if self.wrong_arm():
            intent_why += "; wrong arm participated"
            exec_why += "; wrong arm participated"
        return Phase.verdict(name, 0.4, self.setup_intent, intent_why, self.setup_exec, exec_why)

    def stage2_phase(self) -> Phase:
        name = "stage2_push"
        if self.close is None:
            return Phase.failed(name, 0.4, "no push-setup close event")
        if self.u is None:
            return Phase.failed(name, 0.4, "target/source overlap in initial layout")
        best = self.best_projected
        intent_ok, exec_ok = best >= PUSH_INTENT_DIST, best >= PUSH_EXEC_DIST
        if self.best_t is None:
            if not self.directional:
                return Phase.verdict(
                    name, 0.4, intent_ok,
                    f"never moved in target direction (<=45deg); need >= {PUSH_INTENT_DIST * 100:.0f}cm",
                    exec_ok, f"never moved in target direction (<=45deg); need >= {PUSH_EXEC_DIST * 100:.0f}cm")
            why = ("directional push observed but gripper not on source back-side: best backside_proj="
                   f"{self.best_backside * 100:.1f}cm (need <= 0.0cm, i.e., on source back-side)")
            return Phase.verdict(name, 0.4, intent_ok, why, exec_ok, why)
        angle = float(np.rad2deg(np.arccos(np.clip(self.best_cos, -1.0, 1.0))))
        moved = f"direction ok (angle={angle:.1f}deg) but moved {best * 100:.1f}cm"
        return Phase.verdict(name, 0.4, intent_ok, "ok" if intent_ok else f"{moved} < {PUSH_INTENT_DIST * 100:.0f}cm",
                             exec_ok, "ok" if exec_ok else f"{moved} < {PUSH_EXEC_DIST * 100:.0f}cm")

    def retry_final(self) -> tuple[bool, str]:
        if self.u is None:
            return False, "target/source overlap in initial layout"
        ok = self.retry_best >= PUSH_RETRY_DIST
        return ok, "ok" if ok else (f"best projected move={self.retry_best * 100:.1f}cm "
                                    f"(need >= {PUSH_RETRY_DIST * 100:.1f}cm)")
