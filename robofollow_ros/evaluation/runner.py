"""The headless evaluator: a protocol of trials over SAPIEN, on one of three backends.

* ``local`` (default): supervised worker processes on this machine (``local_pool``); a worker
  that dies fails only its trial and is replaced.
* ``ray``: Ray actors on a cluster (``ray_pool``); a lost node's trials run again elsewhere.
* ``inline``: in this process, for debuggers and profilers (a policy that kills the process
  kills the run; ``--resume`` then continues it).

Workers keep a SimWorld and a policy across trials, but every trial starts from a fresh scene
built from its seed (``trial_worker``), so the backends and any ``--workers`` give the same
verdicts. Results stream back to this driver, which alone writes the run directory: each trial
in its own SQLite transaction (the source of truth) as it arrives, so a run killed at any moment
resumes where it stopped, on any backend.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from robofollow_ros.benchmark import EvalTask, default_registry
from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.progress import Progress
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.evaluation.selection import TrialKey, select_tasks, trial_keys
from robofollow_ros.evaluation.trial_worker import DEFAULT_POLICY_TIMEOUT_S, TrialOutcome, TrialWorker, WorkerSpec
from robofollow_ros.evaluation.worker_errors import START_OTHER, WorkerStartError, start_failure
from robofollow_ros.monitoring.rates import CONTROL_HZ
from robofollow_ros.policy.spec import check_privileged
from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.layout import RECORDINGS_DIR, RUN_FILE

BACKENDS = ("local", "ray", "inline")
#: Besides the policy's own time (timeout × calls), what a trial may take in the simulator before
#: its worker is judged stuck and killed.
SIM_ALLOWANCE_S = 900.0


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
    #: Worker processes (local) or actors (ray; 0 = one per CPU of the cluster).
    workers: int = 1
    resume: bool = False
    #: Record every trial to ``<output>/mcap/<trial>.mcap`` (``--record``; monitoring.recorder).
    record: bool = False
    #: ``--record-rate``: None records at the policy rate, N samples every 1/N s (``monitoring.rates``).
    record_hz: int | None = None
    backend: str = "local"
    #: ``--ray-address``: None starts a private Ray instance; ``auto``, ``HOST:PORT`` or ``ray://HOST:10001``.
    ray_address: str | None = None
    #: Bound of every policy call, in-process or remote (``--policy-timeout``, evaluate.py's default).
    policy_timeout_s: float = DEFAULT_POLICY_TIMEOUT_S
    #: A trial running longer than this has its worker killed; None: policy time + ``SIM_ALLOWANCE_S``.
    trial_deadline_s: float | None = None
    #: ``--privileged``: every observation carries the privileged state (task id, true object poses),
    #: for any policy and over tcp://; recorded as ``privileged`` in run.json's arguments. Without it
    #: only a declaring built-in (oracle, blind) gets it, in process. Not comparable with published results.
    privileged: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.workers < (0 if self.backend == "ray" else 1):
            raise ValueError(f"--workers: must be >= 1, got {self.workers}")
        if not 0 < self.policy_timeout_s < math.inf:
            raise ValueError(f"--policy-timeout: must be a positive number of seconds, got {self.policy_timeout_s}")
        if self.ray_address is not None and self.backend != "ray":
            raise ValueError("--ray-address: only with --backend ray")
        if self.record_hz is not None and not self.record:
            raise ValueError("--record-rate: only with --record")
        if self.record_hz is not None and self.record_hz not in CONTROL_HZ:
            raise ValueError(f"--record-rate: {self.record_hz} Hz is not one of {', '.join(map(str, CONTROL_HZ))}")
        check_privileged(self.policy, self.privileged)  # a PolicySpecError is a ValueError

    def arguments(self) -> dict[str, Any]:
        args = asdict(self)
        args["output"] = str(self.output)
        return args

    def worker_spec(self) -> WorkerSpec:
        mcap = str(Path(self.output) / RECORDINGS_DIR) if self.record and self.backend != "ray" else None
        return WorkerSpec(policy=self.policy, policy_kwargs=dict(self.policy_kwargs), render=self.render,
                          stepper=self.stepper, settings=self.settings, policy_timeout_s=self.policy_timeout_s,
                          record_dir=mcap, ship_recordings=self.record and self.backend == "ray",
                          record_hz=self.record_hz, privileged=self.privileged)

    def deadline_s(self) -> float:
        if self.trial_deadline_s is not None:
            return self.trial_deadline_s
        return self.policy_timeout_s * (self.settings.max_steps + 2) + SIM_ALLOWANCE_S


@dataclass
class RunOutcome:
    run_dir: Path
    recorded: int
    skipped: int
    #: (trial id, reason) of every trial that could not be executed (policy error, timeout, dead worker).
    failed_trials: list[tuple[str, str]]
    summary: dict[str, Any]
    #: Workers started in place of dead or retired ones; trials re-queued after a lost Ray node.
    replaced_workers: int = 0
    requeued_trials: int = 0


class Backend(Protocol):
    replaced: int

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]: ...

    def close(self) -> None: ...


class InlinePool:
    """The driver's own process as the only worker (``--backend inline``)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.replaced = 0
        self._worker: TrialWorker | None = None

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]:
        if not keys:
            return
        try:
            self._worker = TrialWorker(self.spec)
        except (Exception, SystemExit) as exc:
            raise WorkerStartError(*start_failure(exc)) from exc
        for key in keys:
            outcome = self._worker.run(key)
            if outcome.retire:  # a stuck call cannot be stopped in-process: leave it, build a new policy
                self._worker.renew_policy()
                self.replaced += 1
            yield outcome

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


def make_backend(config: EvalConfig) -> Backend:
    spec = config.worker_spec()
    if config.backend == "inline":
        return InlinePool(spec)
    if config.backend == "ray":
        try:
            from robofollow_ros.evaluation.ray_pool import RayPool
        except ImportError as exc:  # ray is in requirements.txt; a trimmed install may lack it
            raise WorkerStartError(START_OTHER, f"--backend ray: cannot import ray ({exc}); pip install ray") from None
        return RayPool(spec, config.workers, config.ray_address, config.deadline_s())
    from robofollow_ros.evaluation.local_pool import LocalPool

    return LocalPool(spec, config.workers, config.deadline_s())


def open_writer(config: EvalConfig, tasks: Sequence[EvalTask], expected: int) -> RunWriter:
    selected = [(t.scene, t.task_id) for t in tasks]
    extra = {"model": config.policy}
    if config.resume:
        _same_privileged(config)
        return RunWriter.resume(config.output, arguments=config.arguments(), selected_tasks=selected,
                                expected_trials=expected, stepper=config.stepper, metadata_extra=extra)
    return RunWriter(config.output, arguments=config.arguments(), selected_tasks=selected, expected_trials=expected,
                     stepper=config.stepper, metadata_extra=extra)


def _same_privileged(config: EvalConfig) -> None:
    """A resumed run keeps its ``--privileged``: one run never mixes trials with and without it."""
    run_file = Path(config.output) / RUN_FILE
    if not run_file.is_file():
        return
    try:
        recorded = bool((read_json(run_file).get("arguments") or {}).get("privileged", False))
    except (OSError, ValueError, AttributeError):
        return  # an unreadable run.json is the resume check's to name
    if recorded != config.privileged:
        said = "with" if recorded else "without"
        raise ValueError(f"--privileged: the run in {config.output} was started {said} --privileged; "
                         f"resume it {said} --privileged")


def run_evaluation(config: EvalConfig, stream: TextIO | None = None) -> RunOutcome:
    """Run (or resume) an evaluation and write its results; see the module docstring."""
    registry = default_registry()
    tasks: list[EvalTask] = select_tasks(registry, config.scenes, config.levels, config.limit, config.tasks or None)
    keys = trial_keys(tasks, config.rounds)
    writer = open_writer(config, tasks, len(keys))
    failed: list[tuple[str, str]] = []
    with writer:
        todo = [k for k in keys if not writer.recorded(k.task_id, k.round)]
        progress = Progress(len(keys), stream=stream, already_done=len(keys) - len(todo))
        backend = make_backend(config)
        try:
            # --record: the workers write MCAP files into the run directory; a full disk there is exit 5 too
            with writer.output_errors():
                for outcome in backend.results(todo):
                    key, result = outcome.key, outcome.result
                    if writer.recorded(key.task_id, key.round):
                        continue  # delivered twice: a run holds each trial once
                    if outcome.recording is not None:
                        writer.add_recording(key.trial_id, outcome.recording)
                    writer.record_trial(result, task=registry.eval_task(key.task_id), round_index=key.round,
                                        seed=key.seed)
                    if "policy_error" in result:
                        failed.append((key.trial_id, str(result["policy_error"]).splitlines()[0]))
                    progress.advance(failed="policy_error" in result,
                                     note=f"{key.task_id[:48]} IS {result['intent_score']:.2f} "
                                          f"ES {result['exec_score']:.2f}")
        finally:
            backend.close()
    return RunOutcome(Path(config.output), len(todo), len(keys) - len(todo), failed, writer.summary(),
                      replaced_workers=backend.replaced, requeued_trials=getattr(backend, "requeued", 0))
