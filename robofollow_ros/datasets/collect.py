"""``robofollow collect``: oracle demonstrations of training (or evaluation) tasks as a LeRobot dataset.

Plan: for each selected task, ``episodes_per_task`` episodes, each with a fresh seed (training
seeds start at 100,000, far from every evaluation seed) and, for training tasks, the instruction
variants in turn. A training task is performed and judged as its L0 evaluation record (same
layout, same behaviour; the scorer does not read the words). Workers (spawned processes, one
``SimWorld`` each) stage every finished episode whole; failed demonstrations are recorded as
failures, never written. When every episode is staged, ``writer.assemble`` builds the dataset in
plan order and the staging directory is removed. ``resume`` continues a killed collection.

The dataset root is a ``rundir.RunDirectory``: locked for the whole collection (a second one into
it is refused), its settings recorded in ``meta/robofollow.json`` and checked by ``--resume``; among them
the rig's name (``--rig``; the rig's files with their SHA-256 are recorded there as ``rig``).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from robofollow_ros import interrupts
from robofollow_ros.benchmark import default_registry
from robofollow_ros.benchmark.seeds import md5_32
from robofollow_ros.datasets import lerobot_v3 as v3
from robofollow_ros.datasets.staging import load_staged, mark_failed, stage_episode, staging_root
from robofollow_ros.datasets.video import VideoSettings
from robofollow_ros.evaluation.progress import RENDERER_HINT, Heartbeat, Progress, waited
from robofollow_ros.rundir import Identity, NotEmptyError, RunDirectory
from robofollow_ros.rundir.layout import COLLECT_IDENTITY_KEY, DATASET_META_FILE

TRAIN_SEED_BASE = 100_000


@dataclass(frozen=True)
class DemoKey:
    task_id: str
    eval_task_id: str
    episode: int
    seed: int
    instruction: str
    variant: int

    @property
    def key(self) -> str:
        return f"{self.task_id}__ep{self.episode:03d}"


@dataclass(frozen=True)
class CollectConfig:
    output: Path
    split: str = "train"
    tasks: tuple[str, ...] = ()
    episodes_per_task: int = 1
    fps: int = 10
    width: int = 320
    height: int = 240
    workers: int = 1
    resume: bool = False
    video: VideoSettings = field(default_factory=VideoSettings)

    def __post_init__(self) -> None:
        if self.split not in ("train", "eval"):
            raise ValueError(f"--split: {self.split!r} is not train or eval")
        if self.episodes_per_task < 1:
            raise ValueError(f"--episodes-per-task: must be >= 1, got {self.episodes_per_task}")
        if self.workers < 1:
            raise ValueError(f"--workers: must be >= 1, got {self.workers}")
        if self.width < 16 or self.height < 16 or self.width % 2 or self.height % 2:
            raise ValueError(f"--image-size: {self.width}x{self.height} must be even and at least 16x16")

    def identity(self) -> dict[str, Any]:
        """What a resumed collection must share with the one it continues."""
        data = asdict(self)
        return {k: data[k] for k in ("split", "tasks", "episodes_per_task", "fps", "width", "height", "video")}


def train_seed(task_id: str, episode: int) -> int:
    return TRAIN_SEED_BASE + (md5_32(task_id) % 1000) * 1000 + episode


def plan(config: CollectConfig) -> list[DemoKey]:
    """Every episode to collect, in dataset order (tasks in registry order, then episode)."""
    registry = default_registry()
    keys: list[DemoKey] = []
    if config.split == "train":
        chosen = [registry.training_task(t) for t in config.tasks] if config.tasks else list(registry.training)
        for task in chosen:
            for e in range(config.episodes_per_task):
                variant = e % len(task.instructions)
                keys.append(DemoKey(task.task_id, f"L0_{task.task_id}", e, train_seed(task.task_id, e),
                                    task.instructions[variant], variant))
        return keys
    evals = [registry.eval_task(t) for t in config.tasks] if config.tasks else list(registry.evaluation)
    for etask in evals:
        for e in range(config.episodes_per_task):
            seed = etask.seeds[e] if e < len(etask.seeds) else train_seed(etask.task_id, e)
            keys.append(DemoKey(etask.task_id, etask.task_id, e, seed, etask.instruction, 0))
    return keys


# -- worker side ---------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _init_worker(config: CollectConfig) -> None:
    from robofollow_ros.policy.expert.oracle import OraclePolicy
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    _STATE.update(config=config, oracle=OraclePolicy(),
                  world=SimWorld(render=True, cameras=CameraSettings(config.width, config.height),
                                 stepper="direct", direct_steps=1))


def _collect_one(key: DemoKey) -> tuple[DemoKey, bool, dict[str, Any]]:
    from robofollow_ros.datasets.demo import record_demonstration

    config: CollectConfig = _STATE["config"]
    staging = staging_root(config.output)
    task = default_registry().eval_task(key.eval_task_id)
    demo = record_demonstration(_STATE["world"], _STATE["oracle"], task, key.seed, key.instruction, config.fps)
    outcome = {"intent_score": demo.result["intent_score"], "exec_score": demo.result["exec_score"],
               "completion_ok": demo.complete, "frames": len(demo.action), "seed": key.seed}
    if not demo.complete:
        mark_failed(staging, key.key, {**asdict(key), **outcome, "reason": demo.result.get("exec_msg", "")})
        return key, False, outcome
    state, action, images = demo.arrays()
    stage_episode(staging, key.key, key.instruction, state, action, images, config.fps, config.video,
                  provenance={**asdict(key), **outcome, "source": "sim-oracle"})
    return key, True, outcome


def _run(config: CollectConfig, todo: Sequence[DemoKey]) -> Iterator[tuple[DemoKey, bool, dict[str, Any]]]:
    if config.workers == 1 or len(todo) <= 1:
        _init_worker(config)
        try:
            for key in todo:
                yield _collect_one(key)
        finally:
            _STATE.clear()
        return
    ctx = mp.get_context("spawn")  # SAPIEN does not survive fork
    with contextlib.ExitStack() as stack:
        with interrupts.held():  # an interrupt while the workers start comes after the pool is in hand
            pool = stack.enter_context(ctx.Pool(min(config.workers, len(todo)), initializer=_init_worker,
                                                initargs=(config,)))
        yield from pool.imap_unordered(_collect_one, todo, chunksize=1)


# -- driver side ---------------------------------------------------------------------------------
@dataclass
class CollectSummary:
    output: Path
    planned: int
    written: int
    failed: list[dict[str, Any]]
    already_done: int
    total_frames: int

    def lines(self) -> list[str]:
        out = [f"dataset {self.output}: {self.written} episodes written ({self.total_frames} frames), "
               f"{len(self.failed)} failed demonstrations not written, {self.planned} planned"]
        if self.already_done:
            out.append(f"resumed: {self.already_done} episodes were already done before this run")
        out += [f"failed: {f['task_id']} episode {f['episode']} seed {f['seed']} "
                f"(IS {f['intent_score']:.2f} ES {f['exec_score']:.2f}) {f.get('reason', '')}".rstrip()
                for f in self.failed]
        return out


class CollectError(ValueError):
    """The output cannot be used as asked (not empty, or a resume with other settings)."""


def collect_identity(config: CollectConfig) -> Identity:
    """The settings a ``--resume`` must share, recorded in ``meta/robofollow.json`` under ``"collect"``: the
    config's and the active rig's name (demonstrations of two robots are not one dataset)."""
    from robofollow_ros.evaluation.provenance import active_rig

    return _CollectIdentity({**config.identity(), "rig": active_rig().name}, record=DATASET_META_FILE,
                            key=COLLECT_IDENTITY_KEY)


class _CollectIdentity(Identity):
    """A collection recorded before ``rig`` was: it ran on the built-in rig (there was no other)."""

    def recorded(self, run_dir: Path) -> dict[str, Any] | None:
        data = super().recorded(run_dir)
        if data is not None and "rig" not in data:
            from robofollow_ros.robot.rig_description import BUILT_IN_RIG

            data = {**data, "rig": BUILT_IN_RIG}
        return data


def open_output(config: CollectConfig) -> RunDirectory:
    """The dataset root, locked for this collection: new or empty, or (``--resume``) one with these settings.

    Another collection writing it is refused (``OutputUnusableError``, exit 5), as is a ``--resume``
    with other settings (``RunDirError`` naming them, exit 2).
    """
    if config.resume:
        return RunDirectory.resume(config.output, identity=collect_identity(config))
    try:
        return RunDirectory.create(config.output)
    except NotEmptyError:
        raise CollectError(f"--output: {config.output} is not empty "
                           "(add --resume to continue a killed collection there)") from None


def run_collection(config: CollectConfig, stream: TextIO | None = None) -> CollectSummary:
    with open_output(config) as directory, directory.errors():
        return _collect(config, directory, stream)


def _collect(config: CollectConfig, directory: RunDirectory, stream: TextIO | None) -> CollectSummary:
    keys = plan(config)
    out = directory.path
    staging = staging_root(out)
    identity = collect_identity(config).fields
    if directory.recorded_identity is None:  # what a later --resume is checked against
        v3.write_json(out / DATASET_META_FILE, {COLLECT_IDENTITY_KEY: identity})
    done, failed = load_staged(staging)
    # A finished collection has its dataset and no staging left: --resume there has nothing to do
    # (it used to collect every episode again and assemble the dataset anew).
    finished = not done and not failed and (out / v3.INFO_PATH).is_file()
    todo = [] if finished else [k for k in keys if k.key not in done and k.key not in failed]
    already = len(keys) - len(todo)
    progress = Progress(len(keys), label="episodes", stream=stream, already_done=already)
    last = [time.monotonic()]  # when the last episode ended (or the first began)
    if todo and stream is not None:
        workers = min(config.workers, len(todo))
        print(f"recording {len(todo)} episode{'s' if len(todo) != 1 else ''} in "
              f"{'this process' if workers == 1 else f'{workers} worker processes'} (three cameras at "
              f"{config.width}x{config.height}: {RENDERER_HINT})", file=stream, flush=True)
    with progress.waiting(lambda: f"… recording the next episode, {waited(last[0])} so far ({progress.done}/"
                                  f"{progress.total} done)") if stream is not None else contextlib.nullcontext():
        for key, ok, outcome in _run(config, todo):
            last[0] = time.monotonic()
            progress.advance(failed=not ok, note=f"{key.key[:52]} {outcome['frames']} frames"
                                                  f"{'' if ok else ' FAILED'}")
    done, failed = load_staged(staging)
    ordered = [done[k.key] for k in keys if k.key in done]
    failures = [failed[k.key] for k in keys if k.key in failed]
    from robofollow_ros.evaluation.provenance import rig_record

    meta = {COLLECT_IDENTITY_KEY: identity, "rig": rig_record(), "episodes": [ep.meta["provenance"] for ep in ordered],
            "failed": failures}
    if ordered:
        from robofollow_ros.datasets.writer import assemble

        if stream is not None:
            print(f"writing the dataset: {len(ordered)} episodes (videos joined, statistics)", file=stream, flush=True)
        since = time.monotonic()
        with Heartbeat(lambda: f"… writing the dataset, {waited(since)}", stream) if stream is not None else \
                contextlib.nullcontext():
            assemble(out, ordered, config.fps, config.video, extra_meta=meta)
        shutil.rmtree(staging, ignore_errors=True)
    written = len(ordered)
    frames = sum(ep.length for ep in ordered)
    if not ordered and (out / v3.INFO_PATH).is_file():
        info = directory.read_json(v3.INFO_PATH)
        written, frames = info["total_episodes"], info["total_frames"]
    return CollectSummary(out, len(keys), written, failures, already, frames)
