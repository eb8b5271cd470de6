"""Running facts about grippers and the return-home (finish) rule, kept in O(1) per frame.

Why trackers and not scans: the monitor must cost the same on frame 50,000 as on frame 5, so
each rule keeps only the facts it needs (first crossing, run lengths, latches) as frames arrive.
"""

from __future__ import annotations

from robofollow_ros.scoring.thresholds import CLOSE_THRESHOLD, OPEN_THRESHOLD, FinishRule

#: What :meth:`GripperTrack.update` reports for a frame.
FALLBACK, TRANSITION = "fallback", "transition"


class GripperTrack:
    """Close events of one gripper at one threshold.

    The evaluator's ``_first_close_event``: the first t >= 1 with g[t-1] > c >= g[t]; if there is
    none, the first t >= 0 with g[t] <= c -- which can only be frame 0, since a later first closed
    frame is itself a crossing. Its ``_close_events`` list (Scene 4 sequences) is frame 0 when
    closed there, then every crossing; :meth:`update` reports each as it happens.
    """

    __slots__ = ("closed_at_0", "first_transition", "prev", "threshold")

    def __init__(self, threshold: float = CLOSE_THRESHOLD) -> None:
        self.threshold = threshold
        self.prev: float | None = None
        self.first_transition: int | None = None
        self.closed_at_0 = False

    def update(self, t: int, g: float) -> str | None:
        """Feed frame t; FALLBACK for a closed frame 0, TRANSITION for a crossing, else None."""
        c = self.threshold
        prev = self.prev
        self.prev = g
        if prev is None:
            if g <= c:
                self.closed_at_0 = True
                return FALLBACK
            return None
        if prev > c and g <= c:
            if self.first_transition is None:
                self.first_transition = t
            return TRANSITION
        return None

    @property
    def first_close(self) -> int | None:
        if self.first_transition is not None:
            return self.first_transition
        return 0 if self.closed_at_0 else None


def opened(prev: float, g: float) -> bool:
    """An opening event at this frame: g[t-1] < 0.7 <= g[t].

    The evaluator's ``_first_open_event_after(close)`` searches from close + 1 and falls back to
    the first open frame; the frame before the first open frame after a close is either the close
    itself (closed) or not open, so that fallback is always this crossing.
    """
    return prev < OPEN_THRESHOLD and g >= OPEN_THRESHOLD


class FinishTracker:
    """Return-home facts of one arm from a fixed completion frame ``start`` onward.

    The home frame is the first t >= start whose next w frames (clipped at the end) are all
    within ``reset_dist``, w = min(20, max(1, n - start)). That is exactly the start of the first
    run of in-reach frames that is at least 20 long, or, failing that, the start of the run still
    open at the last frame; so a run-length counter and one latch decide it incrementally.
    Frames after a latched home frame only need the first "left home" distance; gripper
    re-closes after ``start`` need the previous gripper value. Distances are passed in (the
    caller computes each frame's distance to home once, the evaluator's way).
    """

    __slots__ = ("home_frame", "last_dist", "left_dist", "prev_g", "reclosed", "rule", "run_start", "start")

    def __init__(self, rule: FinishRule, start: int) -> None:
        self.rule = rule
        self.start = start
        self.run_start: int | None = None
        self.home_frame: int | None = None
        #: Distance of the first frame after the home frame that is farther than ``leave_home``.
        self.left_dist: float | None = None
        self.reclosed = False
        self.prev_g: float | None = None
        self.last_dist = 0.0

    def update(self, t: int, dist: float, g: float) -> None:
        rule = self.rule
        self.last_dist = dist
        if self.home_frame is None:
            if dist <= rule.reset_dist:
                if self.run_start is None:
                    self.run_start = t
                if t - self.run_start + 1 >= rule.stable_window:
                    self.home_frame = self.run_start
            else:
                self.run_start = None
        elif self.left_dist is None and dist > rule.leave_home:
            self.left_dist = dist
        prev = self.prev_g
        if prev is not None and prev > CLOSE_THRESHOLD and g <= CLOSE_THRESHOLD:
            self.reclosed = True
        self.prev_g = g

    @property
    def home(self) -> int | None:
        """The home frame if the trial ended now."""
        return self.home_frame if self.home_frame is not None else self.run_start

    @property
    def late_by(self) -> int | None:
        """Frames from ``start`` to the home frame when that exceeds the limit, else None."""
        home = self.home
        if home is None or home - self.start <= self.rule.max_return_frames:
            return None
        return home - self.start

    def problems(self, arm: str) -> list[str]:
        """The three-stage evaluators' finish problems of the operating arm, in their order."""
        out: list[str] = []
        if self.home is None:
            out.append(f"{arm} arm did not return home stably (final dist={self.last_dist * 100:.1f}cm)")
        else:
            if self.late_by is not None:
                out.append(f"{arm} arm returned too late ({self.late_by} steps)")
            if self.left_dist is not None:
                out.append(f"{arm} arm left home again (dist={self.left_dist * 100:.1f}cm)")
        if self.reclosed:
            out.append("operating gripper re-closed after completion")
        return out

    def sequence_problems(self, arm: str) -> list[str]:
        """The sequence evaluator's wording; an arm that is not home is not checked further."""
        if self.home is None:
            return [f"{arm} arm not home (final={self.last_dist * 100:.1f}cm)"]
        out: list[str] = []
        if self.late_by is not None:
            out.append(f"{arm} arm home too late ({self.late_by} steps)")
        if self.left_dist is not None:
            out.append(f"{arm} arm left home again ({self.left_dist * 100:.1f}cm)")
        if self.reclosed:
            out.append(f"{arm} gripper re-closed after completion")
        return out
