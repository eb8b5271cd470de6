"""Scene 3 (route and orientation): source select 0.3, route 0.3, orientation 0.4; no finish stage.

Running facts: the close choice, the lift latch from the frame after the close, the first frame
on the scored route (or the closest miss before it, for the reason); the orientation stage reads
only the last frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import axis_error, yaw_of
from robofollow_ros.scoring.scene1 import LiftingRules
from robofollow_ros.scoring.stages import Phase, completion_ok, gate_three_stage, totals
from robofollow_ros.scoring.thresholds import (
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
        label_size = layout.object(self.label).size
        #: The evaluator's ``_target_label_edge_length``: twice the larger half-size of the label.
        self.label_edge = 2.0 * float(max(label_size[0], label_size[1]))
        self.target_yaw = float(task.target_yaw_rad)
        self.required_quats = (task.source,)
        self.route_frame: int | None = None
        self.route_best: tuple[float, float, float] | None = None

    def start_phase(self, t: int, frame: Frame) -> None:
        super().start_phase(t, frame)
        self.route_frame = None
        self.route_best = None

    def phase_update(self, t: int, frame: Frame) -> None:
        super().phase_update(t, frame)
        if self.route_frame is not None or not self.lifted_after_close:
            return
        objs = frame.objects
        src, good, bad = objs[self.source], objs[self.correct], objs[self.wrong]
        x_diff, yc, yw = abs(src[0] - good[0]), abs(src[1] - good[1]), abs(src[1] - bad[1])
        if x_diff < ROUTE_X and yc < ROUTE_Y_CORRECT and yw > ROUTE_Y_WRONG and yc < yw:
            self.route_frame, self.route_best = t, (x_diff, yc, yw)
            return
        best = self.route_best
        if best is None or (x_diff + yc - yw) < (best[0] + best[1] - best[2]):
            self.route_best = (x_diff, yc, yw)

    def route(self) -> Phase:
        name, top = "stage2_route", S3_MAX["stage2_route"]
        if self.close is None:
            return Phase.failed(name, top, "no grasp close event")
        best = self.route_best
        if self.route_frame is not None and best is not None:
            why = (f"ok: |x-src-correct|={best[0] * 100:.1f}cm, |y-src-correct|={best[1] * 100:.1f}cm, "
                   f"|y-src-wrong|={best[2] * 100:.1f}cm")
            return Phase(name, top, why, top, why, top)
        if best is None:
            return Phase.failed(name, top, "no post-grasp lifted trajectory")
        return Phase.failed(name, top, "need |x-src-correct|<1.0cm, |y-src-correct|<6.0cm, |y-src-wrong|>4.0cm, "
                            f"and |y-src-correct|<|y-src-wrong|; best={best[0] * 100:.1f}/{best[1] * 100:.1f}/"
                            f"{best[2] * 100:.1f}cm")

    def orientation(self) -> Phase:
        name, top = "stage3_orientation", S3_MAX["stage3_orientation"]
        if self.close is None:
            return Phase.failed(name, top, "no grasp close event")
        assert self.last is not None
        err = axis_error(yaw_of(self.last.object_quats[self.source]), self.target_yaw)
        dist = self.math.xy_dist(self.last.objects[self.source], self.last.objects[self.label])
        place_ok = dist < self.label_edge
        place_why = f"final center distance={dist * 100:.1f}cm (need < {self.label_edge * 100:.1f}cm)"
        verdicts = []
        for limit in (ORIENT_INTENT, ORIENT_EXEC):
            yaw_ok = err <= limit
            reasons = [] if yaw_ok else [
                f"final yaw error={np.rad2deg(err):.1f}deg (need <= {np.rad2deg(limit):.1f}deg)"]
            if not place_ok:
                reasons.append(place_why)
            verdicts.append((yaw_ok and place_ok, "ok" if yaw_ok and place_ok else "; ".join(reasons)))
        (intent_ok, intent_why), (exec_ok, exec_why) = verdicts
        return Phase.verdict(name, top, intent_ok, intent_why, exec_ok, exec_why)

    def evaluate(self) -> dict[str, Any]:
        phases = gate_three_stage([self.stage1("stage1_source_select", S3_MAX["stage1_source_select"], LIFT),
                                   self.route(), self.orientation()])
        return self.finish_entry(phases)

    def evaluate_empty(self) -> dict[str, Any]:
        return self.finish_entry(gate_three_stage([
            Phase.failed("stage1_source_select", S3_MAX["stage1_source_select"], "trajectory/source missing"),
            Phase.failed("stage2_route", S3_MAX["stage2_route"], "no grasp close event"),
            Phase.failed("stage3_orientation", S3_MAX["stage3_orientation"], "no grasp close event")]))

    def finish_entry(self, phases: list[Phase]) -> dict[str, Any]:
        intent, exec_, max_total = totals(phases)
        entry = self.with_wrong_arm(phases, intent, exec_, max_total)
        entry["completion_ok"] = completion_ok(self.task.action, entry["intent_score"], entry["exec_score"], phases)
        return entry
