"""Dense chunks (issue 26): the expert's waypoints as rows at the control rate, for real-time execution.

* ``densify``: one row per control tick, each segment ending exactly on its waypoint, no arm step beyond
  ``max_step_rad`` (below the arm bridge's clamp), a full gripper stroke no faster than the simulator's;
* ``DenseChunker`` driven by the real :class:`RealtimeChunkExecutor` on a fake clock (requests answered by
  hand after a 5-tick delay): the rows sent are the track itself, row after row (no row skipped or repeated
  at a chunk boundary), and an open-loop plan never runs dry after the first row;
* ``settle`` (rate mode in the ROS graph): an arm that executes only a few rows of every chunk (a loaded
  machine) is sent no closing row before it is measured at the grasp pose; without it, it is;
* the option is off by default: the oracle and the memorizer stay lock-step's waypoint policies (the parity
  tests, ``grep official test/``, cover that path), and a bad ``dense_hz`` is one line naming it;
* a real ``latency:200`` oracle in SAPIEN with ``dense_hz=25`` completes an L0 task in realtime mode, its
  largest boundary step no larger than 1.5× its largest within-chunk step.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from robofollow_ros.contract import ACTION_DIM, ARM_SLICE, GRIPPER_INDEX
from robofollow_ros.policy.execution import RealtimeChunkExecutor
from robofollow_ros.policy.expert.dense import (
    ARM_JOINTS,
    DEFAULT_MAX_STEP_RAD,
    FINISHED_RAD,
    GRIPPER_STROKE_S,
    DenseChunker,
    densify,
)
from robofollow_ros.policy.interface import RtcHint
from robofollow_ros.policy.spec import PolicySpecError, load_policy

HZ = 25
LEFT = ARM_SLICE["left"]
GRIP = GRIPPER_INDEX["left"]


def waypoints() -> tuple[np.ndarray, np.ndarray]:
    """A start and four waypoints: a long transit, a short contact move, a gripper close, a lift."""
    start = np.zeros(ACTION_DIM)
    rows = [start.copy() for _ in range(4)]
    rows[0][LEFT] = [0.8, -0.5, 0.3, 0.0, 0.2, -0.1]
    rows[1] = rows[0].copy()
    rows[1][LEFT.start] += 0.02
    rows[2] = rows[1].copy()
    rows[2][GRIP] = 1.0
    rows[3] = rows[2].copy()
    rows[3][LEFT.start + 1] -= 0.3
    return start, np.asarray(rows)


def test_densify_emits_rows_at_the_control_rate_that_end_on_each_waypoint_within_the_step_clamp() -> None:
    from robofollow_ros.rig.safety import SafetyConfig

    start, points = waypoints()
    rows, ends = densify(start, points, HZ)
    assert SafetyConfig.__dataclass_fields__["max_step_rad"].default > DEFAULT_MAX_STEP_RAD  # below the bridge
    for i, end in enumerate(ends):
        np.testing.assert_array_equal(rows[end], points[i])  # each segment ends exactly on its waypoint
    assert ends[-1] == len(rows) - 1 and np.all(np.diff(ends) >= 1)
    steps = np.abs(np.diff(np.vstack([start, rows]), axis=0))
    assert steps[:, ARM_JOINTS].max() <= DEFAULT_MAX_STEP_RAD + 1e-12
    # the 0.8 rad transit needs at least 0.8 / 0.04 rows at the peak step; a cosine profile π/2 as many
    assert ends[0] + 1 >= np.ceil(np.pi / 2 * 0.8 / DEFAULT_MAX_STEP_RAD)
    # a full gripper stroke takes at least the simulator's 0.2 s, i.e. 5 rows at 25 Hz
    assert ends[2] - ends[1] >= GRIPPER_STROKE_S * HZ
    # a smaller clamp means more, smaller rows
    finer, _ = densify(start, points, HZ, max_step_rad=0.01)
    assert len(finer) > len(rows)
    assert np.abs(np.diff(np.vstack([start, finer]), axis=0))[:, ARM_JOINTS].max() <= 0.01 + 1e-12


class Planner:
    """Stands in for ``ExpertPlanner.step`` with a whole phase per call: the given phases, then done."""

    def __init__(self, phases: list[np.ndarray]) -> None:
        self.phases = list(phases)
        self.starts: list[np.ndarray] = []

    def __call__(self, start: np.ndarray) -> np.ndarray:
        self.starts.append(start.copy())
        return self.phases.pop(0) if self.phases else start[None, :].copy()


def drive(chunker: DenseChunker, planner: Planner, ticks: int, delay: int = 5, hint: bool = True,
          lag: int = 0) -> tuple[RealtimeChunkExecutor, list[Any]]:
    """The real executor, requests answered ``delay`` ticks later; the arm reaches each command ``lag`` ticks
    after it was sent (0: at once)."""
    pending: list[tuple[int, Future[np.ndarray], np.ndarray, RtcHint]] = []

    def submit(obs: Any, rtc: RtcHint) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        pending.append((step, future, obs, rtc))
        return future

    clock = {"t": 0.0}
    executor = RealtimeChunkExecutor(submit=submit, actions_per_step=50, control_dt_s=1 / HZ,
                                     clock=lambda: clock["t"], warmup=0)
    measured = np.zeros(ACTION_DIM)
    executor.reset(hold=measured)
    sent = []
    for step in range(ticks):
        clock["t"] = step / HZ
        for sent_at, future, obs, rtc in list(pending):
            if step - sent_at >= delay:
                queued = np.asarray(rtc.queued_rows) if hint else None
                future.set_result(chunker.chunk(obs, planner, queued))
                pending.remove((sent_at, future, obs, rtc))
        tick = executor.tick(step, measured.copy())
        sent.append(tick)
        measured = np.asarray(sent[max(0, len(sent) - 1 - lag)].row, dtype=np.float64)
    return executor, sent


def test_dense_chunks_continue_the_track_exactly_and_an_open_loop_plan_never_runs_dry() -> None:
    _start, points = waypoints()
    second = points[-1].copy()
    second[LEFT] = 0.0
    planner = Planner([points, second[None, :]])
    chunker = DenseChunker(HZ, 50, lookahead=True)
    executor, ticks = drive(chunker, planner, 200)
    assert chunker.track is not None and chunker.phases == 2
    rows = [t.row for t in ticks if not t.hold]
    track = chunker.track[1:]  # row 0 is the vector the first phase was planned from
    # every track row was sent once, in order: no row skipped or repeated at a boundary, then the final hold
    np.testing.assert_allclose(np.asarray(rows[:len(track)]), track, atol=1e-6)
    np.testing.assert_allclose(np.asarray(rows[len(track):]), np.repeat(track[-1:], len(rows) - len(track), 0),
                               atol=1e-6)
    stats = executor.stats
    assert stats.hold_ticks == 5 and stats.starved_ticks == 0  # only the cold start waits
    assert stats.chunks >= 4 and stats.late_chunks == 0
    sent = np.asarray([t.row for t in ticks], dtype=np.float64)
    assert np.abs(np.diff(sent, axis=0))[:, ARM_JOINTS].max() <= DEFAULT_MAX_STEP_RAD + 1e-6
    # the second phase was planned ahead, from the first one's end, before the arm got there
    np.testing.assert_allclose(planner.starts[1], points[-1])


def test_a_closed_loop_plan_waits_at_each_phase_end_and_plans_from_the_measured_joints() -> None:
    _start, points = waypoints()
    planner = Planner([points[:1], points[1:]])
    chunker = DenseChunker(HZ, 50, lookahead=False)
    executor, ticks = drive(chunker, planner, 200, hint=False)
    assert chunker.phases == 2
    np.testing.assert_allclose(planner.starts[1], points[0], atol=1e-6)  # planned where the arm stood
    # without the hint the chunk restarts just after the row nearest the measured joints: still no skipped row
    sent = np.asarray([t.row for t in ticks], dtype=np.float64)
    assert np.abs(np.diff(sent, axis=0))[:, ARM_JOINTS].max() <= DEFAULT_MAX_STEP_RAD + 1e-6
    np.testing.assert_allclose(sent[-1], points[-1], atol=1e-6)
    # the phase end costs about one request (5 ticks), and nothing else does
    assert 0 < executor.stats.starved_ticks <= 2 * 5


def test_an_arm_lagging_its_commands_is_never_sent_back_along_the_track() -> None:
    """A simulator slower than the clock (the ROS sim on a loaded machine): the joints reach each command 6 ticks
    late. With the hint, the commands still walk the track forward only; the next phase waits for the arm."""
    _start, points = waypoints()
    planner = Planner([points[:1], points[1:]])
    chunker = DenseChunker(HZ, 50, lookahead=False)
    _executor, ticks = drive(chunker, planner, 240, lag=6)
    assert chunker.phases == 2 and chunker.track is not None
    track = chunker.track
    index = [int(np.abs(track - t.row[None, :]).max(axis=1).argmin()) for t in ticks if not t.hold]
    assert all(np.abs(track[i] - t.row).max() < 1e-6 for i, t in zip(index, [t for t in ticks if not t.hold],
                                                                       strict=True))
    assert all(b >= a for a, b in itertools.pairwise(index))  # forward only
    sent = np.asarray([t.row for t in ticks], dtype=np.float64)
    assert np.abs(np.diff(sent, axis=0))[:, ARM_JOINTS].max() <= DEFAULT_MAX_STEP_RAD + 1e-6
    np.testing.assert_allclose(planner.starts[1], points[0], atol=1e-6)  # planned once the arm got there


def _slow_arm_grips(settle: bool) -> list[tuple[float, float]]:
    """Synchronous chunks to an arm that gets only 3 rows into each: per chunk that moves the gripper, (how far
    the arm stood from the grasp pose, the gripper value it was sent towards)."""
    _start, points = waypoints()
    chunker = DenseChunker(HZ, 50, settle=settle)
    planner = Planner([points])
    measured, grips = np.zeros(ACTION_DIM), []
    for _ in range(80):
        rows = chunker.chunk(measured, planner).astype(np.float64)
        moving = np.abs(rows[:, GRIP] - measured[GRIP]) > 1e-9  # rows that move the gripper from where it is
        if moving.any():
            grips.append((float(np.abs(measured[ARM_JOINTS] - points[1][ARM_JOINTS]).max()),
                          float(rows[moving, GRIP].max())))
        measured = rows[min(2, len(rows) - 1)]
    np.testing.assert_allclose(measured, points[-1], atol=1e-6)  # it got through the whole phase either way
    return grips


def test_settle_grips_only_once_a_slow_arm_stands_at_the_pose() -> None:
    settled = _slow_arm_grips(settle=True)
    assert settled and all(distance <= FINISHED_RAD for distance, _g in settled)
    # without it the gripper is commanded to move while the arm is still on its way (where it closed varied)
    hurried = _slow_arm_grips(settle=False)
    assert max(distance for distance, _g in hurried) > 0.1
    with pytest.raises(ValueError, match="settle"):
        load_policy("oracle", {"settle": True}, validate=False)


def test_dense_chunks_are_off_by_default_and_a_bad_rate_is_one_line_naming_it() -> None:
    oracle = load_policy("oracle", validate=False)
    assert oracle.dense is None and not oracle.accepts_rtc  # lock-step's waypoint policy, unchanged
    dense = load_policy("memorizer", {"dense_hz": 25}, validate=False)
    assert dense.dense is not None and dense.accepts_rtc and dense.dense.horizon == 50
    for bad, field in (({"dense_hz": 0}, "dense_hz"), ({"dense_hz": "25"}, "dense_hz"),
                       ({"dense_hz": 25, "max_step_rad": -1}, "max_step_rad")):
        with pytest.raises((PolicySpecError, ValueError)) as info:
            load_policy("oracle", bad)
        assert field in str(info.value) and "\n" not in str(info.value)


@pytest.mark.timeout(120)
def test_a_200ms_dense_oracle_completes_in_realtime_with_smooth_boundaries() -> None:
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.execution_mode import ExecutionSettings
    from robofollow_ros.evaluation.selection import TrialKey
    from robofollow_ros.evaluation.trial_worker import TrialWorker, WorkerSpec

    task = "L0_pickup_yellow_block_1_left"
    settings = EpisodeSettings(max_steps=6, actions_per_step=50,
                               execution=ExecutionSettings(mode="realtime", control_hz=HZ))
    worker = TrialWorker(WorkerSpec(policy="latency:200:oracle", policy_kwargs={"dense_hz": HZ}, settings=settings,
                                    stepper="direct"))
    try:
        result = worker.run(TrialKey(task, 1, default_registry().eval_task(task).seed(1))).result
    finally:
        worker.close()
    assert result["completion_ok"], result
    stats, motion = result["execution"], result["execution"]["motion"]
    assert stats["hold_ticks"] - stats["starved_ticks"] == 5  # the cold start
    assert stats["starved_ticks"] <= 3 * 5  # phase ends only (a pick-up has two), about one request each
    assert motion["max_step_rad"] <= DEFAULT_MAX_STEP_RAD + 1e-6
    assert motion["max_boundary_step_rad"] <= 1.5 * motion["max_within_step_rad"]
