"""RoboFollow-compatible run output: ``run.json``, ``results.json``, ``summary.json`` and the SQLite store.

The headless evaluator (and the ROS trial manager) drive one :class:`RunWriter` per run::

    with RunWriter(run_dir, arguments=vars(args), selected_tasks=tasks, expected_trials=n) as run:
        for task, round_index, seed in trials:
            result = score_trajectory(task, frames)          # or monitor.result()
            run.record_trial(result, task=task, round_index=round_index, seed=seed)
    # leaving the block completes the run; an exception marks it failed (traceback in run.json)

``RunWriter.resume(run_dir, ...)`` instead continues a run killed at any moment (``--resume``);
``RunWriter.check(run_dir, ...)`` tells, reading only, whether either would refuse, so that a command
can check everything before it builds its policy or creates anything.
``record_trial`` stores the trial in SQLite in one transaction first, then rewrites
``results.json`` atomically, so after a crash both hold exactly the trials finished before it.
The directory itself (lock, atomic files, unusable output, the resume check) is a
``rundir.RunDirectory``; what ``run.json`` says about what ran is ``evaluation.run_record``'s (the record, the
resume entry, the identity) from ``evaluation.provenance``'s facts.

A resume must be the same run: the same trials, policy (SPEC, kwargs), step budget, rows per call,
render settings, seeds, privileged state and stepper (:func:`run_identity`; a refusal names each
field that differs with both values). Other code is not refused, since a bug-fix rerun after a crash is
the common case: each resume records the code that ran it in ``run.json``'s ``resumes``, and says
there which code fields differ from the run's start (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import copy
import sqlite3
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.benchmark.seeds import DEFAULT_ROUNDS
from robofollow_ros.evaluation.controls import CONTROLS
from robofollow_ros.evaluation.provenance import (
    RUN_SCHEMA_VERSION,
    RunSettings,
    code_sha256,
    package_versions,
)
from robofollow_ros.evaluation.run_record import (
    new_run_record,
    resume_record,
    run_identity,
    utc_now,
)
from robofollow_ros.rundir import OutputUnusableError, RunDirectory, RunDirError
from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.directory import check_store
from robofollow_ros.rundir.layout import (
    RECORDINGS_DIR,
    RESULTS_FILE,
    RUN_FILE,
    STORE_FILE,
    STORE_FILES,
    SUMMARY_FILE,
    meaningful_entries,
)
from robofollow_ros.rundir.lock import RunDirLock
from robofollow_ros.rundir.store import stored_keys, stored_trials
from robofollow_ros.scoring.summary import summarize

__all__ = ["DuplicateTrialError", "RunSettings", "RunWriter", "close_abandoned_run", "code_sha256",
           "package_versions", "run_identity"]

class RunWriter:
    """Writes one run directory; see the module docstring for the calling pattern.

    The writer holds the directory (``rundir.RunDirectory``: its lock) from construction until the
    run is finished. Files are written in an order that a kill at any moment leaves resumable:
    ``run.json`` first (atomically), then the SQLite store, then ``results.json``.
    """

    def __init__(self, run_dir: str | Path, *, arguments: Mapping[str, Any],
                 selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
                 store_path: str | Path | None = None, metadata_extra: Mapping[str, Any] | None = None,
                 settings: RunSettings | None = None) -> None:
        """Start a new run in ``run_dir``, which must be new or empty (``RunDirError`` otherwise).

        ``settings``: the policy, budgets, render, seeds and privileged state (``robofollow eval`` gives
        them; without them they are read from ``arguments`` where it has them)."""
        record = new_run_record(arguments=arguments, selected_tasks=selected_tasks, expected_trials=expected_trials,
                                stepper=stepper, settings=settings, metadata_extra=metadata_extra)
        self._start(RunDirectory.create(run_dir), record, store_path)

    @classmethod
    def check(cls, run_dir: str | Path, *, resume: bool, arguments: Mapping[str, Any],
              selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
              settings: RunSettings | None = None) -> set[tuple[str, int, str]]:
        """Refuse, reading only, what opening the run would refuse; returns the (task, round, control) it holds.

        For a command that checks everything before it starts anything (``robofollow eval`` builds its
        policy next): a refusal then leaves no directory and changes no file. Opening checks again, under
        the lock. A damaged store is named here too; a directory that cannot be read is left to opening."""
        path = Path(run_dir)
        if not resume:
            RunDirectory.check_new(path)
            return set()
        if path.exists() and not path.is_dir():
            raise RunDirError(f"run_dir: {path} exists and is not a directory")
        if path.is_dir():
            RunDirLock(path).refuse_if_held()  # another live writer: say so before anything slow starts
        record = new_run_record(arguments=arguments, selected_tasks=selected_tasks, expected_trials=expected_trials,
                                stepper=stepper, settings=settings)
        _refuse_other_schema(path)
        recorded = run_identity(record).check(path)
        if recorded is None:
            return set()
        run_id = _run_id_of(recorded, path)
        try:
            check_store(path / STORE_FILE, run_id, path / RUN_FILE)
        except (OSError, sqlite3.Error):  # cannot be read (read-only, full): opening says so, exit 5
            return set()
        return stored_keys(path / STORE_FILE, run_id)

    @classmethod
    def resume(cls, run_dir: str | Path, *, arguments: Mapping[str, Any],
               selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
               metadata_extra: Mapping[str, Any] | None = None, settings: RunSettings | None = None) -> RunWriter:
        """Reopen a run killed mid-way (even by SIGKILL) to add the trials it has not recorded yet.

        SQLite is the source of truth: a trial is committed there before ``results.json`` is rewritten,
        so the store holds every finished trial; ``results.json`` is rebuilt from it. The run must be the
        one it started as (:func:`run_identity`: trials, policy, budgets, render, seeds, privileged state,
        stepper; ``RunDirError`` naming each field that differs and both values). The resume appends what
        ran it to ``run.json``'s ``resumes`` (``code_changes``: which code fields differ from the start).

        A run killed before its ``run.json`` existed (the directory is absent, empty, or holds only the
        lock, temporaries and a store without trials) recorded nothing: it is started afresh, so that
        ``--resume`` completes a run killed at any moment.
        """
        record = new_run_record(arguments=arguments, selected_tasks=selected_tasks, expected_trials=expected_trials,
                                stepper=stepper, settings=settings, metadata_extra=metadata_extra)
        _refuse_other_schema(Path(run_dir))
        directory = RunDirectory.resume(run_dir, identity=run_identity(record))
        writer = cls.__new__(cls)
        if directory.recorded_identity is None:
            try:
                _forget_unrecorded_run(directory)
            except BaseException:
                directory.close()
                raise
            writer._start(directory, record, None)
        else:
            writer._continue(directory, arguments, settings)
        return writer

    def _start(self, directory: RunDirectory, record: dict[str, Any], store_path: str | Path | None) -> None:
        self.directory, self.run_dir = directory, directory.path
        try:
            self.run: dict[str, Any] = record
            self.run_id = str(record["run_id"])
            self.results: list[dict[str, Any]] = []
            self._keys: set[tuple[str, int, str]] = set()  # (task, round, control) of every recorded trial
            #: Code fields that differ from the run's start (a resume on other code); empty for a new run.
            self.code_changes: dict[str, dict[str, Any]] = {}
            self._positions = plan_positions(self.run)
            with directory.errors(0):
                directory.write_json(RUN_FILE, self.run)
                self.store = directory.store(store_path)
                self.store.upsert_run(self.run_id, self.run, str(self.run_dir))
                directory.write_json(RESULTS_FILE, [])
        except BaseException:
            directory.close()
            raise

    def _continue(self, directory: RunDirectory, arguments: Mapping[str, Any], settings: RunSettings | None) -> None:
        self.directory, self.run_dir = directory, directory.path
        try:
            self.run = run = directory.read_json(RUN_FILE)  # a JSON object: the identity check read it
            self.run_id = _run_id_of(run, directory.path)
            self._positions = plan_positions(run)
            with directory.errors():
                self.store = directory.store(run_id=self.run_id, run_record=RUN_FILE)
            try:
                self.results = sorted(self.store.trials(run_ids=[self.run_id]), key=self._position)
                self._keys = {_key_of(e) for e in self.results}
            except (ValueError, KeyError, TypeError) as exc:
                raise RunDirError(f"--output: {self.store.path} holds a trial of run {self.run_id} that cannot be "
                                  f"read ({type(exc).__name__}: {exc}); the run cannot be continued") from None
            entry = resume_record(run, arguments, len(self.results), settings)
            self.code_changes = entry["changed"]
            run.update(status="running", completed_trials=len(self.results))
            run.setdefault("resumes", []).append(entry)
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

    def note_run(self, fields: Mapping[str, Any]) -> None:
        """Add facts learnt after the run started (a ROS graph's renderer start-up) to run.json and the store."""
        self.run.update(fields)
        self._write_run()

    def recorded(self, task_id: str, round_index: int, control: str = "") -> bool:
        """True when this (task, round, control) is already in the run (a resumed or re-delivered trial);
        ``control`` "": the true instruction's trial (``evaluation.controls``)."""
        return (task_id, round_index, control) in self._keys

    def recorded_entry(self, task_id: str, round_index: int, control: str = "") -> dict[str, Any] | None:
        """A copy of the recorded results.json entry of (task, round, control); None when it is not recorded."""
        entry = next((e for e in self.results if _key_of(e) == (task_id, round_index, control)), None)
        return None if entry is None else copy.deepcopy(entry)

    def record_trial(self, result: Mapping[str, Any], *, task: EvalTask, round_index: int, seed: int,
                     video: str | None = None, replace: bool = False) -> dict[str, Any]:
        """Add one scored trial (a ``StageMonitor.result()``); returns the stored results.json entry.

        Trials may arrive in any order (several workers); ``results.json`` lists them in the order of
        the run's plan (``selected_tasks`` then round), so every backend writes the same file. A
        (task, round, control) already recorded is refused: a run holds every trial exactly once — unless
        ``replace`` (an operator redid a recorded trial; the caller keeps the old entry inside the new one,
        ``superseded_attempts``), where it must be recorded and is replaced.
        """
        if self.run["status"] != "running":
            raise RuntimeError(f"run {self.run_id} is {self.run['status']}; no more trials")
        if result.get("task") != task.task_id:
            raise ValueError(f"result.task: {result.get('task')!r} does not match task {task.task_id!r}")
        control = str(result.get("control") or "")
        if control and control not in self._controls:
            raise ValueError(f"result.control: {control!r} is not one of the run's controls "
                             f"({', '.join(self._controls) or 'none'})")
        what = f"trial {task.task_id} round {round_index}" + (f" control {control}" if control else "")
        if replace and not self.recorded(task.task_id, int(round_index), control):
            raise ValueError(f"{what} is not recorded in {self.run_dir}; nothing to replace")
        if self.recorded(task.task_id, int(round_index), control) and not replace:
            raise DuplicateTrialError(f"{what} is already recorded in {self.run_dir}")
        if task.task_id not in self._positions or not 1 <= int(round_index) <= DEFAULT_ROUNDS:
            raise ValueError(f"trial {task.task_id} round {round_index} is not in the plan of run {self.run_id} "
                             f"(its {len(self._positions)} selected tasks, rounds 1..{DEFAULT_ROUNDS})")
        entry = dict(result)
        if video is not None:
            entry["video"] = video
        entry.update(scene=task.scene, layout=task.layout, seed=int(seed), round=int(round_index),
                     level_tag=task.level, base_task_type=task.base_task_type)
        with self.directory.errors(len(self.results)):
            store = self.store.replace_trial if replace else self.store.insert_trial
            store(self.run_id, self._plan_index(task.task_id, int(round_index), control), entry)
        if replace:
            self.results = [e for e in self.results if _key_of(e) != (task.task_id, int(round_index), control)]
        self.results.append(entry)
        self._keys.add((task.task_id, int(round_index), control))
        self.results.sort(key=self._position)
        with self.directory.errors(len(self.results)):
            self.directory.write_json(RESULTS_FILE, self.results)
        return entry

    def annotate_trial(self, task_id: str, round_index: int, fields: Mapping[str, Any],
                       control: str = "") -> dict[str, Any]:
        """Add ``fields`` to a recorded trial's entry (an operator's mark after the trial ended) in results.json
        and SQLite; a score field is refused: an annotation never changes a verdict."""
        scored = sorted(set(fields) & {"intent_score", "exec_score", "intent_ok", "exec_ok", "completion_ok", "phases"})
        if scored:
            raise ValueError(f"annotation: {scored[0]!r} is a score; an annotation never changes a verdict")
        entry = next((e for e in self.results if _key_of(e) == (task_id, round_index, control)), None)
        if entry is None:
            raise ValueError(f"trial {task_id} round {round_index} is not recorded in {self.run_dir}")
        entry.update(fields)
        with self.directory.errors(len(self.results)):
            self.store.update_trial_json(self.run_id, self._plan_index(task_id, round_index, control), entry)
            self.directory.write_json(RESULTS_FILE, self.results)
        return dict(entry)

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

    def _plan_index(self, task_id: str, round_index: int, control: str = "") -> int:
        """The trial's SQLite ``trial_index``: its place in the plan (the task's position in ``selected_tasks``,
        then its round), ``position * 10 + round - 1`` (10: the most rounds the protocol has seeds for), so
        that ``ORDER BY trial_index`` lists a run as results.json does, whichever trial finished first. A run
        with instruction controls spaces these by 1 + len(CONTROLS) and adds the control's place (0: true)."""
        base = self._positions[task_id] * DEFAULT_ROUNDS + round_index - 1
        if not self._controls:
            return base
        return base * (1 + len(CONTROLS)) + _control_place(control)

    def _position(self, entry: Mapping[str, Any]) -> tuple[int, int, int]:
        return (self._positions.get(entry["task"], len(self._positions)), int(entry.get("round") or 0),
                _control_place(str(entry.get("control") or "")))

    @property
    def _controls(self) -> tuple[str, ...]:
        """The run's ``--controls`` (run.json's ``arguments.controls``; none where it has none)."""
        args = self.run.get("arguments")
        return tuple(args.get("controls") or ()) if isinstance(args, Mapping) else ()

    def summary(self) -> dict[str, Any]:
        """summary.json: the true-instruction trials only (control trials are reported by ``report --controls``)."""
        return summarize([e for e in self.results if not e.get("control")], status=self.run["status"])

    def complete(self) -> None:
        self._finish("complete")

    def stop_early(self, by: str, reason: str) -> None:
        """Say in run.json that the run ends before its plan on purpose (a sequential test that decided): a
        run whose files said ``complete`` with fewer trials than ``expected_trials`` and no reason would not
        say what ran. Written when the run finishes."""
        self.run["stopped_early"] = {"by": by, "reason": reason, "planned_trials": self.run.get("expected_trials")}

    def fail(self, error: str) -> None:
        self.run["error"] = error
        self._finish("failed")

    def _finish(self, status: str) -> None:
        self.run.update(status=status, finished_utc=utc_now(), completed_trials=len(self.results))
        if isinstance(self.run.get("step_budget"), dict):  # what the trials used: policy calls and executed rows
            self.run["budget_used"] = {"calls": sum(int(e.get("policy_steps") or 0) for e in self.results),
                                       "rows": sum(int(e.get("rows_executed") or 0) for e in self.results)}
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
        identity = run_identity(run)  # the run's own: only the lock and the status can stop us
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


def _key_of(entry: Mapping[str, Any]) -> tuple[str, int, str]:
    """(task, round, control) of a results.json entry: what a run holds once."""
    return str(entry["task"]), int(entry.get("round") or 0), str(entry.get("control") or "")


def _control_place(control: str) -> int:
    return 0 if not control else 1 + CONTROLS.index(control)


def plan_positions(run: Mapping[str, Any]) -> dict[str, int]:
    return {item["task"]: i for i, item in enumerate(run.get("selected_tasks") or [])}


def _run_id_of(run: Mapping[str, Any], path: Path) -> str:
    run_id = run.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise RunDirError(f"--output: {path / RUN_FILE} has no run_id (got {run_id!r}); it "
                          "is not a run this evaluator wrote, so it cannot be continued")
    return run_id


def _refuse_other_schema(path: Path) -> None:
    """A run.json of another layout cannot be continued: its fields cannot be compared with this run's.

    Read only; a file that is absent or not a JSON object is left to the identity check, which names it."""
    try:
        run = read_json(path / RUN_FILE)
    except (OSError, ValueError):
        return
    if isinstance(run, dict) and run.get("schema_version", 1) != RUN_SCHEMA_VERSION:
        raise RunDirError(f"--output: {path / RUN_FILE} has run.json schema {run.get('schema_version', 1)} (this "
                          f"robofollow_ros writes {RUN_SCHEMA_VERSION}): it was written by another version, whose "
                          "settings cannot be compared with this one's; continue it with the version that started it, "
                          "or choose another --output")


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
