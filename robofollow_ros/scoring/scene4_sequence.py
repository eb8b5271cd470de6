"""Scene 4 ``sequence_pickups``: action A (arm, source), then action B (second arm, second source).

A "start" is the first close event of an arm (frame 0 if closed there, then every closing
crossing) at which the wanted object is nearest (its support excluded) within 0.07. B's start
counts from A's lift frame, or from A's start while A has not lifted; both candidates are latched
as frames arrive, so no rescan is needed when A lifts. The finish anchor (B lift, else A lift,
else A start) only ever moves to the current frame, so the two return-home trackers restart there.
"""

from __future__ import annotations

from typing import Any

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.events import FinishTracker, GripperTrack
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.rules_base import SceneRules
from robofollow_ros.scoring.scene4 import scene4_candidates, scene4_entry
from robofollow_ros.scoring.stages import Phase
from robofollow_ros.scoring.thresholds import FINISH_SCENE4, GRASP_XY, LIFT

ARMS = ("left", "right")
NAMES = ("stage1_action_a", "stage2_action_b", "stage3_finish")


class _Pick:
    """One pickup of the sequence from its start: the first lift at or after it and the highest lift."""

    __slots__ = ("lift", "max_lift", "start")

    def __init__(self) -> None:
        self.start: int | None = None
        self.lift: int | None = None
        self.max_lift = 0.0

    def feed(self, t: int, lift: float) -> None:
        if self.start is None:
            return
        if lift > self.max_lift:
            self.max_lift = lift
        if self.lift is None and lift >= LIFT:
            self.lift = t

    def phase(self, name: str) -> Phase:
        lifted = self.lift is not None
        return Phase(name, 0.4, "ok", 0.4 if lifted else 0.0,
                     "ok" if lifted else f"lift={self.max_lift * 100:.1f}cm (<{LIFT * 100:.1f}cm)", 0.4)


class SequenceRules(SceneRules):
    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        super().__init__(task, layout, slot_xy)
        if task.second_source is None or task.second_arm is None:
            raise ValueError(f"task {task.task_id}: sequence_pickups without second_source/second_arm")
        self.b_arm, self.b_source = task.second_arm, task.second_source
        self.grippers = {arm: GripperTrack() for arm in ARMS}
        self.a = _Pick()
        self.b_from_zero: int | None = None
        self.b_after_a_start = _Pick()
        self.b_after_a_lift = _Pick()
        self.anchor: tuple[int, int] | None = None
        self.trackers: dict[str, FinishTracker] = {}

    @staticmethod
    def candidate_order(layout: Layout) -> tuple[str, ...]:
        return scene4_candidates(layout)

    def _matches(self, arm: str, wanted: str, frame: Frame) -> bool:
        """``_find_matching_start`` at one close event: the wanted object nearest, within 0.07."""
        support = self.math.support_under(wanted, frame.objects, self.candidates)
        chosen, dist = self.math.nearest(frame.ee(arm), frame.objects, self.candidates, exclude=support)
        return chosen == wanted and dist is not None and dist <= GRASP_XY

    def _lift(self, name: str, frame: Frame) -> float:
        assert self.f0 is not None
        return frame.objects[name][2] - self.f0.objects[name][2]

    def update(self, frame: Frame) -> None:
        t = self.n
        if t == 0:
            self.f0 = frame
        self.n = t + 1
        self.last = frame
        events = {arm: self.grippers[arm].update(t, frame.gripper(arm)) for arm in ARMS}
        a = self.a
        if a.start is None and events[self.arm] is not None and self._matches(self.arm, self.source, frame):
            a.start = t
        a.feed(t, self._lift(self.source, frame))
        if events[self.b_arm] is not None and self._matches(self.b_arm, self.b_source, frame):
            if self.b_from_zero is None:
                self.b_from_zero = t
            if a.start is not None and self.b_after_a_start.start is None:
                self.b_after_a_start.start = t
            if a.lift is not None and self.b_after_a_lift.start is None:
                self.b_after_a_lift.start = t
        b_lift = self._lift(self.b_source, frame)
        self.b_after_a_start.feed(t, b_lift)
        self.b_after_a_lift.feed(t, b_lift)
        self._update_finish(t, frame)

    @property
    def b(self) -> _Pick:
        return self.b_after_a_lift if self.a.lift is not None else self.b_after_a_start

    def _anchor_now(self) -> tuple[int, int] | None:
        if self.b.start is not None and self.b.lift is not None:
            return 3, self.b.lift
        if self.a.lift is not None:
            return 2, self.a.lift
        if self.a.start is not None:
            return 1, self.a.start
        return None

    def _update_finish(self, t: int, frame: Frame) -> None:
        assert self.f0 is not None
        anchor = self._anchor_now()
        if anchor is None:
            return
        if anchor != self.anchor:
            assert anchor[1] == t, f"sequence finish anchor {anchor} moved to the past at {t}"
            self.anchor = anchor
            self.trackers = {arm: FinishTracker(FINISH_SCENE4, t) for arm in ARMS}
        for arm in ARMS:
            self.trackers[arm].update(t, self.math.dist3(frame.ee(arm), self.f0.ee(arm)), frame.gripper(arm))

    def evaluate(self) -> dict[str, Any]:
        a, b = self.a, self.b
        if a.start is not None and self.b_from_zero is not None and self.b_from_zero < a.start:
            why = f"reverse order detected: B@{self.b_from_zero} < A@{a.start}"
            return scene4_entry(self, [Phase.failed(n, m, why) for n, m in zip(NAMES, (0.4, 0.4, 0.2), strict=True)])
        if a.start is None:
            return self.evaluate_empty()
        if b.start is None:
            s2 = Phase.failed(NAMES[1], 0.4, "B action never started after A completion")
        else:
            s2 = b.phase(NAMES[1])
        problems = [p for arm in ARMS for p in self.trackers[arm].sequence_problems(arm)]
        finish = Phase.failed(NAMES[2], 0.2, "; ".join(problems)) if problems else Phase(
            NAMES[2], 0.2, "ok", 0.2, "ok", 0.2)
        return scene4_entry(self, [a.phase(NAMES[0]), s2, finish])

    def evaluate_empty(self) -> dict[str, Any]:
        gated = "gated: A score is zero"
        return scene4_entry(self, [Phase.failed(NAMES[0], 0.4, "A action never started"),
                                   Phase.failed(NAMES[1], 0.4, gated), Phase.failed(NAMES[2], 0.2, gated)])
