"""Safety filter for commands that move a real arm.

Every command passes four checks before it reaches a driver: finite values, joint limits, a per-step
clamp against the measured position, and a workspace box on the tool points. Around them sit an
e-stop and a watchdog. On any doubt (NaN, no measured state, out-of-box, e-stop, stale commands) the
filter answers *hold*: command the last measured position, never a guess.

Guarantees (``test_rig_safety_properties.py`` checks every one on every decision of generated streams):

* **Every target lies within the joint limits** (the URDF's; grippers in [0, 1], which the driver map
  turns into a finger position within the URDF's finger range) — whatever the measured state, hold
  targets included. A command is clipped to the intersection of the limits and one step around the
  measured position, so the step clamp can never push a target outside them (clamping the step
  *after* the limits did: an arm measured at 4.0 rad against a 2.6 limit was sent 3.95).
* **Within one step of the measured position** (``max_step_rad``, ``max_gripper_step``) for every arm
  that is commanded at all; within the step and the limits a target goes out exactly as asked.
* **An arm measured outside its limits is held, never driven further out.** A position controller
  given a target drives the joint to it with whatever effort it takes, so the two obvious holds are
  both wrong there: the measured position is itself outside the limits, and the nearest limit may be
  far away (a jump the step clamp exists to prevent). So when a joint reads beyond a limit by more
  than ``limit_tolerance_rad`` (the noise of an encoder at a limit the arm was sent to; capped at one
  step), the filter holds both arms — a policy's plan for two arms is void when one cannot follow it —
  and reports the joint, its value and its limits. Each arm holds at its measured position clipped
  into the limits when that is at most one step away: the least motion that obeys the limits, and it
  leads back towards them. When it is farther, that arm is sent **nothing** (``SafetyDecision.arms``
  leaves it out): its driver keeps the last target it was given, which this filter chose and which
  lies within the limits, and someone has to look at an arm that reads well outside its range
  (recalibrate it, or move it back by hand) — no automatic motion of more than a step is safe there.
  Within the tolerance, commands pass as usual (within the limits and within a step, so they lead
  back inside; a hold at a limit does not stall a policy that wants to move away from it). Grippers
  have no tolerance: their readings arrive normalised and clipped into [0, 1].
* **Nothing queued before an e-stop release executes after it.** A release (engaged → released) marks a
  point on two clocks: the node's clock (``now``; sim time under ``use_sim_time``) and the
  middleware's reception clock (``received``). Afterwards a command executes only if it was
  *received* after the release message and, when it carries a stamp, is *stamped* after the release.
  Both: the reception rule catches everything the subscription and executor queued (a command's
  ``header.stamp`` need not be set), the stamp rule a publisher's backlog delivered late (computed
  before the release). Strictly after: a command computed from the state measured at the release
  instant is not newer than it — in the sim, where time stands still between commands, the hold this
  refusal sends executes a row and advances ``/clock``, so the next command is newer. A command without
  a stamp (zero ``header.stamp``) is judged by its reception alone; when the reception time is unknown
  (a middleware that gives none), only a stamped command can show it is new, so an unstamped one is
  refused. A publisher stamping on another clock than the bridge's (a driver's time since boot) is
  refused after a release until its stamps pass the release: fail-safe, and reported. Refused
  commands are holds, as under the e-stop. The rule stays in force until the next release: an old
  command arriving late, from any publisher, is refused then too. A ``False`` without a preceding
  ``True`` (a panel repeating "not engaged") is no release.
* **Nothing computed before a watchdog hold executes after it.** When the watchdog holds (no command
  for ``watchdog_timeout_s``: a lost link, a dead or frozen policy), it notes the stamp of the newest
  state the bridge had published (``watchdog``'s ``state_stamp``). A stamped command whose stamp is
  not later than that is refused (a hold): it was computed from, and sent beside, a state the arm had
  before the silence, like the backlog a reliable DDS link delivers in a burst when a cable is plugged
  back. A policy node stamps each command with the newest state it had when it sent it, on the same
  clock as the states, so the first command computed after the link returns passes, and lifts the
  rule. An unstamped command is refused while the rule is in force: nothing tells its age, and the
  backlog of a publisher that does not stamp is exactly what the rule is for (measured: 200 unstamped
  pre-hold commands moved the arms 0.30 rad when they were let through). Only a command that
  *executes* lifts the rule — one refused for any other reason (non-finite, the wrong length, the
  workspace, nothing measured, an arm outside its limits) leaves it in force, or a newer-stamped bad
  command would open the way for the old backlog behind it. A hold without a known state stamp takes
  the node's clock at the hold. ``lift_watchdog_rule`` lifts it at an operator's explicit act (a
  teleoperation takeover, whose source's earlier messages the bridge has already dropped).
* **Holds never move the arm** further than into its limits: a hold's target is the measured
  position clipped into the limits (equal to it for every joint within them).

Time comes in as an argument (seconds on the node's clock) so the watchdog and the e-stop rule are
tested without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from robofollow_ros.contract import ACTION_DIM, ARM_SLICE, ARMS, GRIPPER_INDEX, JOINT_NAMES
from robofollow_ros.robot.urdf_limits import JointLimit

#: Tool-point function: (arm, 14-vector) -> xyz of that arm's TCP in the world frame.
ToolPoints = Callable[[str, np.ndarray], np.ndarray]

#: The vector indices of each arm: its six joints and its gripper.
ARM_INDEX: dict[str, np.ndarray] = {
    arm: np.r_[np.arange(ARM_SLICE[arm].start, ARM_SLICE[arm].stop), GRIPPER_INDEX[arm]] for arm in ARMS
}
#: The arm of each vector index.
JOINT_ARM: tuple[str, ...] = tuple(next(arm for arm in ARMS if i in ARM_INDEX[arm]) for i in range(ACTION_DIM))


@dataclass(frozen=True)
class SafetyConfig:
    """Limits of one rig; every field is validated so a typo cannot disable a check."""

    joint_limits: Mapping[str, JointLimit]
    max_step_rad: float = 0.05
    max_gripper_step: float = 0.2
    watchdog_timeout_s: float = 0.1
    workspace_min: tuple[float, float, float] = (-0.6, -0.6, 0.745)
    workspace_max: tuple[float, float, float] = (0.6, 0.4, 1.4)
    #: How far beyond a joint limit a measured joint may read and still count as *at* the limit (rad).
    limit_tolerance_rad: float = 0.01

    def __post_init__(self) -> None:
        for name in ("max_step_rad", "max_gripper_step", "watchdog_timeout_s"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
        if not (np.isfinite(self.limit_tolerance_rad) and self.limit_tolerance_rad >= 0):
            raise ValueError(f"limit_tolerance_rad: must be a finite number >= 0, got {self.limit_tolerance_rad!r}")
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


@dataclass(frozen=True)
class OutsideLimit:
    """A joint measured beyond its limit by more than the tolerance."""

    arm: str
    joint: str
    value: float
    lower: float
    upper: float
    #: False when the nearest limit is more than one step away: the joint's arm is sent nothing.
    commanded: bool

    def describe(self) -> str:
        beyond = self.value - self.upper if self.value > self.upper else self.lower - self.value
        action = ("held at its limit" if self.commanded
                  else f"{beyond:.4f} beyond it, more than one step: the {self.arm} arm is not commanded")
        return (f"{self.joint} measured {self.value:.4f}, outside its limits [{self.lower:.4f}, {self.upper:.4f}]: "
                f"{action}")

    def as_dict(self) -> dict[str, object]:
        return {"joint": self.joint, "value": self.value, "lower": self.lower, "upper": self.upper,
                "commanded": self.commanded}


@dataclass
class SafetyDecision:
    """What to send: ``command`` (14 values within the limits, always set) to ``arms``, and why, if it
    differs from the request."""

    command: np.ndarray
    hold: bool
    clamped: bool = False
    reasons: list[str] = field(default_factory=list)
    #: The arms to send ``command`` to; an arm measured too far outside its limits is left out.
    arms: tuple[str, ...] = ARMS
    outside_limits: list[OutsideLimit] = field(default_factory=list)


@dataclass(frozen=True)
class Release:
    """An e-stop release: the node's clock then, and the reception time of the release message."""

    time: float
    received: float | None


class SafetyFilter:
    """Stateful filter between ``/robofollow/joint_command`` and the arm drivers."""

    def __init__(self, config: SafetyConfig, tool_points: ToolPoints | None = None) -> None:
        self.config = config
        self._tool_points = tool_points
        self._measured: np.ndarray | None = None
        self._last_command_time: float | None = None
        self._estop = False
        self._estop_reason = "e-stop engaged"
        self._release: Release | None = None
        self._holding_since_stale = False
        #: Commands refused since the last e-stop release because they were older than it.
        self.refused_since_release = 0
        #: The newest state's stamp when the watchdog last held (None: no such hold in force), and the
        #: commands refused as not newer than it.
        self._stale_hold_stamp: float | None = None
        self.refused_since_watchdog = 0
        lower = np.full(ACTION_DIM, -np.inf)
        upper = np.full(ACTION_DIM, np.inf)
        tolerance = np.zeros(ACTION_DIM)
        for i, name in enumerate(JOINT_NAMES):
            if name.endswith("_gripper"):
                lower[i], upper[i] = 0.0, 1.0  # normalised; the drivers' readings are clipped into it
            else:
                lim = config.joint_limits[name]
                lower[i], upper[i] = lim.lower, lim.upper
                tolerance[i] = config.limit_tolerance_rad
        self._lower, self._upper = lower, upper
        step = np.full(ACTION_DIM, config.max_step_rad)
        for arm in ARMS:
            step[GRIPPER_INDEX[arm]] = config.max_gripper_step
        self._max_step = step
        self._tolerance = np.minimum(tolerance, step)  # beyond a step, no target is both in limits and in reach

    @property
    def lower(self) -> np.ndarray:
        return self._lower.copy()

    @property
    def upper(self) -> np.ndarray:
        return self._upper.copy()

    @property
    def max_step(self) -> np.ndarray:
        return self._max_step.copy()

    # -- inputs ----------------------------------------------------------------------------------
    def update_measured(self, positions: np.ndarray) -> None:
        """The latest measured joint positions (14, RoboFollow order); a non-finite vector is ignored."""
        q = np.asarray(positions, dtype=float)
        if q.shape == (ACTION_DIM,) and np.all(np.isfinite(q)):
            self._measured = q.copy()

    @property
    def measured(self) -> np.ndarray | None:
        return None if self._measured is None else self._measured.copy()

    def set_estop(self, engaged: bool, now: float, received: float | None = None,
                  reason: str = "e-stop engaged") -> None:
        """Engage or release the e-stop at ``now`` (node clock, s); ``received``: the middleware's reception
        time of the message that released it (``None`` when unknown). After a release, motion resumes only
        with a command received after it and, when stamped, stamped after ``now``. ``reason``: the hold's
        reason while engaged (the trial manager's halt holds the arms the same way)."""
        self._estop_reason = reason
        if self._estop and not engaged:
            self._release = Release(now, received)
            self.refused_since_release = 0
            self._last_command_time = None
        self._estop = engaged

    @property
    def estop(self) -> bool:
        return self._estop

    @property
    def release(self) -> Release | None:
        return self._release

    # -- decisions -------------------------------------------------------------------------------
    def hold(self, reason: str) -> SafetyDecision | None:
        """Hold the measured position clipped into the limits; ``None`` when nothing has been measured yet
        (send nothing). An arm whose nearest limit is more than a step from its measured position is left
        out of ``arms``."""
        if self._measured is None:
            return None
        m = self._measured
        outside = self._outside_limits(m)
        target = self._within_limits(m)
        arms = tuple(arm for arm in ARMS if all(o.commanded for o in outside if o.arm == arm))
        reasons = [reason, *(o.describe() for o in outside)]
        return SafetyDecision(target, hold=True, reasons=reasons, arms=arms, outside_limits=outside)

    def filter(self, command: np.ndarray, now: float, *, stamp: float | None = None,
               received: float | None = None) -> SafetyDecision | None:
        """Check one incoming command; ``None`` means send nothing (no measured state to hold).

        ``stamp``: its ``header.stamp`` on the node's clock (s; ``None`` or 0 = not stamped);
        ``received``: when the middleware received it, on the clock of ``set_estop``'s ``received``."""
        q = np.asarray(command, dtype=float)
        if self._estop:
            return self.hold(self._estop_reason)
        stale = self._older_than_release(stamp or None, received)
        if stale is not None:
            self.refused_since_release += 1
            return self.hold(stale)
        older = self._older_than_watchdog_hold(stamp or None)
        if older is not None:
            self.refused_since_watchdog += 1
            return self.hold(older)
        if q.shape != (ACTION_DIM,):
            return self.hold(f"command: expected {ACTION_DIM} values, got shape {q.shape}")
        if not np.all(np.isfinite(q)):
            bad = [JOINT_NAMES[i] for i in np.flatnonzero(~np.isfinite(q))]
            return self.hold(f"command: non-finite value for {', '.join(bad)}")
        if self._measured is None:
            return None
        m = self._measured
        if self._outside_limits(m):
            return self.hold("the arms are measured outside their joint limits: holding")
        reasons: list[str] = []
        limited = self._within_limits(q)
        for i in np.flatnonzero(limited != q):
            span = f"[{self._lower[i]:.4f}, {self._upper[i]:.4f}]"
            reasons.append(f"{JOINT_NAMES[i]}: {q[i]:.4f} outside {span}, clamped")
        # One step around the measured position, intersected with the limits: never empty here (every
        # joint is within a tolerance <= one step of its limits), and within the step a target goes out
        # exactly as asked. The last clip makes "within the limits" exact whatever the rounding.
        reach_lo = np.maximum(self._lower, m - self._max_step)
        reach_hi = np.minimum(self._upper, m + self._max_step)
        stepped = self._within_limits(np.minimum(np.maximum(limited, reach_lo), reach_hi))
        for i in np.flatnonzero(stepped != limited):
            reasons.append(f"{JOINT_NAMES[i]}: step {limited[i] - m[i]:+.4f} exceeds {self._max_step[i]:.4f}, clamped")
        if self._tool_points is not None:
            lo, hi = np.asarray(self.config.workspace_min), np.asarray(self.config.workspace_max)
            for arm in ARMS:
                p = np.asarray(self._tool_points(arm, stepped))
                if not (np.all(p >= lo) and np.all(p <= hi)):
                    return self.hold(f"{arm} tool point {np.round(p, 3).tolist()} leaves the workspace box")
        self._last_command_time = now
        self._holding_since_stale = False
        self._stale_hold_stamp = None  # it executes, newer than the hold (checked above): the rule is lifted
        return SafetyDecision(stepped, hold=False, clamped=bool(reasons), reasons=reasons)

    def watchdog(self, now: float, state_stamp: float | None = None) -> SafetyDecision | None:
        """Called periodically: once commands go stale, hold the measured position (once per stall).

        ``state_stamp``: the stamp (s, the states' clock) of the newest state published when the hold
        begins (``None``: the node's clock ``now``); later commands unstamped or stamped no later than it are
        refused until one stamped later executes."""
        if self._last_command_time is None or self._holding_since_stale:
            return None
        if now - self._last_command_time <= self.config.watchdog_timeout_s:
            return None
        self._holding_since_stale = True
        self._stale_hold_stamp = state_stamp or now
        age = now - self._last_command_time
        return self.hold(f"watchdog: no command for {age * 1000:.0f} ms")

    @property
    def watchdog_rule(self) -> float | None:
        """The stamp a command must pass after the last watchdog hold (s), or ``None`` when no rule is in force."""
        return self._stale_hold_stamp

    def lift_watchdog_rule(self) -> None:
        """An operator's explicit act (a takeover) ends the rule: the source it hands the arms to is new."""
        self._stale_hold_stamp = None

    # -- helpers ---------------------------------------------------------------------------------
    def _older_than_watchdog_hold(self, stamp: float | None) -> str | None:
        """Why a command may predate the last watchdog hold, or ``None`` when no rule is in force or it is newer.
        Lifting the rule is ``filter``'s, and only for a command that executes."""
        rule = self._stale_hold_stamp
        if rule is None:
            return None
        if stamp is None:
            return ("command without a stamp after a watchdog hold: refused until a command stamped after the hold "
                    "executes (nothing tells an unstamped command's age)")
        if not stamp > rule:
            return (f"command stamped {rule - stamp:.3f} s before the newest state of the watchdog's hold: "
                    "a backlog delivered late, refused")
        return None

    def _older_than_release(self, stamp: float | None, received: float | None) -> str | None:
        """Why a command is not newer than the last e-stop release, or ``None`` when it is."""
        release = self._release
        if release is None:
            return None
        if received is not None and release.received is not None:
            if not received > release.received:
                return "command received before the e-stop release: refused (motion resumes with a newer command)"
        elif stamp is None:
            return ("unstamped command whose reception time is unknown after an e-stop release: refused "
                    "(stamp commands to resume motion)")
        if stamp is not None and not stamp > release.time:
            return (f"command stamped {release.time - stamp:.3f} s before the e-stop release: refused "
                    "(motion resumes with a command stamped after it)")
        return None

    def _within_limits(self, q: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(q, self._lower), self._upper)  # np.clip, without its per-call overhead

    def _outside_limits(self, m: np.ndarray) -> list[OutsideLimit]:
        beyond = np.maximum(self._lower - m, m - self._upper)
        return [OutsideLimit(JOINT_ARM[i], JOINT_NAMES[i], float(m[i]), float(self._lower[i]), float(self._upper[i]),
                             commanded=bool(beyond[i] <= self._max_step[i]))
                for i in np.flatnonzero(beyond > self._tolerance)]

    @staticmethod
    def arm_slice(arm: str) -> slice:
        return ARM_SLICE[arm]
