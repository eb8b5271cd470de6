"""RoboFollow-compatible run output: ``run.json``, ``results.json``, ``summary.json`` and the SQLite store.

The headless evaluator (and the ROS trial manager) drive one :class:`RunWriter` per run::

    with RunWriter(run_dir, arguments=vars(args), selected_tasks=tasks, expected_trials=n) as run:
        for task, round_index, seed in trials:
            result = score_trajectory(task, frames)          # or monitor.result()
            run.record_trial(result, task=task, round_index=round_index, seed=seed)
    # leaving the block completes the run; an exception marks it failed (traceback in run.json)

``record_trial`` stores the trial in SQLite in one transaction first, then rewrites
``results.json`` atomically, so after a crash both hold exactly the trials finished before it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import traceback
import uuid
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.evaluation.jsonio import write_json_atomic
from robofollow_ros.evaluation.rundir import OutputUnusableError, RunDirError, output_errors, prepare_new_run_dir
from robofollow_ros.evaluation.store import RunStore
from robofollow_ros.scoring.summary import summarize

RUN_FILE, RESULTS_FILE, SUMMARY_FILE, STORE_FILE = "run.json", "results.json", "summary.json", "results.sqlite"
__all__ = ["RESULTS_FILE", "RUN_FILE", "STORE_FILE", "SUMMARY_FILE", "DuplicateTrialError", "RunDirError", "RunWriter"]

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


class RunWriter:
    """Writes one run directory; see the module docstring for the calling pattern.

    The writer holds the directory's lock (``rundir.RunDirLock``) from construction until the run
    is finished. Files are written in an order that a kill at any moment leaves resumable:
    ``run.json`` first (atomically), then the SQLite store, then ``results.json``.
    """

    def __init__(self, run_dir: str | Path, *, arguments: Mapping[str, Any],
                 selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
                 store_path: str | Path | None = None, metadata_extra: Mapping[str, Any] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.lock = prepare_new_run_dir(self.run_dir)
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
                "selected_tasks": [{"scene": s, "task": t} for s, t in selected_tasks],
                "expected_trials": int(expected_trials),
                "run_id": self.run_id,
                "code_sha256": code_sha256(),
                "versions": package_versions(),
                "python": platform.python_version(),
                **dict(metadata_extra or {}),
            }
            with output_errors(self.run_dir, 0):
                write_json_atomic(self.run_dir / RUN_FILE, self.run)
                self.store = RunStore(store_path or self.run_dir / STORE_FILE)
                self.store.upsert_run(self.run_id, self.run, str(self.run_dir))
                write_json_atomic(self.run_dir / RESULTS_FILE, [])
        except BaseException:
            self.lock.release()
            raise
        self._positions = plan_positions(self.run)

    def _write_run(self) -> None:
        with output_errors(self.run_dir, len(self.results)):
            write_json_atomic(self.run_dir / RUN_FILE, self.run)
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
        with output_errors(self.run_dir, len(self.results)):
            self.store.insert_trial(self.run_id, self._next_index(), entry)
        self.results.append(entry)
        self._keys.add((task.task_id, int(round_index)))
        self.results.sort(key=self._position)
        with output_errors(self.run_dir, len(self.results)):
            write_json_atomic(self.run_dir / RESULTS_FILE, self.results)
        return entry

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
            with output_errors(self.run_dir, len(self.results)):
                write_json_atomic(self.run_dir / SUMMARY_FILE, self.summary())
            self._write_run()
        finally:
            self.close()

    def close(self) -> None:
        """Close the store and drop the lock without changing the run's status (it stays resumable)."""
        self.store.close()
        self.lock.release()

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


def plan_positions(run: Mapping[str, Any]) -> dict[str, int]:
    return {item["task"]: i for i, item in enumerate(run.get("selected_tasks") or [])}
