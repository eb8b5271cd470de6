"""Owning a run directory: one writer at a time, debris of killed runs swept, unusable output named.

Why a lock: two evaluators (or an evaluator and a ROS trial manager) writing one directory would
interleave trials of two runs into one ``results.json``. The lock is an ``flock`` on
``.robofollow.lock`` in the directory; the kernel drops it when its holder dies, even by SIGKILL,
so a killed run never leaves a stale lock behind. The file itself stays and records who holds it
(pid, host, command line) for the one-line refusal a second evaluator prints.

Why sweep: an atomic JSON write (``jsonio.write_json_atomic``) killed half-way leaves its
``.<name>.<random>.tmp`` file. Only the lock holder sweeps, so a live writer's file is never taken.

Why :class:`OutputUnusableError`: a read-only directory, a full disk or a quota is not bad input and
not a bug; the CLI answers it with one line and ``EXIT_OUTPUT_UNUSABLE`` and keeps what was recorded.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOCK_FILE = ".robofollow.lock"

#: errnos that mean "this output cannot take writes", as opposed to a bug.
UNUSABLE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG, errno.EIO}
#: SQLite's wording for the same conditions (``sqlite3.OperationalError`` carries no errno).
_SQLITE_UNUSABLE = ("disk is full", "readonly database", "unable to open database file", "disk i/o error",
                    "attempt to write a readonly")


class RunDirError(ValueError):
    """The output directory cannot hold a new run (RoboFollow needs a new or empty directory)."""


class OutputUnusableError(Exception):
    """The run directory cannot be written: held by another process, read-only, or the disk is full."""


def is_debris(path: Path) -> bool:
    """What a killed writer can leave that is not a result: the lock file and atomic-write temporaries."""
    name = path.name
    return name == LOCK_FILE or (name.startswith(".") and name.endswith(".tmp") and path.is_file())


def meaningful_entries(run_dir: Path) -> list[Path]:
    """Entries of ``run_dir`` that are not debris (an absent directory has none)."""
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if not is_debris(p))


def sweep_debris(run_dir: Path) -> list[str]:
    """Remove atomic-write temporaries a killed writer left (also in ``mcap/``); call only while holding the lock."""
    removed = []
    for folder in (run_dir, run_dir / "mcap"):
        for path in folder.iterdir() if folder.is_dir() else ():
            if path.name != LOCK_FILE and is_debris(path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(str(path.relative_to(run_dir)))
    return sorted(removed)


def describe_os_error(exc: BaseException) -> str:
    """``Read-only file system`` / ``No space left on device`` / SQLite's words, without the errno noise."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def is_unusable(exc: BaseException) -> bool:
    """True when ``exc`` says the output cannot take writes (not a bug, not bad input)."""
    if isinstance(exc, OSError):
        return exc.errno in UNUSABLE_ERRNOS
    if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
        text = str(exc).lower()
        return any(s in text for s in _SQLITE_UNUSABLE)
    return False


@contextlib.contextmanager
def output_errors(run_dir: Path, recorded: int | None = None) -> Iterator[None]:
    """Turn write failures that mean "the output is unusable" into one-line :class:`OutputUnusableError`."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not is_unusable(exc):
            raise
        kept = "" if recorded is None else f"; the {recorded} trial(s) recorded before are kept"
        raise OutputUnusableError(f"output: cannot write {run_dir}: {describe_os_error(exc)}{kept}; "
                                  "fix it and rerun with --resume") from exc


def _holder_line(info: dict[str, Any]) -> str:
    pid = info.get("pid", "?")
    host = info.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    command = info.get("command") or "unknown command"
    return f"pid {pid}{where} ({command})"


def _command_line() -> str:
    try:
        raw = Path("/proc/self/cmdline").read_bytes()
        parts = [p.decode(errors="replace") for p in raw.split(b"\0") if p]
    except OSError:
        parts = list(sys.argv)
    text = " ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


class RunDirLock:
    """An exclusive ``flock`` on ``<run_dir>/.robofollow.lock`` naming its holder; see the module docstring."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunDirLock:
        with output_errors(self.run_dir):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputUnusableError(f"output: {self.run_dir} is in use by {_holder_line(self._read_holder())}; "
                                      "wait for it to finish or stop it, or choose another --output") from None
        try:
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command_line(),
                    "since_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            with output_errors(self.run_dir):
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _read_holder(self) -> dict[str, Any]:
        # The holder writes its line right after taking the lock: give it a moment, then report what there is.
        for _ in range(20):
            try:
                text = self.path.read_text(encoding="utf-8", errors="replace").strip()
                info = json.loads(text) if text else None
            except (OSError, ValueError):
                info = None
            if isinstance(info, dict):
                return info
            time.sleep(0.05)
        return {}

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays (unlinking it would race a new holder)
            self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def prepare_new_run_dir(run_dir: Path) -> RunDirLock:
    """Create (or take an empty) directory for a new run and lock it; refuses one holding results.

    Raises ``results.RunDirError`` (bad input) for a directory with content, and
    :class:`OutputUnusableError` when it cannot be created or is locked by a live writer.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"run_dir: {run_dir} exists and is not an empty directory")
    if meaningful_entries(run_dir):
        raise RunDirError(f"run_dir: {run_dir} exists and is not an empty directory")
    with output_errors(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunDirLock(run_dir).acquire()
    try:
        if meaningful_entries(run_dir):  # another writer filled it between our look and our lock
            raise RunDirError(f"run_dir: {run_dir} exists and is not an empty directory")
        with output_errors(run_dir):
            sweep_debris(run_dir)
    except BaseException:
        lock.release()
        raise
    return lock
