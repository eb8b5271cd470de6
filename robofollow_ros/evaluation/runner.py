"""The headless evaluator: a protocol of trials over SAPIEN, in one process or several.

Each worker process owns one simulator and one policy; every trial starts from a fresh scene built
from its seed, so a trial's result does not depend on which worker ran it or what ran before, and
``--workers N`` gives the results of ``--workers 1``. Results are recorded in trial order as they
arrive, each in its own SQLite transaction, so a run killed at any moment resumes where it stopped.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from robofollow_ros.benchmark import EvalTask, default_registry
from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
from robofollow_ros.evaluation.progress import Progress
from robofollow_ros.evaluation.results import RunWriter, resume_writer
from robofollow_ros.evaluation.selection import TrialKey, select_tasks, trial_keys
from robofollow_ros.policy.interface import close_policy
from robofollow_ros.policy.spec import load_policy


@dataclass(frozen=True)
class EvalConfig:
    """Everything one evaluation run needs; mirrors ``robofollow eval``'s arguments."""

    policy: str
    output: Path
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    scenes: tuple[str, ...] = ("scene1", "scene2", "scene3", "scene4")
    levels: tuple[str, ...] = ("L0", "L1", "L2", "L3")
    rounds: int = 1
    limit: int | None = None
    tasks: tuple[str, ...] = ()
    settings: EpisodeSettings = field(default_factory=EpisodeSettings)
    render: bool = False
    stepper: str = "topp"
    workers: int = 1
    resume: bool = False
    #: Record every trial to ``<output>/mcap/<trial>.mcap`` (``--record``; monitoring.recorder).
    record: bool = False

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"--workers: must be >= 1, got {self.workers}")

    def arguments(self) -> dict[str, Any]:
        args = asdict(self)
        args["output"] = str(self.output)
        return args


@dataclass
class RunOutcome:
    run_dir: Path
    recorded: int
    skipped: int
    failed_trials: list[tuple[str, str]]
    summary: dict[str, Any]


# -- worker side ---------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _init_worker(policy: str, kwargs: dict[str, Any], render: bool, stepper: str, settings: EpisodeSettings,
                 record_dir: Path | None = None) -> None:
    from robofollow_ros.sim.world import SimWorld

    _STATE.update(world=SimWorld(render=render, stepper=stepper),  # type: ignore[arg-type]
                  policy=load_policy(policy, kwargs), settings=settings)
    if record_dir is not None:
        from robofollow_ros.monitoring.recorder import TrialRecorder

        _STATE["recorder"] = TrialRecorder(record_dir)


def _run_trial(key: TrialKey) -> tuple[TrialKey, dict[str, Any]]:
    task = default_registry().eval_task(key.task_id)
    recorder = _STATE.get("recorder")
    observer = recorder.for_trial(key.trial_id, key.round) if recorder is not None else None
    return key, run_episode(_STATE["world"], _STATE["policy"], task, key.seed, _STATE["settings"],
                            observer=observer)


def _close_worker() -> None:
    recorder = _STATE.pop("recorder", None)
    if recorder is not None:
        recorder.close()
    if "policy" in _STATE:
        close_policy(_STATE.pop("policy"))
    world = _STATE.pop("world", None)
    if world is not None:
        world.close()


def _results(config: EvalConfig, keys: Sequence[TrialKey]) -> Iterator[tuple[TrialKey, dict[str, Any]]]:
    init_args = (config.policy, config.policy_kwargs, config.render, config.stepper, config.settings,
                 Path(config.output) / "mcap" if config.record else None)
    if config.workers == 1 or len(keys) <= 1:
        _init_worker(*init_args)
        try:
            for key in keys:
                yield _run_trial(key)
        finally:
            _close_worker()
        return
    # spawn: SAPIEN and DDS do not survive fork; each worker imports and builds its own world.
    ctx = mp.get_context("spawn")
    with ctx.Pool(min(config.workers, len(keys)), initializer=_init_worker, initargs=init_args) as pool:
        yield from pool.imap(_run_trial, keys, chunksize=1)


# -- driver side ---------------------------------------------------------------------------------
def run_evaluation(config: EvalConfig, stream: TextIO | None = None) -> RunOutcome:
    """Run (or resume) an evaluation and write its results; see the module docstring."""
    registry = default_registry()
    tasks: list[EvalTask] = select_tasks(registry, config.scenes, config.levels, config.limit, config.tasks or None)
    keys = trial_keys(tasks, config.rounds)
    selected = [(t.scene, t.task_id) for t in tasks]
    if config.resume:
        writer = resume_writer(config.output, arguments=config.arguments(), selected_tasks=selected,
                               expected_trials=len(keys))
    else:
        writer = RunWriter(config.output, arguments=config.arguments(), selected_tasks=selected,
                           expected_trials=len(keys), stepper=config.stepper,
                           metadata_extra={"model": config.policy})
    done = {(e["task"], e["round"]) for e in writer.results}
    todo = [k for k in keys if (k.task_id, k.round) not in done]
    progress = Progress(len(keys), stream=stream, already_done=len(keys) - len(todo))
    failed: list[tuple[str, str]] = []
    with writer:
        for key, result in _results(config, todo):
            task = registry.eval_task(key.task_id)
            writer.record_trial(result, task=task, round_index=key.round, seed=key.seed)
            if "policy_error" in result:
                failed.append((key.trial_id, result["policy_error"]))
            progress.advance(failed="policy_error" in result,
                             note=f"{key.task_id[:48]} IS {result['intent_score']:.2f} ES {result['exec_score']:.2f}")
    return RunOutcome(Path(config.output), len(todo), len(keys) - len(todo), failed, writer.summary())
