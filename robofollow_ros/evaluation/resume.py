"""Reopening a run directory a killed evaluator left (``robofollow eval --resume``), on any backend.

Kept apart from ``results`` because it is the one place that must make sense of every state a kill
can leave: see :func:`resume_writer`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.jsonio import read_json, write_json_atomic
from robofollow_ros.evaluation.results import RESULTS_FILE, RUN_FILE, STORE_FILE, RunWriter, plan_positions, utc_now
from robofollow_ros.evaluation.rundir import RunDirError, RunDirLock, meaningful_entries, output_errors, sweep_debris
from robofollow_ros.evaluation.store import RunStore


def resume_writer(run_dir: str | Path, *, arguments: Mapping[str, Any],
                  selected_tasks: Sequence[tuple[str, str]], expected_trials: int, stepper: str = "direct",
                  metadata_extra: Mapping[str, Any] | None = None) -> RunWriter:
    """Reopen a run killed mid-way (even by SIGKILL) to add the trials it has not recorded yet.

    SQLite is the source of truth: a trial is committed there before ``results.json`` is rewritten,
    so the store holds every finished trial; ``results.json`` is rebuilt from it. The selection must
    be the one the run started with, or the resumed results would mix two protocols.

    A run killed before its ``run.json`` existed (the directory is absent, empty, or holds only the
    lock, temporaries and a store without trials) recorded nothing: it is started afresh, so that
    ``--resume`` completes a run killed at any moment.
    """
    run_dir = Path(run_dir)
    run_file = run_dir / RUN_FILE
    if not run_file.is_file():
        leftovers = [p.name for p in meaningful_entries(run_dir)]
        if any(name not in _STORE_FILES for name in leftovers) or _stored_trials(run_dir / STORE_FILE):
            raise RunDirError(f"--resume: {run_dir} holds no {RUN_FILE} but other files ({', '.join(leftovers)}); "
                              "it is not a run this evaluator started")
        if leftovers:
            with RunDirLock(run_dir), output_errors(run_dir):
                for name in _STORE_FILES:  # a store created before the kill, with no trial in it
                    (run_dir / name).unlink(missing_ok=True)
        return RunWriter(run_dir, arguments=arguments, selected_tasks=selected_tasks,
                         expected_trials=expected_trials, stepper=stepper, metadata_extra=metadata_extra)
    lock = RunDirLock(run_dir).acquire()
    try:
        with output_errors(run_dir):
            sweep_debris(run_dir)
        try:
            run = read_json(run_file)
        except ValueError as exc:
            raise RunDirError(f"--resume: {run_file} is not valid JSON ({exc})") from None
        wanted = [{"scene": s, "task": t} for s, t in selected_tasks]
        if run.get("selected_tasks") != wanted or run.get("expected_trials") != expected_trials:
            raise RunDirError(f"--resume: {run_dir} was started with a different selection of tasks or rounds "
                              f"({run.get('expected_trials')} trials); use a new --output for a new selection")
        writer = RunWriter.__new__(RunWriter)
        writer.run_dir, writer.run_id, writer.run, writer.lock = run_dir, run["run_id"], run, lock
        writer._positions = plan_positions(run)
        with output_errors(run_dir):
            writer.store = RunStore(run_dir / STORE_FILE)
        writer.results = sorted(writer.store.trials(run_ids=[writer.run_id]), key=writer._position)
        writer._keys = {(e["task"], int(e["round"])) for e in writer.results}
        run.update(status="running", completed_trials=len(writer.results))
        run.setdefault("resumed_utc", []).append(utc_now())
        run["resume_arguments"] = dict(arguments)
        writer._write_run()  # also puts the run's row back if the kill came before the store had it
        with output_errors(run_dir, len(writer.results)):
            write_json_atomic(run_dir / RESULTS_FILE, writer.results)
    except BaseException:
        lock.release()
        raise
    return writer


_STORE_FILES = (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal")


def _stored_trials(path: Path) -> int:
    """Trials in a store file, 0 when it is absent or has no trials table yet (read only)."""
    if not path.is_file():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0
