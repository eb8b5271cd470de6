"""One trial, exactly as RoboFollow runs it, scored online by the same StageMonitor the ROS graph uses.

Order per trial: fresh world (layout, seed) → ``policy.reset()`` → ``set_instruction`` → frame 0 →
up to ``max_steps`` × (``predict`` → execute the first ``actions_per_step`` rows, one frame each).
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
from robofollow_ros.policy.interface import Policy, receives_privileged, validate_actions
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


def run_episode(world: World, policy: Policy, task: EvalTask, seed: int, settings: EpisodeSettings,
                frames_out: list[dict[str, Any]] | None = None,
                observer: EpisodeObserver | None = None) -> dict[str, Any]:
    """Run and score one trial; returns the results.json entry (``policy_error`` set on failure)."""
    started = time.monotonic()
    world.reset(task, seed)
    monitor = StageMonitor(task)
    if observer is not None:
        observer.on_start(task, seed, world)

    last: dict[str, Any] = {}

    def record() -> None:
        raw = world.scorer_frame()
        last["frame"] = raw
        if frames_out is not None:
            frames_out.append(raw)
        monitor.update(frame_from_dict(raw, index=monitor.frame_count))
        if observer is not None:
            observer.on_frame(monitor.frame_count - 1, raw, monitor.live())

    error, detail, steps = None, "", 0
    try:
        policy.reset()
        policy.set_instruction(task.instruction)
    except POLICY_FAILURES as exc:  # any policy failure fails this trial, not the run
        error, detail = policy_failure(exc), traceback.format_exc(limit=3)
    record()
    privileged = receives_privileged(policy)
    for _ in range(settings.max_steps if error is None else 0):
        obs = contract_observation(world.observation(), task.instruction,
                                   privileged=privileged_state(task, last["frame"]) if privileged else None)
        if observer is not None:
            observer.on_observation(obs)
        try:
            actions = validate_actions(policy.predict(obs))
        except POLICY_FAILURES as exc:  # a raising, exiting, hanging (timeout) or malformed policy
            error, detail = policy_failure(exc), traceback.format_exc(limit=3)
            break
        steps += 1
        on_command = getattr(observer, "on_command", None)  # optional: recorders log the commanded rows
        for row in actions[: settings.actions_per_step]:
            if on_command is not None:
                on_command(row)
            world.execute(np.asarray(row, dtype=np.float64))  # simulator errors abort the run
            record()
    result = monitor.result() if monitor.frame_count else _empty_result(task)
    result["policy_steps"] = steps
    result["wall_s"] = round(time.monotonic() - started, 3)
    if error is not None:
        result = fail_result(result, error, detail)
    if observer is not None:
        observer.on_end(result, monitor.live())
    return result


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
