"""The embedded results store: SQLite in WAL mode holding runs, trials and per-stage scores.

Why SQLite: one file, queryable across runs (``WHERE scene = 'scene2'``), safe against a crash
(each trial is one transaction, so a killed evaluator leaves whole trials only), and WAL lets a
report read while the evaluator writes. Runs carry a UUID so stores from different machines merge
without id clashes; merging the same run twice is a no-op.

The schema is the evaluator's (``evaluation.results.RunWriter`` fills it); it lives with the run
directory because resuming one must read it (:func:`stored_trials`) without the evaluator.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id        TEXT PRIMARY KEY,
    run_dir       TEXT,
    started_utc   TEXT NOT NULL,
    finished_utc  TEXT,
    status        TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed')),
    model         TEXT,
    expected_trials INTEGER,
    run_json      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    run_id        TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    trial_index   INTEGER NOT NULL,
    scene         TEXT NOT NULL,
    level         TEXT NOT NULL,
    layout        TEXT,
    task          TEXT NOT NULL,
    round         INTEGER,
    seed          INTEGER,
    intent_score  REAL NOT NULL,
    exec_score    REAL NOT NULL,
    intent_ok     INTEGER NOT NULL,
    exec_ok       INTEGER NOT NULL,
    completion_ok INTEGER NOT NULL,
    result_json   TEXT NOT NULL,
    control       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, trial_index)
);
CREATE TABLE IF NOT EXISTS stage_scores (
    run_id        TEXT NOT NULL,
    trial_index   INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    phase         TEXT NOT NULL,
    intent_score  REAL NOT NULL,
    exec_score    REAL NOT NULL,
    max_score     REAL NOT NULL,
    intent_reason TEXT,
    exec_reason   TEXT,
    PRIMARY KEY (run_id, trial_index, position),
    FOREIGN KEY (run_id, trial_index) REFERENCES trials(run_id, trial_index) ON DELETE CASCADE
);
"""
#: After :data:`SCHEMA` and the ``control`` column's migration (a store written before it has no such column).
INDEXES = """
CREATE INDEX IF NOT EXISTS trials_by_group ON trials (scene, level);
CREATE INDEX IF NOT EXISTS trials_by_task ON trials (task);
-- a run holds each (task, round, control) once, whichever worker, node or resume delivered it ('' = true instruction)
DROP INDEX IF EXISTS trials_once;
CREATE UNIQUE INDEX IF NOT EXISTS trials_once_per_control ON trials (run_id, task, round, control);
"""


class RunStore:
    """A SQLite results database; one connection, used from one thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(SCHEMA)
        if "control" not in _columns(self.conn, "main"):  # a store written before instruction controls
            self.conn.execute("ALTER TABLE trials ADD COLUMN control TEXT NOT NULL DEFAULT ''")
        self.conn.executescript(INDEXES)
        self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def journal_mode(self) -> str:
        return str(self.conn.execute("PRAGMA journal_mode").fetchone()[0])

    # -- writing -------------------------------------------------------------------------------------
    def upsert_run(self, run_id: str, run: Mapping[str, Any], run_dir: str | None = None) -> None:
        """Insert or update a run's row from its run.json content (``model``: its policy SPEC)."""
        args = run.get("arguments") or {}
        model = run.get("model") or (args.get("model") if isinstance(args, Mapping) else None)
        with self._transaction():
            self.conn.execute(
                "INSERT INTO runs (run_id, run_dir, started_utc, finished_utc, status, model, expected_trials,"
                " run_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET"
                " finished_utc = excluded.finished_utc, status = excluded.status, run_json = excluded.run_json",
                (run_id, run_dir, run["started_utc"], run.get("finished_utc"), run["status"],
                 model if isinstance(model, str) else None, run.get("expected_trials"),
                 json.dumps(run, ensure_ascii=False)))

    def update_trial_json(self, run_id: str, trial_index: int, entry: Mapping[str, Any]) -> None:
        """Replace a stored trial's ``result_json`` (an annotation such as an operator's mark; the scores and
        their columns never change)."""
        with self._transaction():
            self.conn.execute("UPDATE trials SET result_json = ? WHERE run_id = ? AND trial_index = ?",
                              (json.dumps(entry, ensure_ascii=False), run_id, trial_index))

    def insert_trial(self, run_id: str, trial_index: int, entry: Mapping[str, Any]) -> None:
        """One trial and its stage scores, in one transaction: all of it is stored or none.

        ``trial_index``: the trial's place in its run's plan (``RunWriter`` numbers trials so), not the
        order in which trials finished, so that :meth:`trials` lists a run as results.json does."""
        with self._transaction():
            self._insert_trial(run_id, trial_index, entry)

    def replace_trial(self, run_id: str, trial_index: int, entry: Mapping[str, Any]) -> None:
        """A stored trial run again (an operator's redo of a recorded trial): the old row and its stage scores
        go and the new ones come, in one transaction (the old attempt lives on inside ``entry``)."""
        with self._transaction():
            self.conn.execute("DELETE FROM trials WHERE run_id = ? AND trial_index = ?", (run_id, trial_index))
            self._insert_trial(run_id, trial_index, entry)

    def _insert_trial(self, run_id: str, trial_index: int, entry: Mapping[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO trials (run_id, trial_index, scene, level, layout, task, round, seed, intent_score,"
            " exec_score, intent_ok, exec_ok, completion_ok, result_json, control)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, trial_index, entry["scene"], entry["level_tag"], entry.get("layout"), entry["task"],
             entry.get("round"), entry.get("seed"), float(entry["intent_score"]), float(entry["exec_score"]),
             int(bool(entry["intent_ok"])), int(bool(entry["exec_ok"])), int(bool(entry["completion_ok"])),
             json.dumps(entry, ensure_ascii=False), str(entry.get("control") or "")))
        self.conn.executemany(
            "INSERT INTO stage_scores (run_id, trial_index, position, phase, intent_score, exec_score, max_score,"
            " intent_reason, exec_reason) VALUES (?,?,?,?,?,?,?,?,?)",
            [(run_id, trial_index, i, p["phase"], p["intent_score"], p["exec_score"], p["max_score"],
              p.get("intent_reason"), p.get("exec_reason")) for i, p in enumerate(entry.get("phases", []))])

    def _transaction(self) -> _Tx:
        return _Tx(self.conn)

    # -- reading -------------------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT run_id, run_dir, started_utc, finished_utc, status, model, expected_trials,"
                                 " (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.run_id) AS trials"
                                 " FROM runs r ORDER BY started_utc").fetchall()
        return [dict(r) for r in rows]

    def trials(self, run_ids: Iterable[str] | None = None, scene: str | None = None, level: str | None = None,
               task: str | None = None) -> list[dict[str, Any]]:
        """results.json entries matching the filters, by run, then in each run's plan order (``trial_index``)."""
        where, params = [], []
        if run_ids is not None:
            ids = list(run_ids)
            where.append(f"run_id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        for column, value in (("scene", scene), ("level", level), ("task", task)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = "SELECT result_json FROM trials" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY run_id, trial_index"
        return [json.loads(r[0]) for r in self.conn.execute(sql, params)]

    def stage_scores(self, run_id: str, trial_index: int) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT phase, intent_score, exec_score, max_score, intent_reason, exec_reason"
                                 " FROM stage_scores WHERE run_id = ? AND trial_index = ? ORDER BY position",
                                 (run_id, trial_index)).fetchall()
        return [dict(r) for r in rows]

    def merge_from(self, other: str | Path) -> int:
        """Copy every run (with its trials and stages) of another store not already here; returns runs added."""
        self.conn.execute("ATTACH DATABASE ? AS other", (str(other),))
        try:
            with self._transaction():
                new = [r[0] for r in self.conn.execute(
                    "SELECT run_id FROM other.runs WHERE run_id NOT IN (SELECT run_id FROM main.runs)")]
                marks = ",".join("?" * len(new))
                for table in ("runs", "trials", "stage_scores"):
                    if new:  # by name: a store written before the ``control`` column lacks it (it defaults to '')
                        shared = ", ".join(c for c in _columns(self.conn, "main", table)
                                           if c in _columns(self.conn, "other", table))
                        self.conn.execute(f"INSERT INTO main.{table} ({shared}) SELECT {shared} FROM other.{table}"
                                          f" WHERE run_id IN ({marks})", new)
        finally:
            self.conn.execute("DETACH DATABASE other")
        return len(new)


def _columns(conn: sqlite3.Connection, schema: str, table: str = "trials") -> list[str]:
    return [str(row[1]) for row in conn.execute(f"PRAGMA {schema}.table_info({table})")]


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def stored_runs(path: Path) -> set[str]:
    """The run ids an existing store holds (its runs and its trials); it is only read, never created.

    Raises ``sqlite3.DatabaseError`` for a file that is not a store this package wrote: not SQLite, damaged
    (``PRAGMA quick_check`` fails), or another program's database without our tables. (Opened read-write
    but only read: a read-only connection to a WAL database leaves its ``-shm`` file behind.)"""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=rw", uri=True)) as conn:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")
        rows = conn.execute("SELECT run_id FROM runs UNION SELECT run_id FROM trials").fetchall()
        conn.execute("SELECT trial_index, task, round, result_json FROM trials LIMIT 0")
    return {str(row[0]) for row in rows}


def stored_keys(path: Path, run_id: str) -> set[tuple[str, int, str]]:
    """(task, round, control) of every trial of ``run_id`` in a store file, read only; empty without a store.

    For looking before a run directory is taken (``RunWriter.check``); a store that cannot be read
    gives nothing here and is refused, naming it, when the directory is opened."""
    if not path.is_file():
        return set()
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=rw", uri=True)) as conn:
            rows = conn.execute("SELECT task, round, result_json FROM trials WHERE run_id = ?", (run_id,)).fetchall()
    except sqlite3.Error:
        return set()
    return {(str(task), int(rnd), _control_of(entry)) for task, rnd, entry in rows if rnd is not None}


def _control_of(result_json: str) -> str:
    """The control of a stored entry (read from its JSON: a store written before the column has none)."""
    try:
        entry = json.loads(result_json)
    except ValueError:
        return ""
    return str(entry.get("control") or "") if isinstance(entry, dict) else ""


def stored_trials(path: Path) -> int:
    """Trials in a store file, 0 when it is absent or has no trials table yet (read only, never creates it)."""
    if not path.is_file():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0
