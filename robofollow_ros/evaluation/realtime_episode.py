"""One trial on a control clock (``robofollow eval --execution realtime``): the arms move while the policy thinks.

Lock-step (``evaluation.episode``) pauses the world during every ``predict``, so latency costs nothing in
simulation. Here the world advances one control tick (``dt = 1/control_hz`` of simulated time, executed as
``PHYSICS_HZ·dt`` physics steps toward the row: the simulator's ``direct`` stepper) per tick of a
``policy.execution.RealtimeChunkExecutor``: the tick's row, or the last command again on a hold.

Latency costs ticks on a virtual clock (ticks × dt, the executor's ``clock``), independent of how fast this
CPU simulates (:class:`VirtualClockSubmit`): a request sent at tick ``t`` whose call took ``L`` seconds is
available from tick ``t + ceil(L / dt)`` on. ``L`` is

* for a ``latency:`` policy, its declared draw (``LatencyPolicy.draw_only``: drawn, recorded, not slept):
  the draw models the model's whole response time; the inner policy runs synchronously at the request and
  its own compute is not charged. A 200 ms latency at 25 Hz costs exactly 5 ticks on any machine;
* for any other policy, the wall time from the request to the answer (the call runs on a worker thread).
  While it runs the simulation is paced to the wall clock (tick ``s`` waits until ``(s - t)·dt`` has passed
  since the request, or until the answer came), so a call is charged the ticks it really took; a simulation
  slower than real time never waits.

The step budget is ``max_steps × actions_per_step`` ticks (lock-step's row budget; 500 ticks, 20 s at 25 Hz,
by default); one scorer frame is recorded per tick, holds included. ``policy_steps`` counts requests. The
results entry gains ``execution``: the executor's counters (``RealtimeStats``; latencies summarised) and
the motion measures (``motion_metrics``); the official scorer does not read it.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.evaluation.episode import (
    POLICY_FAILURES,
    EpisodeObserver,
    EpisodeSettings,
    ScoredTrial,
    World,
    policy_failure,
)
from robofollow_ros.evaluation.motion_metrics import MotionTrace
from robofollow_ros.policy.execution.realtime import RealtimeChunkExecutor
from robofollow_ros.policy.interface import (
    Observation,
    Policy,
    PolicyWrapper,
    RtcHint,
    ValidatedPolicy,
)
from robofollow_ros.policy.latency import LatencyPolicy

#: ``ceil`` tolerance: 0.2 s / 0.04 s is 5 ticks, not 6 by a rounding error.
_EPS = 1e-9


def declared_latency(policy: Any) -> LatencyPolicy | None:
    """The ``latency:`` wrapper inside ``policy``'s wrappers (guard, validation), if any."""
    for _ in range(8):
        if isinstance(policy, LatencyPolicy):
            return policy
        if not isinstance(policy, PolicyWrapper):
            return None
        policy = policy.inner
    return None


@dataclass
class _Pending:
    step: int                  # the tick the request went out on
    outer: Future[np.ndarray]  # what the executor holds
    ready: int | None = None   # the tick it becomes available (known once its latency is)
    answer: Future[tuple[np.ndarray, float]] | None = None  # measured mode: (rows, wall end)
    wall_start: float = 0.0
    rows: np.ndarray | None = None
    error: BaseException | None = None


class VirtualClockSubmit:
    """The executor's ``submit`` and ``clock`` on the virtual clock (see the module docstring).

    Call :meth:`advance` with each tick before ``executor.tick``: it releases the answer whose tick has come.
    ``wall``: the wall clock of measured latencies (injectable for tests)."""

    def __init__(self, policy: Policy, control_dt_s: float, wall: Callable[[], float] = time.monotonic) -> None:
        self.policy = ValidatedPolicy.wrap(policy)
        self.dt = float(control_dt_s)
        self.wall = wall
        self.declared = declared_latency(policy)
        if self.declared is not None:
            self.declared.draw_only()
        self.step = 0
        self._pending: _Pending | None = None
        self._pool: ThreadPoolExecutor | None = None

    def clock(self) -> float:
        """Simulated seconds: ticks × dt."""
        return self.step * self.dt

    def ticks_for(self, latency_s: float) -> int:
        return max(0, math.ceil(latency_s / self.dt - _EPS))

    def submit(self, obs: Observation, hint: RtcHint) -> Future[np.ndarray]:
        outer: Future[np.ndarray] = Future()
        pending = _Pending(self.step, outer)
        if self.declared is not None:
            try:
                pending.rows = self.policy.predict(obs, rtc=hint)
            except POLICY_FAILURES as exc:  # handed to the executor, which raises it in tick
                pending.error = exc
            latency = self.declared.waited_s[-1] if pending.error is None and self.declared.waited_s else 0.0
            pending.ready = self.step + self.ticks_for(latency)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="realtime-request")
            pending.wall_start = self.wall()
            pending.answer = self._pool.submit(self._timed, obs, hint)
        self._pending = pending
        self._release()
        return outer

    def _timed(self, obs: Observation, hint: RtcHint) -> tuple[np.ndarray, float]:
        rows = self.policy.predict(obs, rtc=hint)
        return rows, self.wall()

    def advance(self, step: int) -> None:
        """Tick ``step`` has come: release the answer due by it (measured mode: waiting, on the wall clock, at
        most until ``(step - t)·dt`` after the request)."""
        self.step = step
        pending = self._pending
        if pending is None:
            return
        if pending.answer is not None and pending.ready is None:
            deadline = pending.wall_start + (step - pending.step) * self.dt
            try:
                pending.answer.exception(timeout=max(0.0, deadline - self.wall()))
            except FutureTimeoutError:
                return  # not answered within the ticks passed so far: not available on this tick
            try:
                pending.rows, end = pending.answer.result()
                pending.ready = pending.step + self.ticks_for(end - pending.wall_start)
            except POLICY_FAILURES as exc:
                pending.error, pending.ready = exc, step
        self._release()

    def _release(self) -> None:
        pending = self._pending
        if pending is None or pending.ready is None or pending.ready > self.step:
            return
        self._pending = None
        if pending.error is not None:
            pending.outer.set_exception(pending.error)
        else:
            assert pending.rows is not None
            pending.outer.set_result(pending.rows)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def run_realtime_episode(world: World, policy: Policy, task: EvalTask, seed: int, settings: EpisodeSettings,
                         frames_out: list[dict[str, Any]] | None = None,
                         observer: EpisodeObserver | None = None,
                         wall: Callable[[], float] = time.monotonic, scored_task: EvalTask | None = None,
                         also_scored: EvalTask | None = None) -> dict[str, Any]:
    """Run and score one trial on the control clock; returns the results.json entry (see the module docstring).

    ``world`` executes one row per control tick (``SimWorld(stepper="direct", direct_steps=tick_physics_steps)``,
    as ``trial_worker`` builds it in this mode)."""
    execution = settings.execution
    trial = ScoredTrial(world, policy, task, seed, frames_out, observer, scored_task, also_scored)
    error, detail = trial.start_policy()
    gate = VirtualClockSubmit(policy, execution.control_dt_s, wall=wall)
    executor = RealtimeChunkExecutor(submit=gate.submit, clock=gate.clock,
                                     **execution.executor_options(settings.actions_per_step))
    joints = getattr(world, "joint_vector", None)
    start = joints() if callable(joints) else world.observation()["joint_action"]["vector"]
    executor.reset(hold=np.asarray(start, dtype=np.float32))
    trace = MotionTrace(execution.control_dt_s)
    try:
        for step in range(settings.max_steps * settings.actions_per_step if error is None else 0):
            gate.advance(step)
            chunks = executor.stats.chunks
            try:
                tick = executor.tick(step, trial.observe)
            except POLICY_FAILURES as exc:  # a raising, exiting, hanging or malformed policy fails this trial
                error, detail = policy_failure(exc), traceback.format_exc(limit=3)
                break
            assert tick.row is not None  # the executor holds the start joints until the first chunk
            if trial.on_command is not None:
                trial.on_command(tick.row)
            world.execute(np.asarray(tick.row, dtype=np.float64))  # a hold sends the last command again
            trace.add(tick.row, hold=tick.hold, new_chunk=executor.stats.chunks > chunks,
                      first_chunk=chunks == 0)
            trial.record()
    finally:
        executor.close()
        gate.close()
    return trial.finish(executor.stats.requests, error, detail, execution=execution_record(executor, trace),
                        rows_executed=executor.stats.rows_sent)


def execution_record(executor: RealtimeChunkExecutor, trace: MotionTrace) -> dict[str, Any]:
    """A trial's ``execution`` entry: the executor's counters (latencies summarised) and the motion measures."""
    from robofollow_ros.evaluation.execution_mode import counters_record

    return {**counters_record(executor.stats.as_dict()), "motion": trace.summary()}
