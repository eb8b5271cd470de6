"""One worker of the evaluator: a SimWorld and a policy kept across trials.

The same class serves every backend: the driver's own process (``--backend inline``), a supervised
worker process (``local``, ``evaluation.local_pool``) and a Ray actor (``ray``,
``evaluation.ray_pool``). Every trial starts from a fresh scene built from its seed, so a result
does not depend on which worker ran it or what it ran before; that is what makes the backends
agree verdict for verdict.

Every policy call is bounded by ``policy_timeout_s`` (``robofollow eval --policy-timeout``), for
in-process and remote policies alike (``policy.guard.TimeoutGuardedPolicy``). Python cannot stop a
thread, so a call that overran keeps running; the worker then reports ``retire`` and its owner
replaces it (a process or an actor) or, inline, builds a fresh policy.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.controls import plan_control
from robofollow_ros.evaluation.episode import EpisodeSettings, policy_failure, run_episode
from robofollow_ros.evaluation.realtime_episode import run_realtime_episode
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.evaluation.worker_errors import PolicyStartError
from robofollow_ros.policy.guard import DEFAULT_POLICY_TIMEOUT_S as DEFAULT_POLICY_TIMEOUT_S  # for the runner
from robofollow_ros.policy.guard import TimeoutGuardedPolicy, guarded_kwargs
from robofollow_ros.policy.interface import close_policy, receives_privileged
from robofollow_ros.policy.remote import is_remote
from robofollow_ros.policy.spec import load_policy


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker of a run is built from (picklable: it travels to processes and actors)."""

    policy: str
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    render: bool = False
    stepper: str = "topp"
    settings: EpisodeSettings = field(default_factory=EpisodeSettings)
    policy_timeout_s: float = DEFAULT_POLICY_TIMEOUT_S
    #: Record MCAPs here (a path the worker can write: the run's ``mcap/`` on this machine).
    record_dir: str | None = None
    #: Record to a private temporary directory and return the bytes (Ray: the driver alone writes the run).
    ship_recordings: bool = False
    #: Recordings sampled every 1/N s of robot time (``monitoring.rates``); None: at the policy rate.
    record_hz: int | None = None
    #: Reach a remote policy (connect + reset, and an openpi server's handshake) before the first trial.
    #: Workers that replace dead ones skip it: a server that is briefly busy must fail at most a trial,
    #: not stop a run under way.
    probe_remote: bool = True
    #: ``--privileged``: hand the policy privileged state whatever it is (a tcp:// client forwards it).
    privileged: bool = False
    #: Where ``module:function`` SPECs look first: the directory the command was started from (as
    #: ``python -m`` run there would), wherever the worker runs; None: the worker's own directory.
    search_dir: str | None = None
    #: The run's rig (``--rig``), made this worker's active rig (``ROBOFOLLOW_RIG``) before the policy or the
    #: simulator loads it: a rig of this package by name (:func:`rig_for_workers`: found in the worker's own copy,
    #: wherever a Ray node installed it), any other by its YAML's path. None: the worker's own environment's.
    rig: str | None = None

    def __post_init__(self) -> None:
        if not 0 < self.policy_timeout_s < math.inf:
            raise ValueError(f"--policy-timeout: must be a positive number of seconds, got {self.policy_timeout_s}")


@dataclass
class TrialOutcome:
    """What a worker hands back for one trial."""

    key: TrialKey
    result: dict[str, Any]
    #: A policy call is still stuck past its timeout: replace this worker before its next trial.
    retire: bool = False
    #: The trial's MCAP file (only with ``ship_recordings``).
    recording: bytes | None = None


def policy_kwargs_for(spec: WorkerSpec) -> dict[str, Any]:
    """A remote client's own socket timeout follows the policy timeout, as evaluate.py passes it to its
    client, set a little above it so that the whole-call bound is the one that speaks (one reason)."""
    return guarded_kwargs(spec.policy, spec.policy_kwargs, spec.policy_timeout_s)


def replacement(spec: WorkerSpec) -> WorkerSpec:
    """The spec of a worker started in place of one that died or retired."""
    return dataclasses.replace(spec, probe_remote=False)


def build_policy(spec: WorkerSpec) -> TimeoutGuardedPolicy:
    policy = load_policy(spec.policy, policy_kwargs_for(spec), privileged=spec.privileged,
                         search_dir=spec.search_dir)
    return TimeoutGuardedPolicy(policy, spec.policy_timeout_s)


def start_policy(spec: WorkerSpec) -> tuple[TimeoutGuardedPolicy, dict[str, Any] | None]:
    """Build the policy; a remote one is reached before the first trial (connect + reset, as a trial
    starts, and an openpi server's handshake), so that an unreachable server stops the run at once
    instead of failing every trial. Returns the policy and its server's metadata (:func:`server_info`)."""
    try:
        policy = build_policy(spec)
    except (Exception, SystemExit) as exc:
        raise PolicyStartError(f"policy {spec.policy!r} could not be built: {policy_failure(exc)}") from exc
    metadata = None
    if spec.probe_remote and is_remote(spec.policy):
        try:
            policy.reset()
            metadata = server_info(policy)
        except (Exception, SystemExit) as exc:
            close_in_background(policy)
            raise PolicyStartError(f"policy server {spec.policy} unreachable: {policy_failure(exc)}") from exc
    return policy, metadata


def server_info(policy: Any) -> dict[str, Any] | None:
    """The metadata a policy's server sent about itself (openpi's handshake), through the wrappers around
    the client; None where the protocol has none (RoboFollow TCP, in-process policies)."""
    for _ in range(8):  # guard -> validation -> client; never a long chain
        if policy is None:
            return None
        if callable(getattr(type(policy), "server_info", None)):
            return dict(policy.server_info())
        policy = getattr(policy, "inner", None)
    return None


def close_in_background(policy: TimeoutGuardedPolicy) -> None:
    """Close a policy whose call is stuck without waiting on it (its close may wait for that call)."""
    threading.Thread(target=policy.close, name="policy-close", daemon=True).start()


def rig_for_workers() -> str | None:
    """:attr:`WorkerSpec.rig` of this process's active rig (``ROBOFOLLOW_RIG``; None where it is not set): the
    name of a rig this package ships (the built-in one, ``config/rigs/<name>``), else the rig YAML's path."""
    from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG
    from robofollow_ros.robot.rig_description import BUILT_IN_RIG, ENV_RIG, RIGS_DIR, rig_yaml

    if not os.environ.get(ENV_RIG):
        return None
    source = rig_yaml(None).resolve()
    if source == DEFAULT_RIG_CONFIG.resolve():
        return BUILT_IN_RIG
    if source.name == "rig.yaml" and source.parent.parent == RIGS_DIR.resolve():
        return source.parent.name
    return str(source)


def use_rig(rig: str | None) -> None:
    """Make :attr:`WorkerSpec.rig` this process's active rig: a shipped rig's name as this copy of the package
    has it, else the path as given."""
    from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG
    from robofollow_ros.robot.rig_description import BUILT_IN_RIG, ENV_RIG, RIGS_DIR

    if rig is None:
        return
    if rig == BUILT_IN_RIG:
        os.environ[ENV_RIG] = str(DEFAULT_RIG_CONFIG)
    elif os.sep not in rig and (RIGS_DIR / rig / "rig.yaml").is_file():
        os.environ[ENV_RIG] = str(RIGS_DIR / rig / "rig.yaml")
    else:
        os.environ[ENV_RIG] = rig


def control_trial(registry: Any, task: Any, key: TrialKey) -> tuple[Any, Any, Any, dict[str, Any]]:
    """An instruction control's trial (``evaluation.controls``): the task as the world and the policy see it (its
    instruction replaced; its id, layout and seed unchanged), the task that scores it, the one that also scores
    it (a swap's true task) and the fields its results entry carries (``task`` stays the true task's: the key)."""
    plan = plan_control(registry, task, key.control, key.seed)
    if plan is None:
        raise ValueError(f"control: {key.control!r} has no candidate for task {task.task_id!r}")
    shown = dataclasses.replace(task, instruction=plan.instruction)
    scored = registry.eval_task(plan.scored_task) if plan.scored_task else task
    fields: dict[str, Any] = {"task": task.task_id, "instruction": plan.instruction, "control": key.control,
                              "partner": key.partner_id, "control_source_task": plan.source_task}
    if plan.scored_task:
        fields["scored_task"] = plan.scored_task
    return shown, scored, task if plan.scored_task else None, fields


class TrialWorker:
    """Owns one simulator and one policy; :meth:`run` runs and scores one trial."""

    def __init__(self, spec: WorkerSpec) -> None:
        from robofollow_ros.sim.world import SimWorld

        use_rig(spec.rig)  # before the policy (the oracle plans on the rig) and the simulator load it
        self.spec = spec
        self.registry = default_registry()
        self.policy, server_metadata = start_policy(spec)
        #: What this worker tells the driver when it is ready (``info``): the policy server's metadata.
        #: and whether the policy is handed privileged state (the flag, or its own declaration: run.json's
        #: ``privileged`` is read here, from the policy, not from a list of names).
        self.info: dict[str, Any] = {"server_metadata": server_metadata,
                                     "privileged": receives_privileged(self.policy)}
        try:
            execution = spec.settings.execution
            if execution.realtime:  # one row per control tick, a fixed number of physics steps
                self.world = SimWorld(render=spec.render, stepper="direct",
                                      direct_steps=execution.tick_physics_steps)
            else:
                self.world = SimWorld(render=spec.render, stepper=spec.stepper)  # type: ignore[arg-type]
            if spec.render:  # the renderer is built now, before any trial's clock starts, and its cost recorded
                from robofollow_ros.sim.renderer import warm_up

                scratch = SimWorld(render=True, cameras=self.world.cameras, rig=self.world.rig)
                self.info["renderer_startup_s"] = warm_up(scratch, self.registry.eval_tasks()[0])
        except BaseException:
            close_policy(self.policy)
            raise
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.recorder = None
        record_dir = spec.record_dir
        if spec.ship_recordings:
            self._tmp = tempfile.TemporaryDirectory(prefix="robofollow-mcap-")
            record_dir = self._tmp.name
        if record_dir is not None:
            from robofollow_ros.monitoring.recorder import TrialRecorder

            self.recorder = TrialRecorder(Path(record_dir), record_hz=self.spec.record_hz)

    def run(self, key: TrialKey) -> TrialOutcome:
        task = self.registry.eval_task(key.task_id)
        observer = self.recorder.for_trial(key.trial_id, key.round) if self.recorder is not None else None
        episode = run_realtime_episode if self.spec.settings.execution.realtime else run_episode
        if not key.control:
            result = episode(self.world, self.policy, task, key.seed, self.spec.settings, observer=observer)
        else:
            shown, scored, also, fields = control_trial(self.registry, task, key)
            result = episode(self.world, self.policy, shown, key.seed, self.spec.settings, observer=observer,
                             scored_task=scored, also_scored=also)
            result.update(fields)
        recording = None
        if self.spec.ship_recordings and self.recorder is not None:
            path = self.recorder.path_of(key.trial_id)
            if path.is_file():
                recording = path.read_bytes()
                path.unlink()
        return TrialOutcome(key, result, retire=self.policy_stuck(), recording=recording)

    def policy_stuck(self) -> bool:
        """True while a policy call that overran its timeout is still running."""
        return not self.policy.wait_idle(0.0)

    def renew_policy(self) -> None:
        """Inline only: leave a stuck policy to its daemon thread and build a fresh one."""
        close_in_background(self.policy)
        self.policy = build_policy(self.spec)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        if self.policy_stuck():
            close_in_background(self.policy)
        else:
            close_policy(self.policy)
        self.world.close()
        if self._tmp is not None:
            self._tmp.cleanup()
