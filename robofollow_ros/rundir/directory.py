"""A run directory held by this process: :meth:`RunDirectory.create` a new run, or :meth:`RunDirectory.resume` one.

Every command that writes a directory of results (``robofollow eval`` and the ROS trial manager
through ``RunWriter``, ``robofollow collect``, ``robofollow owda eval``) opens it here, so all of
them get the same guarantees from one implementation:

* one writer at a time (``lock``): another live writer is refused in one line naming it (exit 5),
  and a killed writer's lock is gone with it;
* the debris of a killed writer (atomic-write temporaries) is swept by the next holder, under the lock;
* files are replaced atomically (``atomic``), and "cannot write" errors of the OS or SQLite become
  one :class:`OutputUnusableError` line inside :meth:`RunDirectory.errors`, so a full disk loses
  nothing recorded and ``--resume`` continues once there is room;
* resuming checks the identity the directory recorded (``identity``) and refuses another run's; an existing
  store is looked at, read only, before it is opened, and one that is damaged, not a RoboFollow store, or
  another run's (:meth:`RunDirectory.store`'s ``run_id``) is refused naming it (exit 2), changing nothing.

What each command writes, and what resuming means for it beyond the identity check (eval rebuilds
``results.json`` from SQLite, collect skips staged episodes, owda skips answered instances), stays
with the command.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from robofollow_ros.rundir.atomic import json_bytes, read_json, sweep_temporaries, write_bytes_atomic
from robofollow_ros.rundir.errors import RESUME_WITH_FLAG, NotEmptyError, RunDirError, is_unusable, output_errors
from robofollow_ros.rundir.identity import Identity
from robofollow_ros.rundir.layout import STORE_FILE, meaningful_entries
from robofollow_ros.rundir.lock import RunDirLock
from robofollow_ros.rundir.store import RunStore, stored_runs


class RunDirectory:
    """An open run directory: this process holds its lock until :meth:`close` (or the end of ``with``).

    ``recorded_identity``: what :meth:`resume` found recorded (None for a new run, and for a directory
    whose writer was killed before recording anything: the caller starts its run there afresh).
    """

    def __init__(self, path: Path, lock: RunDirLock, resume_hint: str = RESUME_WITH_FLAG) -> None:
        """Use :meth:`create` or :meth:`resume`; this only wraps a lock already taken."""
        self.path = path
        self.recorded_identity: dict[str, Any] | None = None
        self._lock = lock
        self._resume_hint = resume_hint
        self._stores: list[RunStore] = []

    @staticmethod
    def check_new(path: str | Path) -> None:
        """Refuse, as :meth:`create` would, a ``path`` that cannot hold a new run; creates and changes nothing.

        For commands that check everything before they start (``robofollow eval`` builds its policy
        first): a refusal then leaves no directory behind. :meth:`create` checks again, under the lock."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunDirError(f"run_dir: {path} exists and is not an empty directory")
        if meaningful_entries(path):
            raise NotEmptyError(f"run_dir: {path} exists and is not an empty directory")
        if path.is_dir():
            RunDirLock(path).refuse_if_held()

    @classmethod
    def create(cls, path: str | Path) -> RunDirectory:
        """A new run: ``path`` is created, or must hold nothing but debris (:class:`NotEmptyError` otherwise).

        Raises :class:`OutputUnusableError` when it cannot be created or another process holds it.
        """
        path = Path(path)
        cls.check_new(path)
        directory = cls._locked(path)
        with directory._closed_on_error():
            if meaningful_entries(path):  # another writer filled it between our look and our lock
                raise NotEmptyError(f"run_dir: {path} exists and is not an empty directory")
        return directory

    @classmethod
    def resume(cls, path: str | Path, *, identity: Identity, resume_hint: str = RESUME_WITH_FLAG) -> RunDirectory:
        """Continue the run in ``path``, refusing (:class:`RunDirError`) one whose recorded identity differs.

        An absent directory, or one that recorded no identity, is not refused: a run killed before it
        recorded anything is started afresh by ``--resume`` (see ``recorded_identity``). ``resume_hint``:
        how the command's user continues after a full disk (``owda eval`` has no ``--resume`` flag).
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunDirError(f"run_dir: {path} exists and is not a directory")
        directory = cls._locked(path, resume_hint)
        with directory._closed_on_error():
            directory.recorded_identity = identity.check(path)
        return directory

    @classmethod
    def _locked(cls, path: Path, resume_hint: str = RESUME_WITH_FLAG) -> RunDirectory:
        with output_errors(path, resume_hint=resume_hint):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except (NotADirectoryError, FileExistsError):  # a file where one of its folders should be
                raise RunDirError(f"run_dir: {path} cannot be a directory: a part of that path is a file") from None
            lock = RunDirLock(path).acquire()
        directory = cls(path, lock, resume_hint)
        with directory._closed_on_error(), directory.errors():
            sweep_temporaries(path)
        return directory

    # -- files -----------------------------------------------------------------------------------
    def errors(self, recorded: int | None = None) -> contextlib.AbstractContextManager[None]:
        """Inside it, "cannot write" errors become :class:`OutputUnusableError` (``recorded``: trials kept)."""
        return output_errors(self.path, recorded, self._resume_hint)

    def write_json(self, name: str, payload: Any, *, indent: int = 2, ensure_ascii: bool = False) -> None:
        """Replace ``name`` (relative, folders created) atomically with ``payload`` as JSON."""
        self.write_bytes(name, json_bytes(payload, indent=indent, ensure_ascii=ensure_ascii))

    def write_bytes(self, name: str, data: bytes) -> None:
        """Replace ``name`` (relative, folders created) atomically with ``data``."""
        if not self._lock.held:
            raise RuntimeError(f"{self.path} is closed: no more writes")
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, data)

    def read_json(self, name: str) -> Any:
        return read_json(self.path / name)

    def store(self, path: str | Path | None = None, *, run_id: str | None = None,
              run_record: str = "run.json") -> RunStore:
        """The SQLite store (``results.sqlite`` here, or a shared file elsewhere), closed with the directory.

        An existing store is looked at first, read only, and refused with :class:`RunDirError` (nothing is
        changed) when it is damaged or not a store this package wrote, or -- given ``run_id``, the run that
        ``run_record`` here says this is -- when it holds other runs but not this one: resuming into it would
        mix two runs' trials in one store. Inside :meth:`errors` a store that cannot be opened is exit 5."""
        target = Path(path or self.path / STORE_FILE)
        check_store(target, run_id, self.path / run_record)
        store = RunStore(target)
        self._stores.append(store)
        return store

    # -- letting go ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the stores opened here and drop the lock; what was written stays (a second call does nothing)."""
        while self._stores:
            self._stores.pop().close()
        self._lock.release()

    @contextlib.contextmanager
    def _closed_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RunDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_store(target: Path, run_id: str | None = None, record: Path | None = None) -> None:
    """Refuse (:class:`RunDirError`, nothing changed) an existing store that is damaged, not a store this
    package wrote, or -- given ``run_id``, the run that ``record`` says this is -- holds other runs but not
    this one. An absent store passes; "cannot read" errors of the OS pass unchanged (the caller maps them)."""
    if not target.is_file():
        return
    try:
        held = stored_runs(target)
    except sqlite3.DatabaseError as exc:
        if is_unusable(exc):
            raise
        raise RunDirError(f"--output: {target} is damaged or not a RoboFollow results store ({exc}); the run "
                          "cannot be continued from it: keep it aside and choose another --output") from None
    if run_id is not None and held and run_id not in held:
        raise RunDirError(f"--output: {target} holds run {', '.join(sorted(held))}, but {record} is run "
                          f"{run_id}: they are not one run, and resuming would mix their trials; "
                          "put the run's own store back or choose another --output")
