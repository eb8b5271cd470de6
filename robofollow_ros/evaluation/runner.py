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

Order of a run: every check that reads only (the selection, the output directory, a resume's
settings against the ones it recorded), then the first worker (its policy built: SPEC, kwargs and
the factory itself; a remote server reached), and only then the run directory. So a run that cannot
start leaves nothing behind, and the corrected command is not refused for a half-made directory.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from robofollow_ros.benchmark import EvalTask, default_registry
from robofollow_ros.evaluation.controls import CONTROLS, controls_record, parse_controls, with_controls
from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.progress import RENDERER_HINT, Heartbeat, Progress, waited
from robofollow_ros.evaluation.provenance import RunSettings, official_arguments
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.evaluation.selection import TrialKey, limit_differs_from_official, select_tasks, trial_keys
from robofollow_ros.evaluation.trial_worker import (
    DEFAULT_POLICY_TIMEOUT_S,
    TrialOutcome,
    TrialWorker,
    WorkerSpec,
    rig_for_workers,
)
from robofollow_ros.evaluation.worker_errors import START_OTHER, WorkerStartError, start_failure
from robofollow_ros.monitoring.rates import CONTROL_HZ
from robofollow_ros.policy.spec import check_privileged, check_render
from robofollow_ros.rundir.layout import RECORDINGS_DIR, VIDEOS_DIR

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
    #: ``--video``: after the trials, ``<output>/videos/<trial>.mp4`` and a contact sheet from each recording
    #: (``monitoring.trial_video``); recorded in run.json's arguments as ``video``.
    video: bool = False
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
    #: ``--controls``: instruction controls run beside every trial on its seed (``evaluation.controls``);
    #: recorded as ``controls`` in run.json's arguments (``--resume`` refuses another set).
    controls: tuple[str, ...] = ()

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
        if self.video and not self.record:
            raise ValueError("--video: only with --record (videos are made from the recordings)")
        if self.video and not self.render:
            raise ValueError("--video: needs the cameras; leave out --no-render")
        if self.video and self.record_hz is None:
            raise ValueError("--video: --record-rate policy records one picture per policy call (a video of a few "
                             "frames); leave --record-rate out (control, 10 Hz) or give a control rate")
        if self.record_hz is not None and self.record_hz not in CONTROL_HZ:
            raise ValueError(f"--record-rate: {self.record_hz} Hz is not one of {', '.join(map(str, CONTROL_HZ))}")
        if self.controls != parse_controls(",".join(self.controls)):
            raise ValueError(f"--controls: {','.join(self.controls)!r} must name each of {', '.join(CONTROLS)} "
                             "at most once, in that order")
        check_privileged(self.policy, self.privileged)  # a PolicySpecError is a ValueError
        check_render(self.policy, self.render)
        if self.settings.execution.realtime and self.stepper != "direct":
            raise ValueError(f"--stepper {self.stepper}: --execution realtime executes one row per control tick "
                             "(the direct stepper); leave --stepper out")

    def arguments(self) -> dict[str, Any]:
        """run.json's ``arguments``: the official evaluator's keys (``provenance.official_arguments``), then
        every field of this config under its own name (``privileged`` among them, when it has one)."""
        ours = asdict(self)
        ours["output"] = str(self.output)
        # Our --limit counts per scene and level, the official one per scene: where they select differently, the
        # official keys name the selected tasks (what evaluate.py needs to run the same trials), and ours keeps K.
        tasks, limit = self.tasks, self.limit
        if limit_differs_from_official(self.levels, limit):
            tasks = tuple(t.task_id for t in select_tasks(default_registry(), self.scenes, self.levels, limit,
                                                          self.tasks or None))
            limit = None
        official = official_arguments(scenes=self.scenes, levels=self.levels, tasks=tasks, limit=limit,
                                      rounds=self.rounds, max_steps=self.settings.max_steps,
                                      actions_per_step=self.settings.actions_per_step, stepper=self.stepper,
                                      output=str(self.output), policy=self.policy, policy_kwargs=self.policy_kwargs,
                                      policy_timeout=self.policy_timeout_s, video=self.video)
        return {**official, "limit_per_scene_level": self.limit,
                **{k: v for k, v in ours.items() if k not in official}}

    def run_settings(self, server_metadata: dict[str, Any] | None = None,
                     policy_privileged: bool | None = None) -> RunSettings:
        """What defines this run besides its selection (``--resume`` compares them). ``privileged``: the flag
        (read from :meth:`arguments`, false where the config has no such field), else whether the built policy
        receives privileged state (``policy_privileged``, its worker's report: it declares ``needs_privileged``);
        None while neither says (no policy built yet)."""
        flag = bool(self.arguments().get("privileged", False))
        privileged = True if flag else policy_privileged
        return RunSettings(policy=self.policy, policy_kwargs=dict(self.policy_kwargs),
                           max_steps=self.settings.max_steps, actions_per_step=self.settings.actions_per_step,
                           render=self.render, privileged=privileged,
                           privileged_source="--privileged" if flag else ("policy" if privileged else None),
                           server_metadata=server_metadata,
                           execution=self.settings.execution.describe(self.settings.max_steps,
                                                                      self.settings.actions_per_step))

    def worker_spec(self) -> WorkerSpec:
        mcap = str(Path(self.output) / RECORDINGS_DIR) if self.record and self.backend != "ray" else None
        return WorkerSpec(policy=self.policy, policy_kwargs=dict(self.policy_kwargs), render=self.render,
                          stepper=self.stepper, settings=self.settings, policy_timeout_s=self.policy_timeout_s,
                          record_dir=mcap, ship_recordings=self.record and self.backend == "ray",
                          record_hz=self.record_hz, privileged=self.privileged, search_dir=os.getcwd(),
                          rig=rig_for_workers())

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

    def start(self, trials: int) -> dict[str, Any]: ...

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]: ...

    def close(self) -> None: ...


class InlinePool:
    """The driver's own process as the only worker (``--backend inline``)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.replaced = 0
        self._worker: TrialWorker | None = None
        self._current: tuple[TrialKey, float] | None = None

    def running(self) -> list[tuple[TrialKey, float]]:
        current = self._current
        return [current] if current is not None else []

    def start(self, trials: int) -> dict[str, Any]:
        """Build the worker (its policy, a remote one reached); returns what it reports (``TrialWorker.info``)."""
        if self._worker is None:
            try:
                self._worker = TrialWorker(self.spec)
            except (Exception, SystemExit) as exc:
                raise WorkerStartError(*start_failure(exc)) from exc
        return dict(self._worker.info)

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]:
        if not keys:
            return
        self.start(len(keys))
        assert self._worker is not None
        for key in keys:
            self._current = (key, time.monotonic())
            try:
                outcome = self._worker.run(key)
            finally:
                self._current = None
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


def check_output(config: EvalConfig, tasks: Sequence[EvalTask], expected: int) -> set[tuple[str, int, str]]:
    """The refusals opening the run directory would give, reading only; the (task, round, control) a resume holds."""
    return RunWriter.check(config.output, resume=config.resume, arguments=config.arguments(),
                           selected_tasks=[(t.scene, t.task_id) for t in tasks], expected_trials=expected,
                           stepper=config.stepper, settings=config.run_settings())


def open_writer(config: EvalConfig, tasks: Sequence[EvalTask], expected: int,
                server_metadata: dict[str, Any] | None = None,
                skipped: Sequence[dict[str, str]] = (), policy_privileged: bool | None = None,
                renderer_startup_s: float | None = None) -> RunWriter:
    """The run's writer; ``policy_privileged``, ``renderer_startup_s``: what the first worker reported (``info``):
    whether its policy receives privileged state, and the seconds its renderer took to build, before any trial (so
    no trial's ``wall_s`` holds them; null without rendering, or when no worker started)."""
    selected = [(t.scene, t.task_id) for t in tasks]
    extra: dict[str, Any] = {"model": config.policy}
    extra["renderer_startup_s"] = renderer_startup_s
    if config.controls:
        extra["controls"] = controls_record(config.controls, skipped)
    settings = config.run_settings(server_metadata, policy_privileged)
    if config.resume:
        return RunWriter.resume(config.output, arguments=config.arguments(), selected_tasks=selected,
                                expected_trials=expected, stepper=config.stepper, metadata_extra=extra,
                                settings=settings)
    return RunWriter(config.output, arguments=config.arguments(), selected_tasks=selected, expected_trials=expected,
                     stepper=config.stepper, metadata_extra=extra, settings=settings)


def run_evaluation(config: EvalConfig, stream: TextIO | None = None) -> RunOutcome:
    """Run (or resume) an evaluation and write its results; see the module docstring."""
    registry = default_registry()
    tasks: list[EvalTask] = select_tasks(registry, config.scenes, config.levels, config.limit, config.tasks or None)
    keys, skipped = with_controls(registry, trial_keys(tasks, config.rounds, by_round=True), config.controls)
    done = check_output(config, tasks, len(keys))
    backend = make_backend(config)
    try:
        return _run(config, registry, tasks, keys, done, backend, stream, skipped)
    finally:
        backend.close()


def starting_line(config: EvalConfig, trials: int, renderer_startup_s: float | None = None) -> str:
    """What the wait for the first result is, said before it; a rendered run's renderer was built before it (the
    workers' start: up to a minute on a CPU), the seconds it took said when known."""
    if config.backend == "inline":
        where = "in this process"
    elif config.backend == "ray":
        where = "on Ray workers"
    else:
        n = min(config.workers, trials)
        where = f"in {n} worker process{'es' if n > 1 else ''}"
    rendered = "" if not config.render else (
        f" (rendered: the renderer was built in {renderer_startup_s:.1f} s, before the first trial)"
        if renderer_startup_s is not None else " (rendered)")
    return f"running {trials} trial{'s' if trials != 1 else ''} of {config.policy} {where}{rendered}"


def _waiting_for(backend: Backend, progress: Progress | None = None) -> str:
    """The heartbeat's line: the trials under way (the first ones, and how long each has run)."""
    running = sorted(getattr(backend, "running", list)(), key=lambda r: r[1])
    done = f"; {progress.done}/{progress.total} trials done" if progress is not None else ""
    if not running:
        return f"… waiting for a worker (the simulator and the policy){done}"
    shown = ", ".join(f"{key.trial_id} ({waited(since)})" for key, since in running[:3])
    more = f" and {len(running) - 3} more" if len(running) > 3 else ""
    return f"… running {shown}{more}{done}"


def _run(config: EvalConfig, registry: Any, tasks: Sequence[EvalTask], keys: Sequence[TrialKey],
         done: set[tuple[str, int, str]], backend: Backend, stream: TextIO | None,
         skipped: Sequence[dict[str, str]] = ()) -> RunOutcome:
    # The first worker is built before the run directory is: a policy that cannot be built (SPEC, kwargs,
    # the factory raising) or reached leaves nothing behind. A resume with nothing left starts none.
    info: dict[str, Any] = {}
    if len(done) < len(keys):
        # Told only if it lasts (a refusal here is one line), then what the trials wait for, before they do.
        started = time.monotonic()
        what = f"the simulator, the policy and the renderer: {RENDERER_HINT}" if config.render else \
            "the simulator and the policy"
        with Heartbeat(lambda: f"… starting the workers ({what}), {waited(started)}",
                       stream) if stream is not None else contextlib.nullcontext():
            info = backend.start(len(keys) - len(done))
    writer = open_writer(config, tasks, len(keys), info.get("server_metadata"), skipped, info.get("privileged"),
                         info.get("renderer_startup_s"))
    if stream is not None and skipped:
        print(f"controls: {len(skipped)} pair{'s' if len(skipped) != 1 else ''} skipped for want of a candidate "
              f"(run.json's controls.skipped names each)", file=stream, flush=True)
    if stream is not None and len(done) < len(keys):  # after the run directory: a refused one is one line
        print(starting_line(config, len(keys) - len(done), info.get("renderer_startup_s")), file=stream,
              flush=True)
    failed: list[tuple[str, str]] = []
    with writer:
        todo = [k for k in keys if not writer.recorded(k.task_id, k.round, k.control)]
        if writer.code_changes and stream is not None:
            print(f"warning: resuming on other code than the run started with ({', '.join(writer.code_changes)} "
                  f"differ); run.json's resumes record what ran each part", file=stream, flush=True)
        progress = Progress(len(keys), stream=stream, already_done=len(keys) - len(todo))
        try:
            # --record: the workers write MCAP files into the run directory; a full disk there is exit 5 too
            with writer.output_errors(), (progress.waiting(lambda: _waiting_for(backend, progress))
                                          if stream is not None else contextlib.nullcontext()):
                for outcome in backend.results(todo):
                    key, result = outcome.key, outcome.result
                    if writer.recorded(key.task_id, key.round, key.control):
                        continue  # delivered twice: a run holds each trial once
                    if key.control:  # also a trial its worker could not finish (no fields from the episode)
                        result = {**result, "task": key.task_id, "control": key.control, "partner": key.partner_id}
                    if outcome.recording is not None:
                        writer.add_recording(key.trial_id, outcome.recording)
                    writer.record_trial(result, task=registry.eval_task(key.task_id), round_index=key.round,
                                        seed=key.seed)
                    if "policy_error" in result:
                        failed.append((key.trial_id, str(result["policy_error"]).splitlines()[0]))
                    progress.advance(failed="policy_error" in result,
                                     note=f"{key.task_id[:48]}{' ' + key.control if key.control else ''} "
                                          f"IS {result['intent_score']:.2f} "
                                          f"ES {result['exec_score']:.2f}")
        finally:
            backend.close()
        if stream is not None:
            warning = short_trials_warning(config, writer.results)
            if warning:
                print(warning, file=stream, flush=True)
        if config.video:
            with writer.output_errors():
                make_videos(Path(config.output), [k.trial_id for k in keys], stream)
    return RunOutcome(Path(config.output), len(todo), len(keys) - len(todo), failed, writer.summary(),
                      replaced_workers=backend.replaced, requeued_trials=getattr(backend, "requeued", 0))



def short_trials_warning(config: EvalConfig, results: Sequence[dict[str, Any]]) -> str | None:
    """A line when a calls budget gave trials one row per call: a server that buffers its chunk and answers one
    action per call (vla-eval's ``PredictModelServer`` with ``chunk_size``) then runs ``max_steps`` rows, a
    fraction of a chunked policy's trial; ``--budget rows`` counts rows instead."""
    settings = config.settings
    if settings.execution.realtime or settings.execution.budget != "calls" or settings.actions_per_step < 2:
        return None
    single = [r for r in results if int(r.get("policy_steps") or 0) >= 2
              and r.get("rows_executed") == r.get("policy_steps") and "policy_error" not in r]
    if not single:
        return None
    return (f"warning: {len(single)} trial{'s' if len(single) != 1 else ''} got one row per policy call, so "
            f"each ran {settings.max_steps} rows where a chunked policy runs up to "
            f"{settings.max_steps * settings.actions_per_step} (a server that buffers its chunk, e.g. vla-eval's "
            "PredictModelServer with chunk_size?); --budget rows counts executed rows instead")


def make_videos(run_dir: Path, trial_ids: Sequence[str], stream: TextIO | None) -> int:
    """``--video``: the MP4 and contact sheet of every recorded trial that has none yet (a resumed run makes the
    missing ones), a line per trial; a recording that gives no video (no camera picture) is said, not fatal:
    the trial's result stands. Returns the videos written."""
    from robofollow_ros.monitoring.trial_video import video_paths, write_videos
    from robofollow_ros.monitoring.video_bag import VideoBagError, plan_bag

    out = run_dir / VIDEOS_DIR
    plans = []
    for trial in trial_ids:
        bag = run_dir / RECORDINGS_DIR / f"{trial}.mcap"
        if not bag.is_file() or video_paths(out, trial)[0].is_file():
            continue
        try:
            plans.append(plan_bag(bag))
        except VideoBagError as exc:
            if stream is not None:
                print(f"video: {trial}: no video ({exc})", file=stream, flush=True)
    say = (lambda line: print(line, file=stream, flush=True)) if stream is not None else (lambda _line: None)
    return len(write_videos(plans, out, say, skip_bad=True)) if plans else 0
