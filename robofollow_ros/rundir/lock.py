"""One writer per run directory: an ``flock`` on ``.robofollow.lock`` that names its holder.

Why a lock: two evaluators (or an evaluator and a ROS trial manager, or two ``collect``s) writing
one directory would interleave two runs into one set of files. Why ``flock``: the kernel drops it
when its holder dies, even by SIGKILL, so a killed run never leaves a stale lock behind. The file
records who holds it (pid, host, command line, since when) for the one-line refusal a second
writer prints.

The holder removes the file when it lets go, so a finished directory carries no lock debris (a
LeRobot dataset is published as it is). Removing a lock file races a process that opened it just
before: that process may then lock a file no longer in the directory, while a third one locks a new
file at the same name. So :meth:`RunDirLock.acquire` keeps a lock only when the file it locked is
still the one at the path, and otherwise tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from robofollow_ros.rundir.errors import OutputUnusableError
from robofollow_ros.rundir.layout import LOCK_FILE

#: Rounds of "locked a file its holder just removed": each needs another holder to come and go.
_ACQUIRE_ROUNDS = 100


class RunDirLock:
    """An exclusive ``flock`` on ``<run_dir>/.robofollow.lock``; see the module docstring."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunDirLock:
        """Take the lock or raise :class:`OutputUnusableError` naming the live holder (never waits).

        A directory that cannot take the lock file (read-only, full) raises the OS's error, which the
        caller maps (``errors.output_errors``).
        """
        for _ in range(_ACQUIRE_ROUNDS):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._in_use() from None
            if _is_file_at(fd, self.path):
                break
            os.close(fd)  # its holder removed it on release: lock the file now at the path
        else:
            raise OutputUnusableError(f"output: {self.run_dir}: its lock file keeps being replaced; try again")
        try:
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command_line(),
                    "since_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def refuse_if_held(self) -> None:
        """Raise :class:`OutputUnusableError` naming the holder when a live process holds the lock; creates nothing.

        A look before a command starts its slow parts (``robofollow eval`` builds its policy next): the
        lock is taken for real later, and this only spares waiting for a refusal that is certain. (It
        holds the lock for the instant of the look when nobody else does.)"""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # no lock file: nobody holds it (or it cannot be read: taking it will say why)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._in_use() from None
        finally:
            os.close(fd)

    def _in_use(self) -> OutputUnusableError:
        return OutputUnusableError(f"output: {self.run_dir} is in use by {_holder_line(self._read_holder())}; "
                                   "wait for it to finish or stop it, or choose another --output")

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
        """Remove the lock file while still holding it, then drop the lock (a second call does nothing)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # a read-only directory keeps it: harmless, it is debris
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _is_file_at(fd: int, path: Path) -> bool:
    """True when the open file ``fd`` is the file now at ``path`` (not one removed from under it)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (here.st_dev, here.st_ino)


def _holder_line(info: dict[str, Any]) -> str:
    pid = info.get("pid", "?")
    host = info.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    command = " ".join(str(info.get("command") or "unknown command").split())  # one line, even for `python -c`
    return f"pid {pid}{where} ({command})"


def _command_line() -> str:
    try:
        raw = Path("/proc/self/cmdline").read_bytes()
        parts = [p.decode(errors="replace") for p in raw.split(b"\0") if p]
    except OSError:
        parts = list(sys.argv)
    text = " ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."
