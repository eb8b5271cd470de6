"""Safety filter for commands that move a real arm.

Every command passes four checks before it reaches a driver: finite values, joint limits, a per-step
clamp against the measured position, and a workspace box on the tool points. Around them sit an
e-stop and a watchdog. On any doubt (NaN, no measured state, out-of-box, e-stop, stale commands) the
filter answers *hold*: command the last measured position, never a guess.

Time comes in as an argument (monotonic seconds) so the watchdog is tested without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from robofollow_ros.contract import ACTION_DIM, ARM_SLICE, ARMS, GRIPPER_INDEX, JOINT_NAMES
from robofollow_ros.robot.urdf_limits import JointLimit

#: Tool-point function: (arm, 14-vector) -> xyz of that arm's TCP in the world frame.
ToolPoints = Callable[[str, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SafetyConfig:
    """Limits of one rig; every field is validated so a typo cannot disable a check."""

    joint_limits: Mapping[str, JointLimit]
    max_step_rad: float = 0.05
    max_gripper_step: float = 0.2
    watchdog_timeout_s: float = 0.1
    workspace_min: tuple[float, float, float] = (-0.6, -0.6, 0.745)
    workspace_max: tuple[float, float, float] = (0.6, 0.4, 1.4)

    def __post_init__(self) -> None:
        for name in ("max_step_rad", "max_gripper_step", "watchdog_timeout_s"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
        lo, hi = np.asarray(self.workspace_min), np.asarray(self.workspace_max)
        if lo.shape != (3,) or hi.shape != (3,) or not np.all(lo < hi):
            raise ValueError(f"workspace_min/workspace_max: need min < max per axis, got {lo.tolist()} / {hi.tolist()}")
        missing = [j for j in JOINT_NAMES if j not in self.joint_limits and not j.endswith("_gripper")]
        if missing:
            raise ValueError(f"joint_limits: no limits for {missing}")
        for name in JOINT_NAMES:
            limit = self.joint_limits.get(name)
            if limit is None:
                continue
            if not (np.isfinite(limit.lower) and np.isfinite(limit.upper)):
                raise ValueError(f"joint_limits.{name}: lower {limit.lower!r} and upper {limit.upper!r} must be finite")
            if limit.lower > limit.upper:
                raise ValueError(f"joint_limits.{name}: lower {limit.lower!r} > upper {limit.upper!r}")


@dataclass
class SafetyDecision:
    """What to send: ``command`` (14 values, always set) and why, if it differs from the request."""

    command: np.ndarray
    hold: bool
    clamped: bool = False
    reasons: list[str] = field(default_factory=list)


class SafetyFilter:
    """Stateful filter between ``/robofollow/joint_command`` and the arm drivers."""

    def __init__(self, config: SafetyConfig, tool_points: ToolPoints | None = None) -> None:
        self.config = config
        self._tool_points = tool_points
        self._measured: np.ndarray | None = None
        self._last_command_time: float | None = None
        self._estop = False
        self._holding_since_stale = False
        lower = np.full(ACTION_DIM, -np.inf)
        upper = np.full(ACTION_DIM, np.inf)
        for i, name in enumerate(JOINT_NAMES):
            if name.endswith("_gripper"):
                lower[i], upper[i] = 0.0, 1.0
            else:
                lim = config.joint_limits[name]
                lower[i], upper[i] = lim.lower, lim.upper
        self._lower, self._upper = lower, upper
        step = np.full(ACTION_DIM, config.max_step_rad)
        for arm in ARMS:
            step[GRIPPER_INDEX[arm]] = config.max_gripper_step
        self._max_step = step

    # -- inputs ----------------------------------------------------------------------------------
    def update_measured(self, positions: np.ndarray) -> None:
        """The latest measured joint positions (14, RoboFollow order)."""
        q = np.asarray(positions, dtype=float)
        if q.shape == (ACTION_DIM,) and np.all(np.isfinite(q)):
            self._measured = q.copy()

    def set_estop(self, engaged: bool) -> None:
        """Engage or release the e-stop; after release, motion resumes only with a fresh command."""
        if self._estop and not engaged:
            self._last_command_time = None
        self._estop = engaged

    @property
    def estop(self) -> bool:
        return self._estop

    # -- decisions -------------------------------------------------------------------------------
    def hold(self, reason: str) -> SafetyDecision | None:
        """Hold the measured position; ``None`` when nothing has been measured yet (send nothing)."""
        if self._measured is None:
            return None
        return SafetyDecision(self._measured.copy(), hold=True, reasons=[reason])

    def filter(self, command: np.ndarray, now: float) -> SafetyDecision | None:
        """Check one incoming command; ``None`` means send nothing (no measured state to hold)."""
        q = np.asarray(command, dtype=float)
        if self._estop:
            return self.hold("e-stop engaged")
        if q.shape != (ACTION_DIM,):
            return self.hold(f"command: expected {ACTION_DIM} values, got shape {q.shape}")
        if not np.all(np.isfinite(q)):
            bad = [JOINT_NAMES[i] for i in np.flatnonzero(~np.isfinite(q))]
            return self.hold(f"command: non-finite value for {', '.join(bad)}")
        if self._measured is None:
            return None
        reasons: list[str] = []
        limited = np.clip(q, self._lower, self._upper)
        for i in np.flatnonzero(limited != q):
            span = f"[{self._lower[i]:.4f}, {self._upper[i]:.4f}]"
            reasons.append(f"{JOINT_NAMES[i]}: {q[i]:.4f} outside {span}, clamped")
        delta = limited - self._measured
        # Within the step limit the target goes out exactly as asked (measured + delta can differ by an ulp).
        too_far = np.abs(delta) > self._max_step
        stepped = np.where(too_far, self._measured + np.clip(delta, -self._max_step, self._max_step), limited)
        for i in np.flatnonzero(too_far):
            reasons.append(f"{JOINT_NAMES[i]}: step {delta[i]:+.4f} exceeds {self._max_step[i]:.4f}, clamped")
        if self._tool_points is not None:
            lo, hi = np.asarray(self.config.workspace_min), np.asarray(self.config.workspace_max)
            for arm in ARMS:
                p = np.asarray(self._tool_points(arm, stepped))
                if not (np.all(p >= lo) and np.all(p <= hi)):
                    return self.hold(f"{arm} tool point {np.round(p, 3).tolist()} leaves the workspace box")
        self._last_command_time = now
        self._holding_since_stale = False
        return SafetyDecision(stepped, hold=False, clamped=bool(reasons), reasons=reasons)

    def watchdog(self, now: float) -> SafetyDecision | None:
        """Called periodically: once commands go stale, hold the measured position (once per stall)."""
        if self._last_command_time is None or self._holding_since_stale:
            return None
        if now - self._last_command_time <= self.config.watchdog_timeout_s:
            return None
        self._holding_since_stale = True
        age = now - self._last_command_time
        return self.hold(f"watchdog: no command for {age * 1000:.0f} ms")

    @staticmethod
    def arm_slice(arm: str) -> slice:
        return ARM_SLICE[arm]
