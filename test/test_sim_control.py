"""The per-row segment planner: reaches the target, respects the limits, moves the gripper linearly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robofollow_ros.sim.control import pad_segment, plan_segment, trapezoid_duration

DT = 1.0 / 250.0
V_MAX, A_MAX = 1.5, 6.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-2.5, 2.5), min_size=6, max_size=6),
    st.lists(st.floats(-2.5, 2.5), min_size=6, max_size=6),
    st.floats(0, 1), st.floats(0, 1),
)
def test_segment_ends_at_target_within_velocity_and_acceleration_limits(start: list[float], target: list[float],
                                                                         g0: float, g1: float) -> None:
    seg = plan_segment(np.array(start), np.array(target), g0, g1, V_MAX, A_MAX, DT, 50)
    assert np.allclose(seg.positions[-1], target)
    assert np.isclose(seg.gripper[-1], g1)
    path = np.vstack([start, seg.positions])
    velocity = np.diff(path, axis=0) / DT
    assert np.all(np.abs(velocity) <= V_MAX * 1.001 + 1e-9)
    assert np.all(np.abs(seg.velocities) <= V_MAX * 1.001 + 1e-9)
    accel = np.diff(np.vstack([np.zeros(6), seg.velocities]), axis=0) / DT
    assert np.all(np.abs(accel[:-1]) <= A_MAX * 1.01 + 1e-6)
    assert seg.steps >= np.ceil(abs(g1 - g0) * 50 - 1e-9)


def test_duration_is_time_optimal_for_the_longest_joint() -> None:
    # 1.5 rad at 1.5 rad/s and 6 rad/s²: 0.25 s ramp each side + 0.75 s cruise = 1.25 s.
    assert np.isclose(trapezoid_duration(np.array([1.5, 0.1]), V_MAX, A_MAX), 1.25)
    # 0.01 rad never reaches cruise: triangle of 2·sqrt(0.01/6).
    assert np.isclose(trapezoid_duration(np.array([0.01]), V_MAX, A_MAX), 2 * np.sqrt(0.01 / 6))
    seg = plan_segment(np.zeros(2), np.array([1.5, 0.1]), 1.0, 1.0, V_MAX, A_MAX, DT, 50)
    assert seg.steps == 313  # ceil(1.25 s × 250 Hz)


def test_gripper_only_change_moves_linearly_over_its_stroke_time() -> None:
    seg = plan_segment(np.zeros(6), np.zeros(6), 1.0, 0.0, V_MAX, A_MAX, DT, 50)
    assert seg.steps == 50
    assert np.allclose(np.diff(seg.gripper), -1.0 / 50)
    assert np.allclose(seg.positions, 0.0)


def test_padding_holds_the_last_target() -> None:
    seg = plan_segment(np.zeros(6), np.full(6, 0.1), 1.0, 1.0, V_MAX, A_MAX, DT, 50)
    padded = pad_segment(seg, seg.steps + 7)
    assert padded.steps == seg.steps + 7
    assert np.allclose(padded.positions[-7:], seg.positions[-1])
    assert np.allclose(padded.velocities[-7:], 0.0)
