"""RoboFollow-compatible run output: ``run.json``, ``results.json``, ``summary.json`` and the SQLite store.

The headless evaluator (and the ROS trial manager) drive one :class:`RunWriter` per run::

    with RunWriter(run_dir, arguments=vars(args), selected_tasks=tasks, expected_trials=n) as run:
        for task, round_index, seed in trials:
            result = score_trajectory(task, frames)          # or monitor.result()
            run.record_trial(result, task=task, round_index=round_index, seed=seed)
    # leaving the block completes the run; an exception marks it failed (traceback in run.json)

``RunWriter.resume(run_dir, ...)`` instead continues a run killed at any moment (``--resume``).
``record_trial`` stores the trial in SQLite in one transaction first, then rewrites
``results.json`` atomically, so after a crash both hold exactly the trials finished before it.
The directory itself (lock, atomic files, unusable output, the resume check) is a
``rundir.RunDirectory``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import platform
import sqlite3
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.rundir import Identity, OutputUnusableError, RunDirectory, RunDirError
from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.layout import (
    RECORDINGS_DIR,
    RESULTS_FILE,
    RUN_FILE,
    STORE_FILE,
    STORE_FILES,
    SUMMARY_FILE,
    meaningful_entries,
)
from robofollow_ros.rundir.store import stored_trials
from robofollow_ros.scoring.summary import summarize

__all__ = ["DuplicateTrialError", "RunWriter", "close_abandoned_run", "run_identity"]

#: Packages whose versions run.json records (RoboFollow's list, plus what this package uses instead).
VERSION_PACKAGES = ("numpy", "sapien", "torch", "mplib", "toppra", "h5py", "transforms3d", "imageio",
                    "imageio-ffmpeg", "nvidia-curobo", "warp-lang", "opencv-python", "rclpy")


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in VERSION_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def code_sha256() -> str:
    """SHA-256 over this package's Python sources and data files, in path order."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*root.rglob("*.py"), *root.glob("benchmark/data/*.json")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_identity(selected_tasks: Sequence[tuple[str, str]], expected_trials: int) -> Identity:
    """What ``--resume`` must share with the run it continues: the trials it plans (task selection, count).

    Recorded among run.json's other fields; results of two selections in one run would mix two protocols.
    """
    return Identity({"selected_tasks": [{"scene": s, "task": t} for s, t in selected_tasks],
                     "expected_trials": int(expected_trials)}, record=RUN_FILE, partial=True)


class RunWriter:
    """Writes one run directory; see the module docstring for the calling pattern.

    The writer holds the directory (``rundir.RunDirectory``: its lock) from construction until the
    run is finished. Files are written in an order that a kill at any moment leaves resumable:
    ``run.json`` first (atomically), then the SQLite store, then ``results.json``.
    """

    def __init__(self, run_dir: str | Path, *, arguments: Mapping[str, Any],
                 selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
                 store_path: str | Path | None = None, metadata_extra: Mapping[str, Any] | None = None) -> None:
        """Start a new run in ``run_dir``, which must be new or empty (``RunDirError`` otherwise)."""
        self._start(RunDirectory.create(run_dir), arguments, run_identity(selected_tasks, expected_trials),
                    stepper, store_path, metadata_extra)

    @classmethod
    def resume(cls, run_dir: str | Path, *, arguments: Mapping[str, Any],
               selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
               metadata_extra: Mapping[str, Any] | None = None) -> RunWriter:
        """Reopen a run killed mid-way (even by SIGKILL) to add the trials it has not recorded yet.

        SQLite is the source of truth: a trial is committed there before ``results.json`` is rewritten,
        so the store holds every finished trial; ``results.json`` is rebuilt from it. The planned trials
        must be the ones the run started with (``run_identity``; ``RunDirError`` naming what differs).

        A run killed before its ``run.json`` existed (the directory is absent, empty, or holds only the
        lock, temporaries and a store without trials) recorded nothing: it is started afresh, so that
        ``--resume`` completes a run killed at any moment.
        """
        identity = run_identity(selected_tasks, expected_trials)
        directory = RunDirectory.resume(run_dir, identity=identity)
        writer = cls.__new__(cls)
        if directory.recorded_identity is None:
            try:
                _forget_unrecorded_run(directory)
            except BaseException:
                directory.close()
                raise
            writer._start(directory, arguments, identity, stepper, None, metadata_extra)
        else:
            writer._continue(directory, arguments)
        return writer

    def _start(self, directory: RunDirectory, arguments: Mapping[str, Any], identity: Identity, stepper: str,
               store_path: str | Path | None, metadata_extra: Mapping[str, Any] | None) -> None:
        self.directory, self.run_dir = directory, directory.path
        try:
            self.run_id = str(uuid.uuid4())
            self.results: list[dict[str, Any]] = []
            self._keys: set[tuple[str, int]] = set()  # (task, round) of every recorded trial
            self.run: dict[str, Any] = {
                "status": "running",
                "started_utc": utc_now(),
                "metric_version": "strict",
                "gate_mode": "strict",
                "runtime": "fixed",
                "completion_metric_version": "legacy-final-layout-v1",
                "completion_aggregation": "task-macro",
                "stepper": stepper,
                "arguments": dict(arguments),
                **identity.fields,  # selected_tasks, expected_trials
                "run_id": self.run_id,
                "code_sha256": code_sha256(),
                "versions": package_versions(),
                "python": platform.python_version(),
                **dict(metadata_extra or {}),
            }
            with directory.errors(0):
                directory.write_json(RUN_FILE, self.run)
                self.store = directory.store(store_path)
                self.store.upsert_run(self.run_id, self.run, str(self.run_dir))
                directory.write_json(RESULTS_FILE, [])
        except BaseException:
            directory.close()
            raise
        self._positions = plan_positions(self.run)

    def _continue(self, directory: RunDirectory, arguments: Mapping[str, Any]) -> None:
        self.directory, self.run_dir = directory, directory.path
        try:
            self.run = run = directory.read_json(RUN_FILE)  # a JSON object: the identity check read it
            self.run_id = run.get("run_id")
            if not isinstance(self.run_id, str) or not self.run_id:
                raise RunDirError(f"--output: {directory.path / RUN_FILE} has no run_id (got {self.run_id!r}); it "
                                  "is not a run this evaluator wrote, so it cannot be continued")
            self._positions = plan_positions(run)
            with directory.errors():
                self.store = directory.store(run_id=self.run_id, run_record=RUN_FILE)
            try:
                self.results = sorted(self.store.trials(run_ids=[self.run_id]), key=self._position)
                self._keys = {(e["task"], int(e["round"])) for e in self.results}
            except (ValueError, KeyError, TypeError) as exc:
                raise RunDirError(f"--output: {self.store.path} holds a trial of run {self.run_id} that cannot be "
                                  f"read ({type(exc).__name__}: {exc}); the run cannot be continued") from None
            run.update(status="running", completed_trials=len(self.results))
            run.setdefault("resumed_utc", []).append(utc_now())
            run["resume_arguments"] = dict(arguments)
            self._write_run()  # also puts the run's row back if the kill came before the store had it
            with directory.errors(len(self.results)):
                directory.write_json(RESULTS_FILE, self.results)
        except BaseException:
            directory.close()
            raise

    def _write_run(self) -> None:
        with self.directory.errors(len(self.results)):
            self.directory.write_json(RUN_FILE, self.run)
            self.store.upsert_run(self.run_id, self.run, str(self.run_dir))

    def recorded(self, task_id: str, round_index: int) -> bool:
        """True when this (task, round) is already in the run (a resumed or re-delivered trial)."""
        return (task_id, round_index) in self._keys

    def record_trial(self, result: Mapping[str, Any], *, task: EvalTask, round_index: int, seed: int,
                     video: str | None = None) -> dict[str, Any]:
        """Add one scored trial (a ``StageMonitor.result()``); returns the stored results.json entry.

        Trials may arrive in any order (several workers); ``results.json`` lists them in the order of
        the run's plan (``selected_tasks`` then round), so every backend writes the same file. A
        (task, round) already recorded is refused: a run holds every trial exactly once.
        """
        if self.run["status"] != "running":
            raise RuntimeError(f"run {self.run_id} is {self.run['status']}; no more trials")
        if result.get("task") != task.task_id:
            raise ValueError(f"result.task: {result.get('task')!r} does not match task {task.task_id!r}")
        if self.recorded(task.task_id, int(round_index)):
            raise DuplicateTrialError(f"trial {task.task_id} round {round_index} is already recorded in {self.run_dir}")
        entry = dict(result)
        if video is not None:
            entry["video"] = video
        entry.update(scene=task.scene, layout=task.layout, seed=int(seed), round=int(round_index),
                     level_tag=task.level, base_task_type=task.base_task_type)
        with self.directory.errors(len(self.results)):
            self.store.insert_trial(self.run_id, self._next_index(), entry)
        self.results.append(entry)
        self._keys.add((task.task_id, int(round_index)))
        self.results.sort(key=self._position)
        with self.directory.errors(len(self.results)):
            self.directory.write_json(RESULTS_FILE, self.results)
        return entry

    @contextlib.contextmanager
    def output_errors(self) -> Iterator[None]:
        """Around work that writes into the run directory besides this writer (the workers' ``--record`` MCAP
        files): an output that cannot take writes (full, read-only) is :class:`OutputUnusableError` in one
        line, saying how many trials are kept; any other error passes unchanged."""
        try:
            yield
        except (OSError, sqlite3.Error):
            with self.directory.errors(len(self.results)):
                raise

    def add_recording(self, trial_id: str, data: bytes) -> None:
        """Keep a trial's MCAP recording (``--record`` on Ray, where it travelled back) in ``mcap/``."""
        with self.directory.errors(len(self.results)):
            self.directory.write_bytes(f"{RECORDINGS_DIR}/{trial_id}.mcap", data)

    def _next_index(self) -> int:
        return len(self.results)

    def _position(self, entry: Mapping[str, Any]) -> tuple[int, int]:
        return self._positions.get(entry["task"], len(self._positions)), int(entry.get("round") or 0)

    def summary(self) -> dict[str, Any]:
        return summarize(self.results, status=self.run["status"])

    def complete(self) -> None:
        self._finish("complete")

    def fail(self, error: str) -> None:
        self.run["error"] = error
        self._finish("failed")

    def _finish(self, status: str) -> None:
        self.run.update(status=status, finished_utc=utc_now(), completed_trials=len(self.results))
        try:
            with self.directory.errors(len(self.results)):
                self.directory.write_json(SUMMARY_FILE, self.summary())
            self._write_run()
        finally:
            self.close()

    def close(self) -> None:
        """Close the store and drop the lock without changing the run's status (it stays resumable)."""
        self.directory.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.run["status"] != "running":
            return
        if exc is None:
            self.complete()
            return
        if isinstance(exc, OutputUnusableError | KeyboardInterrupt):
            # Nothing more can be written (or the user stopped it): leave the run "running", so that
            # --resume continues it, and keep the caller's error the one that is reported.
            self.close()
            return
        try:
            self.fail("".join(traceback.format_exception(exc_type, exc, tb)))
        except OutputUnusableError:
            self.close()


class DuplicateTrialError(ValueError):
    """A (task, round) that the run already holds was recorded again."""


def close_abandoned_run(run_dir: str | Path, reason: str) -> bool:
    """Mark a run whose writer died (killed, crashed) ``failed`` with ``reason``; True when it did.

    For the supervisor that started the writer and saw it die (``robofollow bringup``): only it knows how
    the writer ended. One writer at a time still: the run's lock is taken first (the dead writer's lock
    went with it), and a run whose lock is held (its writer lives) or that is no longer ``running`` is
    left alone. Nothing recorded changes: ``status``, ``error``, ``finished_utc`` and ``completed_trials``
    in run.json (and its SQLite row), and summary.json over the trials recorded. ``RunWriter.resume``
    still continues such a run.
    """
    path = Path(run_dir)
    try:
        run = read_json(path / RUN_FILE)
        identity = run_identity([(t["scene"], t["task"]) for t in run["selected_tasks"]], run["expected_trials"])
        if run.get("status") != "running":
            return False
        directory = RunDirectory.resume(path, identity=identity)
    except (OSError, ValueError, KeyError, TypeError, OutputUnusableError):  # no run, not ours, or held
        return False
    with directory:
        run = directory.read_json(RUN_FILE)
        if run.get("status") != "running":  # finished between our look and our lock
            return False
        with directory.errors():
            store = directory.store()
            results = store.trials(run_ids=[run["run_id"]])
        run.update(status="failed", error=reason, finished_utc=utc_now(), completed_trials=len(results))
        with directory.errors(len(results)):
            directory.write_json(SUMMARY_FILE, summarize(results, status="failed"))
            directory.write_json(RUN_FILE, run)
            store.upsert_run(run["run_id"], run, str(path))
    return True


def plan_positions(run: Mapping[str, Any]) -> dict[str, int]:
    return {item["task"]: i for i, item in enumerate(run.get("selected_tasks") or [])}


def _forget_unrecorded_run(directory: RunDirectory) -> None:
    """Before ``--resume`` starts afresh where no ``run.json`` was written: drop an empty store, refuse anything else.

    A store created before the kill (an older write order created it first) holds no trial; any other
    file, or a store with trials, means the directory is not a run this evaluator started.
    """
    leftovers = [p.name for p in meaningful_entries(directory.path)]
    if any(name not in STORE_FILES for name in leftovers) or stored_trials(directory.path / STORE_FILE):
        raise RunDirError(f"--resume: {directory.path} holds no {RUN_FILE} but other files ({', '.join(leftovers)}); "
                          "it is not a run this evaluator started")
    with directory.errors():
        for name in STORE_FILES:
            (directory.path / name).unlink(missing_ok=True)
