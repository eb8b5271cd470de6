"""One trial, exactly as RoboFollow runs it, scored online by the same StageMonitor the ROS graph uses.

Order per trial: fresh world (layout, seed) → ``policy.reset()`` → ``set_instruction`` → frame 0 →
up to ``max_steps`` × (``predict`` → execute the first ``actions_per_step`` rows, one frame each): the
official budget in calls. With ``--budget rows`` the trial instead runs until ``max_steps ×
actions_per_step`` rows have executed (the last chunk cut to what is left), however many rows each call
returns. Every entry says both: ``policy_steps`` (calls) and ``rows_executed``.
A policy that raises, calls ``sys.exit``, overruns its timeout (``policy.guard``) or returns a bad
chunk fails *this* trial with the reason recorded; it never takes the run down.

What the policy is handed is the observation contract (``policy.observation.contract_observation``:
three RGB images, the joint vector, the instruction), plus ``privileged`` only when the policy
receives it (``policy.interface.receives_privileged``: a declaring built-in, or ``--privileged``).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.evaluation.execution_mode import ExecutionSettings
from robofollow_ros.policy.interface import Observation, Policy, receives_privileged, validate_actions
from robofollow_ros.policy.observation import contract_observation, privileged_extension
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor

#: RoboFollow's defaults (spec section g).
DEFAULT_MAX_STEPS = 10
DEFAULT_ACTIONS_PER_STEP = 50


class World(Protocol):
    """What an episode needs from the simulator (``sim.world.SimWorld``) or a rig adapter."""

    def reset(self, task: EvalTask, seed: int) -> None: ...

    def execute(self, row: Any) -> int: ...

    def observation(self) -> dict[str, Any]: ...

    def scorer_frame(self) -> dict[str, Any]: ...


class EpisodeObserver(Protocol):
    """Watches a trial as it runs (e.g. ``monitoring.recorder``: MCAP recording); never changes it."""

    def on_start(self, task: EvalTask, seed: int, world: Any) -> None: ...

    def on_frame(self, index: int, frame: dict[str, Any], live: dict[str, Any]) -> None: ...

    def on_observation(self, observation: dict[str, Any]) -> None: ...

    def on_end(self, result: dict[str, Any], live: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EpisodeSettings:
    max_steps: int = DEFAULT_MAX_STEPS
    actions_per_step: int = DEFAULT_ACTIONS_PER_STEP
    #: Lock-step (this module's loop, the default) or realtime (``evaluation.realtime_episode``).
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"--max-steps: must be >= 1, got {self.max_steps}")
        if self.actions_per_step < 1:
            raise ValueError(f"--actions-per-step: must be >= 1, got {self.actions_per_step}")


class ScoredTrial:
    """What every episode loop shares (lock-step here, ``realtime_episode`` on a control clock): the world
    reset for the task and seed, the policy's start, the observations it is handed, a scorer frame fed to
    the stage monitor after every executed row, and the results entry built at the end; the observer is
    told of each. A loop decides only how rows reach the world."""

    def __init__(self, world: World, policy: Policy, task: EvalTask, seed: int,
                 frames_out: list[dict[str, Any]] | None = None, observer: EpisodeObserver | None = None,
                 scored_task: EvalTask | None = None, also_scored: EvalTask | None = None) -> None:
        """``task`` sets the world, the instruction and the privileged task id; ``scored_task`` (an instruction
        control: the true task with its own words, or a swap's other task) scores the trial instead, and
        ``also_scored`` (a swap's true task) scores it too, as ``original_verdict``."""
        self.started = time.monotonic()
        self.world, self.policy, self.task = world, policy, task
        self.frames_out, self.observer = frames_out, observer
        world.reset(task, seed)
        self.monitor = StageMonitor(scored_task or task)
        self.also = StageMonitor(also_scored) if also_scored is not None else None
        self.also_task = also_scored
        if observer is not None:
            observer.on_start(task, seed, world)
        self.last_frame: dict[str, Any] = {}
        #: Optional: recorders log the commanded rows.
        self.on_command = getattr(observer, "on_command", None)
        self.privileged = False

    def start_policy(self) -> tuple[str | None, str]:
        """``reset`` and ``set_instruction``, then frame 0; (the policy's failure, its traceback) or (None, "")."""
        error, detail = None, ""
        try:
            self.policy.reset()
            self.policy.set_instruction(self.task.instruction)
        except POLICY_FAILURES as exc:  # any policy failure fails this trial, not the run
            error, detail = policy_failure(exc), traceback.format_exc(limit=3)
        self.record()
        self.privileged = receives_privileged(self.policy)
        return error, detail

    def record(self) -> None:
        """The world's scorer frame after a row: scored, kept for ``frames_out``, shown to the observer."""
        raw = self.world.scorer_frame()
        self.last_frame = raw
        if self.frames_out is not None:
            self.frames_out.append(raw)
        self.monitor.update(frame_from_dict(raw, index=self.monitor.frame_count))
        if self.also is not None:
            self.also.update(frame_from_dict(raw, index=self.also.frame_count))
        if self.observer is not None:
            self.observer.on_frame(self.monitor.frame_count - 1, raw, self.monitor.live())

    def observe(self) -> Observation:
        """The observation contract of the world now, plus ``privileged`` only for a policy that receives it."""
        obs = contract_observation(self.world.observation(), self.task.instruction,
                                   privileged=privileged_state(self.task, self.last_frame) if self.privileged
                                   else None)
        if self.observer is not None:
            self.observer.on_observation(obs)
        return obs

    def finish(self, policy_steps: int, error: str | None, detail: str, **extra: Any) -> dict[str, Any]:
        """The results.json entry (``extra`` added before a failure zeroes the scores), told to the observer."""
        result = self.monitor.result() if self.monitor.frame_count else _empty_result(self.task)
        result["policy_steps"] = policy_steps
        result["wall_s"] = round(time.monotonic() - self.started, 3)
        result.update(extra)
        if self.also is not None and self.also_task is not None:  # a swap: the verdict against the true task too
            also = self.also.result() if self.also.frame_count else _empty_result(self.also_task)
            result["original_verdict"] = {"task": self.also_task.task_id, **{
                k: also[k] for k in ("intent_score", "exec_score", "intent_ok", "exec_ok", "completion_ok")}}
        if error is not None:
            result = fail_result(result, error, detail)
            if "original_verdict" in result:
                result["original_verdict"].update(intent_score=0.0, exec_score=0.0, intent_ok=False, exec_ok=False,
                                                  completion_ok=False)
        if self.observer is not None:
            self.observer.on_end(result, self.monitor.live())
        return result


def run_episode(world: World, policy: Policy, task: EvalTask, seed: int, settings: EpisodeSettings,
                frames_out: list[dict[str, Any]] | None = None,
                observer: EpisodeObserver | None = None, scored_task: EvalTask | None = None,
                also_scored: EvalTask | None = None) -> dict[str, Any]:
    """Run and score one trial; returns the results.json entry (``policy_error`` set on failure).
    ``scored_task``, ``also_scored``: an instruction control's scoring (:class:`ScoredTrial`)."""
    trial = ScoredTrial(world, policy, task, seed, frames_out, observer, scored_task, also_scored)
    error, detail = trial.start_policy()
    steps = rows = 0
    by_rows = settings.execution.budget == "rows"
    row_limit = settings.max_steps * settings.actions_per_step
    # every call executes at least one row (validate_actions: T >= 1), so a rows budget ends too
    while error is None and (rows < row_limit if by_rows else steps < settings.max_steps):
        try:
            actions = validate_actions(policy.predict(trial.observe()))
        except POLICY_FAILURES as exc:  # a raising, exiting, hanging (timeout) or malformed policy
            error, detail = policy_failure(exc), traceback.format_exc(limit=3)
            break
        steps += 1
        take = min(settings.actions_per_step, row_limit - rows) if by_rows else settings.actions_per_step
        for row in actions[:take]:
            if trial.on_command is not None:
                trial.on_command(row)
            world.execute(np.asarray(row, dtype=np.float64))  # simulator errors abort the run
            trial.record()
            rows += 1
    return trial.finish(steps, error, detail, rows_executed=rows)


#: What a policy call may raise that fails its trial: any error, and ``sys.exit`` inside the policy
#: (an in-process model must not end the evaluator). KeyboardInterrupt still stops the run.
POLICY_FAILURES = (Exception, SystemExit)


def policy_failure(exc: BaseException) -> str:
    """The one-line reason a policy call failed, as recorded in ``policy_error``."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the policy called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def unexecuted_result(task: EvalTask, reason: str) -> dict[str, Any]:
    """The entry of a trial that could not run to its end (its worker died or was stopped): failed, zero."""
    result = _empty_result(task)
    result.update(policy_steps=0, wall_s=0.0)
    return fail_result(result, reason)


def privileged_state(task: EvalTask, frame: dict[str, Any]) -> dict[str, Any]:
    """``obs["privileged"]`` of the simulator's scorer frame: the task id and every object's true pose
    (``policy.observation.privileged_extension``; handed only to a policy that receives it)."""
    return privileged_extension(task.task_id, frame["objects"], frame.get("object_quats", {}))


def fail_result(result: dict[str, Any], error: str, detail: str = "") -> dict[str, Any]:
    """A trial the policy broke scores zero and does not complete; what it did score is kept aside."""
    failed = dict(result)
    failed["partial_result"] = {k: result[k] for k in ("intent_score", "exec_score", "completion_ok") if k in result}
    failed.update(intent_score=0.0, exec_score=0.0, intent_ok=False, exec_ok=False, completion_ok=False,
                  policy_error=error)
    if detail:
        failed["policy_error_detail"] = detail
    failed["phases"] = [dict(p, intent_score=0.0, exec_score=0.0, intent_reason=f"policy error: {error}",
                             exec_reason=f"policy error: {error}") for p in result.get("phases", [])]
    return failed


def _empty_result(task: EvalTask) -> dict[str, Any]:
    return {"task": task.task_id, "instruction": task.instruction, "intent_ok": False, "intent_msg": "no frames",
            "exec_ok": False, "exec_msg": "no frames", "completion_ok": False, "intent_score": 0.0,
            "exec_score": 0.0, "phases": []}
