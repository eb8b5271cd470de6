"""Scene 4 ``sequence_pickups``: action A (arm, source), then action B (second arm, second source).

A "start" is the first close event of an arm (every closing crossing, plus frame 0 if closed
there) where the wanted object is nearest (its support excluded) within 0.07. B's start counts
from A's lift frame, or from A's start while A has not lifted; both candidates are latched as
frames arrive so no rescan is needed when A lifts. The finish anchor (B lift, else A lift, else A
start) only ever moves to the current frame, so the two return-home trackers restart there.
"""

from __future__ import annotations

from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.events import FinishTracker
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import nearest, support_under
from robofollow_ros.scoring.rules_base import SceneRules
from robofollow_ros.scoring.scene4 import conditional_full_success
from robofollow_ros.scoring.stages import Phase
from robofollow_ros.scoring.thresholds import FINISH_SCENE4, GRASP_XY, LIFT


class _Start:
    """A start candidate of one action and the first lift of its object at or after it."""

    __slots__ = ("lift", "start")

    def __init__(self) -> None:
        self.start: int | None = None
        self.lift: int | None = None


class SequenceRules(SceneRules):
    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        if task.second_source is None or task.second_arm is None:
            raise ValueError(f"task {task.task_id}: sequence_pickups without second_source/second_arm")
        self.b_arm, self.b_source = task.second_arm, task.second_source
        self.a = _Start()
        self.b_from_zero: int | None = None
        self.b_after_a_start = _Start()
        self.b_after_a_lift = _Start()
        self.anchor: tuple[int, int] | None = None
        self.trackers: dict[str, FinishTracker] = {}

    def _matches(self, arm: str, wanted: str, frame: Frame) -> bool:
        support = support_under(wanted, frame.objects, self.candidates)
        chosen, dist = nearest(frame.ee(arm), frame.objects, self.candidates, exclude=support)
        return chosen == wanted and dist <= GRASP_XY

    def _lifted(self, name: str, frame: Frame) -> bool:
        assert self.f0 is not None
        return frame.objects[name][2] - self.f0.objects[name][2] >= LIFT

    def scene_update(self, t: int, frame: Frame) -> None:
        a = self.a
        if a.start is None and self.events[self.arm] is not None and self._matches(self.arm, self.source, frame):
            a.start = t
        if a.start is not None and a.lift is None and self._lifted(self.source, frame):
            a.lift = t
        if self.events[self.b_arm] is not None and self._matches(self.b_arm, self.b_source, frame):
            if self.b_from_zero is None:
                self.b_from_zero = t
            if a.start is not None and self.b_after_a_start.start is None:
                self.b_after_a_start.start = t
            if a.lift is not None and self.b_after_a_lift.start is None:
                self.b_after_a_lift.start = t
        b_lifted = self._lifted(self.b_source, frame)
        for cand in (self.b_after_a_start, self.b_after_a_lift):
            if cand.start is not None and cand.lift is None and b_lifted:
                cand.lift = t
        self._update_finish_both(t, frame)

    @property
    def b(self) -> _Start:
        return self.b_after_a_lift if self.a.lift is not None else self.b_after_a_start

    def _anchor_now(self) -> tuple[int, int] | None:
        if self.b.lift is not None:
            return 3, self.b.lift
        if self.a.lift is not None:
            return 2, self.a.lift
        if self.a.start is not None:
            return 1, self.a.start
        return None

    def _update_finish_both(self, t: int, frame: Frame) -> None:
        assert self.f0 is not None
        anchor = self._anchor_now()
        if anchor is None:
            return
        if anchor != self.anchor:
            self.anchor = anchor
            self.trackers = {arm: FinishTracker(FINISH_SCENE4, t, self.f0.ee(arm)) for arm in ("left", "right")}
        for arm, tracker in self.trackers.items():
            tracker.update(t, frame.ee(arm), frame.gripper(arm))

    def evaluate(self) -> dict[str, Any]:
        names = ("stage1_action_a", "stage2_action_b", "stage3_finish")
        maxima = (0.4, 0.4, 0.2)
        a, b = self.a, self.b
        zero_why: str | None = None
        if self.b_from_zero is not None and (a.start is None or self.b_from_zero < a.start):
            zero_why = f"reverse order: {self.b_arm} arm started {self.b_source} at frame {self.b_from_zero} first"
        if a.start is None:
            zero_why = f"no start of action A ({self.arm} arm on {self.source})"
        if zero_why is not None:
            phases = [Phase(n, m, False, zero_why, False, zero_why) for n, m in zip(names, maxima, strict=True)]
        else:
            a_exec = a.lift is not None
            s1 = Phase(names[0], 0.4, True, f"A started at frame {a.start}", a_exec,
                       f"A lifted at frame {a.lift}" if a_exec else f"{self.source} not lifted after the start")
            if b.start is None:
                why = f"no start of action B ({self.b_arm} arm on {self.b_source})"
                s2 = Phase(names[1], 0.4, False, why, False, why)
            else:
                s2 = Phase(names[1], 0.4, True, f"B started at frame {b.start}", b.lift is not None,
                           f"B lifted at frame {b.lift}" if b.lift is not None else f"{self.b_source} not lifted")
            outcomes = [self.trackers[arm].outcome(arm) for arm in ("left", "right")]
            ok = all(o.ok for o in outcomes)
            why = "; ".join(o.reason for o in outcomes)
            phases = [s1, s2, Phase(names[2], 0.2, ok, why, ok, why)]
        intent, exec_ = sum(p.intent for p in phases), sum(p.exec for p in phases)
        extras = {"conditional_full_success": conditional_full_success(self.task, phases, intent, exec_)}
        return self.assemble(phases, intent, exec_, extras, wrong_arm_penalty=False)
