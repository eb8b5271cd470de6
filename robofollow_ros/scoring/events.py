"""Running facts about grippers and the return-home (finish) rule, kept in O(1) per frame.

Why trackers and not scans: the monitor must cost the same on frame 50,000 as on frame 5, so
each rule keeps only the facts it needs (first crossing, run lengths, latches) as frames arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from robofollow_ros.scoring.thresholds import CLOSE_THRESHOLD, OPEN_THRESHOLD, FinishRule


class GripperTrack:
    """Close events of one gripper at one threshold.

    ``first_close`` follows the spec: the first t >= 1 with g[t-1] > c >= g[t]; if there is
    none, the first t >= 0 with g[t] <= c (which can only be frame 0: a later first value
    below c is itself a crossing).
    """

    __slots__ = ("closed_at_0", "first_transition", "prev", "threshold")

    def __init__(self, threshold: float = CLOSE_THRESHOLD) -> None:
        self.threshold = threshold
        self.prev: float | None = None
        self.first_transition: int | None = None
        self.closed_at_0 = False

    def update(self, t: int, g: float) -> str | None:
        """Feed frame t; ``"fallback"`` for a closed frame 0, ``"transition"`` for a crossing, else None."""
        c = self.threshold
        prev = self.prev
        self.prev = g
        if prev is None:
            if g <= c:
                self.closed_at_0 = True
                return "fallback"
            return None
        if prev > c >= g:
            if self.first_transition is None:
                self.first_transition = t
            return "transition"
        return None

    @property
    def first_close(self) -> int | None:
        if self.first_transition is not None:
            return self.first_transition
        return 0 if self.closed_at_0 else None

    @property
    def has_close(self) -> bool:
        return self.first_transition is not None or self.closed_at_0


def opened(prev: float, g: float) -> bool:
    """An opening event at this frame: g[t-1] < 0.7 <= g[t]."""
    return prev < OPEN_THRESHOLD <= g


@dataclass
class FinishOutcome:
    ok: bool
    reason: str
    home_frame: int | None


class FinishTracker:
    """Return-home facts of one arm from a fixed completion frame ``start`` onward.

    The home frame is the first t >= start whose next w frames (clipped at the end) are all
    within ``reset_dist``, w = min(20, max(1, n - start)). That is exactly the start of the first
    run of in-reach frames that is at least 20 long, or, failing that, the start of the run still
    open at the last frame; so a run-length counter and one latch decide it incrementally.
    Frames after a latched home frame only need a "left home" flag; gripper re-closes after
    ``start`` need the previous gripper value.
    """

    __slots__ = ("home", "home_frame", "left_home", "prev_g", "reclosed", "rule", "run_start", "start")

    def __init__(self, rule: FinishRule, start: int, home: tuple[float, float, float]) -> None:
        self.rule = rule
        self.start = start
        self.home = home
        self.run_start: int | None = None
        self.home_frame: int | None = None
        self.left_home = False
        self.reclosed = False
        self.prev_g: float | None = None

    def update(self, t: int, ee: tuple[float, float, float], g: float) -> None:
        h = self.home
        d2 = (ee[0] - h[0]) ** 2 + (ee[1] - h[1]) ** 2 + (ee[2] - h[2]) ** 2
        rule = self.rule
        if self.home_frame is None:
            if d2 <= rule.reset_dist * rule.reset_dist:
                if self.run_start is None:
                    self.run_start = t
                if t - self.run_start + 1 >= rule.stable_window:
                    self.home_frame = self.run_start
            else:
                self.run_start = None
        elif d2 > rule.leave_home * rule.leave_home:
            self.left_home = True
        prev = self.prev_g
        if prev is not None and prev > CLOSE_THRESHOLD >= g:
            self.reclosed = True
        self.prev_g = g

    def outcome(self, arm: str) -> FinishOutcome:
        home = self.home_frame if self.home_frame is not None else self.run_start
        if home is None:
            return FinishOutcome(False, f"{arm} arm did not return home after frame {self.start}", None)
        if home - self.start > self.rule.max_return_frames:
            return FinishOutcome(
                False, f"{arm} arm returned home late (frame {home}, {home - self.start} frames after "
                f"{self.start} > {self.rule.max_return_frames})", home)
        if self.left_home:
            return FinishOutcome(False, f"{arm} arm left home after returning at frame {home}", home)
        if self.reclosed:
            return FinishOutcome(False, f"{arm} gripper re-closed after frame {self.start}", home)
        return FinishOutcome(True, f"{arm} arm home at frame {home}", home)
