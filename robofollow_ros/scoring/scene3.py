"""Scene 3 (route and orientation): source select 0.3, route 0.3, orientation 0.4; no finish stage.

Running facts: the close choice, the lift latch, the first frame on the scored route, and the
current frame's yaw error and label distance (the orientation stage reads only the last frame).
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import axis_error, xy_dist, yaw_of
from robofollow_ros.scoring.scene1 import LiftingRules
from robofollow_ros.scoring.stages import Phase, gate_three_stage
from robofollow_ros.scoring.thresholds import (
    LABEL_EDGE,
    LIFT,
    ORIENT_EXEC,
    ORIENT_INTENT,
    ROUTE_X,
    ROUTE_Y_CORRECT,
    ROUTE_Y_WRONG,
    S3_MAX,
)


class Scene3Rules(LiftingRules):
    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        if task.scored_pass_over_object is None or task.scored_avoid_object is None or task.target_yaw_rad is None:
            raise ValueError(f"task {task.task_id}: Scene 3 task lacks its scored route or target yaw")
        self.correct = task.scored_pass_over_object
        self.wrong = task.scored_avoid_object
        self.label = task.target or ""
        self.target_yaw = task.target_yaw_rad
        self.required_quats = (task.source,)
        self.route_frame: int | None = None
        self.yaw_err = math.inf
        self.label_xy = math.inf

    def on_close(self, t: int, frame: Frame) -> None:
        super().on_close(t, frame)
        self.route_frame = None

    def scene_update(self, t: int, frame: Frame) -> None:
        objs = frame.objects
        src = objs[self.source]
        self.yaw_err = axis_error(yaw_of(frame.object_quats[self.source]), self.target_yaw)
        self.label_xy = xy_dist(src, objs[self.label])
        if self.close is None:
            return
        self.advance_phase(t, frame)
        if self.route_frame is None and self.lift_frame is not None:
            good, bad = objs[self.correct], objs[self.wrong]
            dy_good, dy_bad = abs(src[1] - good[1]), abs(src[1] - bad[1])
            if (abs(src[0] - good[0]) < ROUTE_X and dy_good < ROUTE_Y_CORRECT and dy_bad > ROUTE_Y_WRONG
                    and dy_good < dy_bad):
                self.route_frame = t

    def evaluate(self) -> dict[str, Any]:
        s1 = self.stage1("stage1_source_select", S3_MAX["stage1_source_select"], LIFT)
        if self.route_frame is not None:
            route_ok, route_why = True, f"passed over {self.correct} at frame {self.route_frame}"
        else:
            route_ok, route_why = False, f"never carried over {self.correct} clear of {self.wrong}"
        s2 = Phase("stage2_route", S3_MAX["stage2_route"], route_ok, route_why, route_ok, route_why)
        phases = [s1, s2, self.orientation()]
        gate_three_stage(phases)
        intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
        return self.assemble(phases, intent, exec_, {})

    def orientation(self) -> Phase:
        err_deg = math.degrees(self.yaw_err)
        on_label = self.label_xy < LABEL_EDGE
        where = f"last frame: {self.source} {self.label_xy:.3f} m from {self.label}, axis error {err_deg:.1f} deg"
        if not on_label:
            why = f"{where}; not on the label (>= {LABEL_EDGE:.4f})"
            return Phase("stage3_orientation", S3_MAX["stage3_orientation"], False, why, False, why)
        i_ok, e_ok = self.yaw_err <= ORIENT_INTENT, self.yaw_err <= ORIENT_EXEC
        return Phase("stage3_orientation", S3_MAX["stage3_orientation"],
                     i_ok, f"{where} ({'<=' if i_ok else '>'} 40)", e_ok, f"{where} ({'<=' if e_ok else '>'} 20)")
