"""What every scene's rules share: frame-0 facts, gripper tracks, the close-anchored phase, the finish.

A scene subclass says what happens from the operating arm's close onward (``on_close`` starts
that phase, ``scene_update`` advances it) and which event anchors completion
(``completion_rank``). The base keeps the finish tracker in step with that anchor.

Why the anchor restarts are cheap: completion_t is "the highest-priority event seen so far, else
the last frame", and every event is detected on the frame it happens. So the anchor only ever
moves to the *current* frame, and the finish tracker restarts there with no history to replay.
The close frame itself can move once: a gripper closed at frame 0 gives a provisional close
(the spec's fallback) that the first real closing crossing replaces; the phase then restarts
at that crossing, again the current frame.
"""

from __future__ import annotations

from typing import Any, ClassVar

from robofollow_ros.benchmark import EvalTask, Layout
from robofollow_ros.scoring.events import FinishTracker, GripperTrack
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.geometry import in_operation_area, nearest
from robofollow_ros.scoring.stages import Phase, completion_ok, messages, ok_flags
from robofollow_ros.scoring.thresholds import CLOSE_THRESHOLD, GRASP_XY, WRONG_ARM_PENALTY, FinishRule


def release_verdict(open_frame: int | None, open_ok: bool, placed_now: bool, where: str) -> tuple[bool, str]:
    """Execution of a place-like stage: released at the goal and still there at the last frame.

    ``where`` reads like "on yellow_cylinder" or "in green_bowl".
    """
    if open_frame is None:
        return False, "gripper never opened after the close"
    if not open_ok:
        return False, f"not {where} at open frame {open_frame}"
    if not placed_now:
        return False, f"not {where} at the last frame"
    return True, f"released {where} at frame {open_frame}"


def other_arm(arm: str) -> str:
    return "right" if arm == "left" else "left"


class SceneRules:
    """Base of the per-scene rule sets; one instance scores one trial, frame by frame."""

    #: Thresholds of the finish stage, or None where the scene has none (Scene 3).
    finish_rule: ClassVar[FinishRule | None] = None
    #: Threshold that defines the operating arm's close (Scene 2 push uses 0.25).
    close_threshold: float = CLOSE_THRESHOLD

    def __init__(self, task: EvalTask, layout: Layout, slot_xy: dict[int, tuple[float, float]]) -> None:
        self.task = task
        self.layout = layout
        self.slot_xy = slot_xy
        self.arm = task.arm
        self.other = other_arm(task.arm)
        self.source = task.source
        self.candidates = tuple(o.name for o in layout.objects if o.is_candidate)
        self.required_objects = layout.names
        self.required_quats: tuple[str, ...] = ()
        self.n = 0
        self.f0: Frame | None = None
        self.grip = {"left": GripperTrack(), "right": GripperTrack()}
        self.op_close = GripperTrack(self.close_threshold)
        #: This frame's close event per arm at 0.35 ("fallback", "transition" or None).
        self.events: dict[str, str | None] = {"left": None, "right": None}
        self.close: int | None = None
        self.phase_serial = 0
        self.src_max_z = float("-inf")
        self.other_in_area: int | None = None
        self._anchor_key: tuple[int, int] | None = None
        self._finish: FinishTracker | None = None

    # -- per frame ---------------------------------------------------------------------------------
    def update(self, frame: Frame) -> None:
        t = self.n
        if t == 0:
            self.f0 = frame
        self.n = t + 1
        g_op = frame.gripper(self.arm)
        self.events = {"left": self.grip["left"].update(t, frame.gripper_left),
                       "right": self.grip["right"].update(t, frame.gripper_right)}
        event = self.op_close.update(t, g_op)
        if event == "fallback" or (event == "transition" and self.op_close.first_transition == t):
            self.close = t
            self.phase_serial += 1
            self.on_close(t, frame)
        z = frame.objects[self.source][2]
        if z > self.src_max_z:
            self.src_max_z = z
        self.scene_update(t, frame)
        if self.finish_rule is not None:
            self._update_finish(t, frame)

    def _update_finish(self, t: int, frame: Frame) -> None:
        if self.other_in_area is None and in_operation_area(frame.ee(self.other)):
            self.other_in_area = t
        rank = self.completion_rank()
        key = (self.phase_serial, rank)
        if rank == 0 or key != self._anchor_key:
            self._anchor_key = key
            self.restart_finish(t)
        self.feed_finish(t, frame)

    def restart_finish(self, t: int) -> None:
        assert self.f0 is not None and self.finish_rule is not None
        self._finish = FinishTracker(self.finish_rule, t, self.f0.ee(self.arm))

    def feed_finish(self, t: int, frame: Frame) -> None:
        assert self._finish is not None
        self._finish.update(t, frame.ee(self.arm), frame.gripper(self.arm))

    # -- scene hooks ---------------------------------------------------------------------------------
    def on_close(self, t: int, frame: Frame) -> None:
        """The operating arm's close (re)starts the phase at frame t."""

    def scene_update(self, t: int, frame: Frame) -> None:
        """Advance the scene's running facts with frame t."""

    def completion_rank(self) -> int:
        """Priority of the event that anchors completion_t now; 0 means "the last frame"."""
        return 0

    def evaluate(self) -> dict[str, Any]:
        raise NotImplementedError

    # -- shared rule pieces -------------------------------------------------------------------------
    @property
    def z0(self) -> float:
        assert self.f0 is not None
        return self.f0.objects[self.source][2]

    def grasp_choice(self, frame: Frame, exclude: str | None = None) -> tuple[str | None, float]:
        return nearest(frame.ee(self.arm), frame.objects, self.candidates, exclude)

    def wrong_object_phase(self, chosen: str | None, dist: float) -> tuple[bool, str]:
        """Stage-1 intent: at the close, the source is the nearest candidate and closer than 0.07."""
        if self.close is None:
            return False, f"{self.arm} gripper never closed"
        if chosen != self.source:
            return False, f"wrong object at close frame {self.close}: nearest is {chosen}, not {self.source}"
        if not dist < GRASP_XY:
            return False, f"{self.source} too far at close frame {self.close} (xy {dist:.3f} >= {GRASP_XY})"
        return True, f"grasped {self.source} at frame {self.close} (xy {dist:.3f})"

    def finish_phase(self) -> Phase:
        """``stage3_finish``: non-operating arm out of the area; operating arm home in time and stays."""
        assert self.finish_rule is not None and self._finish is not None
        rule = self.finish_rule
        if self.other_in_area is not None:
            why = f"{self.other} arm inside the operation area at frame {self.other_in_area}"
            return Phase("stage3_finish", rule.max_score, False, why, False, why)
        out = self._finish.outcome(self.arm)
        return Phase("stage3_finish", rule.max_score, out.ok, out.reason, out.ok, out.reason)

    def wrong_arm(self) -> tuple[bool, str]:
        """Scenes 1-3: the other gripper closed at all, or the first arm to close is not the task arm."""
        mine, theirs = self.grip[self.arm].first_close, self.grip[self.other].first_close
        if theirs is not None:
            return True, f"{self.other} gripper closed at frame {theirs}"
        if mine is None:
            return False, "no arm closed"
        return False, f"{self.arm} arm closed first"

    def assemble(self, phases: list[Phase], intent: float, exec_: float, extras: dict[str, Any],
                 final_target_ok: bool | None = None, retry_ok: bool | None = None,
                 wrong_arm_penalty: bool = True) -> dict[str, Any]:
        """The RoboFollow results.json entry (without the runner's fields), penalty applied last."""
        intent_msg, exec_msg = messages(phases)
        if wrong_arm_penalty:
            wrong, why = self.wrong_arm()
            last = phases[-1]
            ip = min(intent, WRONG_ARM_PENALTY) if wrong and last.intent_full else 0.0
            ep = min(exec_, WRONG_ARM_PENALTY) if wrong and last.exec_full else 0.0
            intent, exec_ = intent - ip, exec_ - ep
            if wrong:
                intent_msg += "; wrong arm participated"
                exec_msg += "; wrong arm participated"
            extras.update(wrong_arm_participated=wrong, wrong_arm_reason=why,
                          wrong_arm_intent_penalty=ip, wrong_arm_exec_penalty=ep)
        intent_ok, exec_ok = ok_flags(intent, exec_)
        done = completion_ok(self.task.action, intent, exec_, phases, final_target_ok, retry_ok)
        return {
            "task": self.task.task_id, "instruction": self.task.instruction,
            "intent_ok": intent_ok, "intent_msg": intent_msg, "exec_ok": exec_ok, "exec_msg": exec_msg,
            "completion_ok": done, "intent_score": round(intent, 10), "exec_score": round(exec_, 10),
            "phases": [p.as_result() for p in phases], **extras, "frames": self.n,
        }
