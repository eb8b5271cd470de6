"""Turning one absolute 14-value target into per-physics-step joint targets (spec section e).

RoboTwin time-parameterises a two-point joint path per arm with TOPP at 250 Hz. For a straight
line in joint space under per-joint velocity and acceleration limits, the time-optimal profile
is a trapezoid (or triangle) in the path parameter s ∈ [0, 1] whose limits are the tightest
joint's: s' ≤ min v_max/|Δq_i|, s'' ≤ min a_max/|Δq_i|. That is what TOPP returns for this path,
so it is computed in closed form here. The duration is rounded up to whole physics steps (a
slightly slower profile, still within the limits); the gripper moves linearly over the same
steps, and takes at least |Δg| × ``gripper_full_stroke_steps`` steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Segment:
    """Per-step arm joint targets, their velocities and gripper values for one arm."""

    positions: np.ndarray  # (steps, joints)
    velocities: np.ndarray  # (steps, joints)
    gripper: np.ndarray  # (steps,) normalised

    @property
    def steps(self) -> int:
        return int(self.positions.shape[0])


def trapezoid_duration(delta: np.ndarray, max_velocity: float, max_acceleration: float) -> float:
    """Shortest time to move all joints by ``delta`` along a straight joint-space line."""
    span = float(np.max(np.abs(delta))) if delta.size else 0.0
    if span <= 0.0:
        return 0.0
    v, a = max_velocity / span, max_acceleration / span  # limits on s
    if v * v / a >= 1.0:  # never reaches cruise speed: triangle
        return 2.0 * math.sqrt(1.0 / a)
    return 1.0 / v + v / a


def plan_segment(start: np.ndarray, target: np.ndarray, gripper_start: float, gripper_target: float,
                 max_velocity: float, max_acceleration: float, dt: float, gripper_full_stroke_steps: int,
                 min_steps: int = 1) -> Segment:
    """One arm's segment from ``start`` to ``target`` (radians) with its gripper moving linearly."""
    delta = np.asarray(target, dtype=np.float64) - np.asarray(start, dtype=np.float64)
    span = float(np.max(np.abs(delta))) if delta.size else 0.0
    duration = trapezoid_duration(delta, max_velocity, max_acceleration)
    arm_steps = math.ceil(duration / dt - 1e-9) if duration > 0 else 0
    gripper_steps = math.ceil(abs(gripper_target - gripper_start) * gripper_full_stroke_steps - 1e-9)
    steps = max(arm_steps, gripper_steps, min_steps)
    if span > 0:
        v, a = max_velocity / span, max_acceleration / span
        ramp_time = min(v / a, math.sqrt(1.0 / a))  # unstretched acceleration time
        fraction = ramp_time / duration
        s, ds = _stretched_profile(fraction, steps, dt)
    else:
        s, ds = np.ones(steps), np.zeros(steps)
    positions = start[None, :] + s[:, None] * delta[None, :]
    velocities = ds[:, None] * delta[None, :]
    gripper = gripper_start + (gripper_target - gripper_start) * np.arange(1, steps + 1) / steps
    return Segment(positions, velocities, gripper)


def _stretched_profile(ramp_fraction: float, steps: int, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """s and s' of a trapezoid lasting steps·dt whose ramps take ``ramp_fraction`` of it each."""
    total = steps * dt
    ramp = min(0.5, ramp_fraction) * total
    peak = 1.0 / (total - ramp)
    acc = peak / ramp
    t = np.arange(1, steps + 1) * dt
    s = np.where(
        t < ramp, 0.5 * acc * t * t,
        np.where(t <= total - ramp, 0.5 * acc * ramp * ramp + peak * (t - ramp), 1.0 - 0.5 * acc * (total - t) ** 2))
    ds = np.where(t < ramp, acc * t, np.where(t <= total - ramp, peak, acc * (total - t)))
    s[-1], ds[-1] = 1.0, 0.0
    return s, ds


def pad_segment(segment: Segment, steps: int) -> Segment:
    """Hold the last target for extra steps, so both arms' segments end together."""
    extra = steps - segment.steps
    if extra <= 0:
        return segment
    return Segment(
        np.vstack([segment.positions, np.repeat(segment.positions[-1:], extra, axis=0)]),
        np.vstack([segment.velocities, np.zeros((extra, segment.velocities.shape[1]))]),
        np.concatenate([segment.gripper, np.repeat(segment.gripper[-1:], extra)]),
    )
