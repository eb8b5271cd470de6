"""What every scene's rules share: frame-0 facts, gripper tracks, the close-anchored phase, the finish.

A scene subclass says what it tracks every frame (``frame_update``), what it tracks from the
operating arm's close onward (``start_phase`` resets it, ``phase_update`` advances it) and which
event anchors completion (``completion_anchor``). The base keeps finish trackers in step with the
anchor.

Why the anchor restarts are cheap: completion_t is "the highest-priority event seen so far, else
the last frame", and every event is detected on the frame it happens. So the anchor only ever
moves to the *current* frame, and the finish tracker restarts there with no history to replay.
The close frame itself can move once: a gripper closed at frame 0 gives a provisional close
(the evaluator's fallback) that the first real closing crossing replaces; the phase then restarts
at that crossing, again the current frame.
"""

from __future__ import annotations

from typing import Any, ClassVar

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.events import FALLBACK, TRANSITION, FinishTracker, GripperTrack, opened
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import Arith, in_operation_area
from robofollow_ros.scoring.stages import Phase, ok_flags, score_message
from robofollow_ros.scoring.thresholds import CLOSE_THRESHOLD, LIFT, WRONG_ARM_PENALTY, FinishRule

#: ``completion_anchor`` value meaning "the last frame".
LAST_FRAME = ("last", -1)


def other_arm(arm: str) -> str:
    return "right" if arm == "left" else "left"


class SceneRules:
    """Base of the per-scene rule sets; one instance scores one trial, frame by frame."""

    #: Thresholds of the finish stage, or None where the scene has none (Scene 3).
    finish_rule: ClassVar[FinishRule | None] = None
    #: Threshold that defines both arms' closes (Scene 2 push uses 0.25).
    close_threshold: float = CLOSE_THRESHOLD

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        self.task = task
        self.layout = layout
        self.slot_xy = slot_xy
        self.arm = task.arm
        self.other = other_arm(task.arm)
        self.source = task.source
        self.candidates = self.candidate_order(layout)
        self.required_objects = layout.names
        self.required_quats: tuple[str, ...] = ()
        self.math = Arith()
        self.n = 0
        self.f0: Frame | None = None
        #: The latest frame: the last frame's state when the trial ends.
        self.last: Frame | None = None
        self.z0 = 0.0
        self.track = GripperTrack(self.close_threshold)
        self.other_track = GripperTrack(self.close_threshold)
        self.prev_g: float | None = None
        self.src_max_z = float("-inf")
        #: First frame (from 0) with the source lifted: completion's fallback while nothing closed.
        self.lift_from_0: int | None = None
        self.other_in_area = False
        # close-anchored phase
        self.close: int | None = None
        self.lift_frame: int | None = None
        self.open_frame: int | None = None
        self._anchors: dict[str, tuple[str, int]] = {}
        self.finish: dict[str, FinishTracker] = {}

    @staticmethod
    def candidate_order(layout: Layout) -> tuple[str, ...]:
        """Nearest-object candidates in the order the evaluator's trajectory lists them (ties)."""
        return tuple(o.name for o in layout.objects if o.is_candidate)

    # -- per frame ---------------------------------------------------------------------------------
    def update(self, frame: Frame) -> None:
        t = self.n
        if t == 0:
            self.f0 = frame
            self.z0 = frame.objects[self.source][2]
        self.n = t + 1
        self.last = frame
        g = frame.gripper(self.arm)
        event = self.track.update(t, g)
        self.other_track.update(t, frame.gripper(self.other))
        if event == FALLBACK or (event == TRANSITION and self.track.first_transition == t):
            self.close = t
            self.lift_frame = None
            self.open_frame = None
            self.start_phase(t, frame)
        z = frame.objects[self.source][2]
        if z > self.src_max_z:
            self.src_max_z = z
        if self.lift_from_0 is None and z - self.z0 >= LIFT:
            self.lift_from_0 = t
        if not self.other_in_area and in_operation_area(frame.ee(self.other)):
            self.other_in_area = True
        self.frame_update(t, frame)
        if self.close is not None:
            if self.lift_frame is None and z - self.z0 >= LIFT:
                self.lift_frame = t
            if self.open_frame is None and t > self.close and self.prev_g is not None and opened(self.prev_g, g):
                self.open_frame = t
            self.phase_update(t, frame)
        self.prev_g = g
        if self.finish_rule is not None:
            self.update_finish(t, frame)

    def update_finish(self, t: int, frame: Frame) -> None:
        assert self.f0 is not None and self.finish_rule is not None
        dist = self.math.dist3(frame.ee(self.arm), self.f0.ee(self.arm))
        g = frame.gripper(self.arm)
        for chain in self.finish_chains():
            self.feed_chain(chain, self.completion_anchor(chain), t, dist, g)

    def feed_chain(self, chain: str, anchor: tuple[str, int], t: int, dist: float, g: float) -> None:
        """Restart the chain's tracker at t when its anchor moved (it can only move to t), then feed t."""
        assert self.finish_rule is not None
        if anchor == LAST_FRAME or anchor != self._anchors.get(chain):
            assert anchor == LAST_FRAME or anchor[1] == t, f"completion anchor {anchor} moved to the past at {t}"
            self._anchors[chain] = anchor
            self.finish[chain] = FinishTracker(self.finish_rule, t)
        self.finish[chain].update(t, dist, g)

    # -- scene hooks ---------------------------------------------------------------------------------
    def start_phase(self, t: int, frame: Frame) -> None:
        """The operating arm's close (re)starts the phase at frame t."""

    def frame_update(self, t: int, frame: Frame) -> None:
        """Facts of every frame, kept before the phase's (which may read them)."""

    def phase_update(self, t: int, frame: Frame) -> None:
        """Advance the phase's running facts with frame t >= close."""

    def finish_chains(self) -> tuple[str, ...]:
        return ("main",)

    def completion_anchor(self, chain: str) -> tuple[str, int]:
        """The event that anchors completion_t now, as (kind, frame); LAST_FRAME for the last frame."""
        return LAST_FRAME

    def evaluate(self) -> dict[str, Any]:
        raise NotImplementedError

    def evaluate_empty(self) -> dict[str, Any]:
        """The evaluator's verdict on a trajectory without frames."""
        raise NotImplementedError

    # -- shared rule pieces -------------------------------------------------------------------------
    def lift_anchor(self) -> tuple[str, int]:
        """First lift at or after the close (from frame 0 while nothing closed), else the last frame."""
        if self.close is not None:
            return ("lift", self.lift_frame) if self.lift_frame is not None else LAST_FRAME
        return ("lift0", self.lift_from_0) if self.lift_from_0 is not None else LAST_FRAME

    def finish_phase(self, chain: str = "main") -> Phase:
        """``stage3_finish`` of the three-stage evaluators."""
        problems = ["non-operating arm entered operation area"] if self.other_in_area else []
        problems += self.finish[chain].problems(self.arm)
        if problems:
            return Phase.failed("stage3_finish", 0.2, "; ".join(problems))
        return Phase("stage3_finish", 0.2, "ok", 0.2, "ok", 0.2)

    def wrong_arm(self) -> bool:
        """Scenes 1-3: the other gripper closed at all, or the task arm did not close first.

        The evaluator decides this only once it has a frame; without one it is never set.
        """
        if self.n == 0:
            return False
        mine, theirs = self.track.first_close, self.other_track.first_close
        return theirs is not None or mine is None

    def with_wrong_arm(self, phases: list[Phase], intent: float, exec_: float, max_total: float,
                       intent_msg_extra: str = "", exec_msg_extra: str = "") -> dict[str, Any]:
        """Scenes 1-3: the wrong-arm penalty after any bonus, then the entry's common fields."""
        wrong = self.wrong_arm()
        ip = ep = 0.0
        if wrong:
            tail = phases[-1]
            if tail.intent_full:
                ip = WRONG_ARM_PENALTY
                intent = max(0.0, intent - ip)
            if tail.exec_full:
                ep = WRONG_ARM_PENALTY
                exec_ = max(0.0, exec_ - ep)
        entry = self.entry(phases, intent, exec_, max_total, intent_msg_extra, exec_msg_extra, ip, ep)
        entry.update(wrong_arm_intervened=wrong, wrong_arm_intent_penalty=ip, wrong_arm_exec_penalty=ep)
        return entry

    def entry(self, phases: list[Phase], intent: float, exec_: float, max_total: float,
              intent_msg_extra: str = "", exec_msg_extra: str = "", intent_penalty: float = 0.0,
              exec_penalty: float = 0.0) -> dict[str, Any]:
        """The results.json fields every scene writes (completion is added by the scene)."""
        intent_ok, exec_ok = ok_flags(intent, exec_, max_total)
        intent_msg = score_message("intent", intent, intent_ok, max_total) + intent_msg_extra
        exec_msg = score_message("exec", exec_, exec_ok, max_total) + exec_msg_extra
        if intent_penalty > 0.0:
            intent_msg += f" (-{intent_penalty:.1f} wrong-arm penalty)"
        if exec_penalty > 0.0:
            exec_msg += f" (-{exec_penalty:.1f} wrong-arm penalty)"
        return {"task": self.task.task_id, "instruction": self.task.instruction, "intent_ok": intent_ok,
                "intent_msg": intent_msg, "exec_ok": exec_ok, "completion_ok": False, "exec_msg": exec_msg,
                "intent_score": float(intent), "exec_score": float(exec_),
                "phases": [p.as_result() for p in phases], "frames": self.n}


def stage1_reasons(chosen: str | None, src_xy: float, intent_ok: bool, exec_ok: bool, max_lift: float,
                   need: float, wrong_arm: bool) -> tuple[str, str]:
    """Stage-1 reasons of the Scene 1-3 evaluators (``source_select``)."""
    intent_why = "ok" if intent_ok else f"at first close: closest={chosen}, source_xy={src_xy * 100:.1f}cm"
    if exec_ok:
        exec_why = "ok"
    elif intent_ok:
        exec_why = f"source lift={max_lift * 100:.1f}cm (need >= {need * 100:.1f}cm)"
    else:
        exec_why = "intent not correct at first close"
    if wrong_arm:
        intent_why += "; wrong arm participated"
        exec_why += "; wrong arm participated"
    return intent_why, exec_why
