"""The two ways a run directory refuses: it holds something else (bad input), or it cannot be written.

Why two: the CLI answers them differently. A directory that holds another run, or files that are
not a run, is the user's choice of ``--output`` to change (exit 2). A read-only directory, a full
disk, a quota, or another live writer holding the lock is neither bad input nor a bug: the command
prints one line and exits 5, and what was recorded before is kept for ``--resume``
(:class:`OutputUnusableError`, raised by :func:`output_errors` from the OS's or SQLite's error).
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path


class RunDirError(ValueError):
    """The directory cannot hold this run: it holds another one, or files that are not a run."""


class NotEmptyError(RunDirError):
    """A new run was asked for in a directory that already holds something (each command words the hint)."""


class OutputUnusableError(Exception):
    """The run directory cannot be written: held by another process, read-only, or the disk is full."""


#: How eval and collect continue a run; ``owda eval`` resumes when run again, without a flag.
RESUME_WITH_FLAG = "rerun with --resume"

#: errnos that mean "this output cannot take writes", as opposed to a bug.
UNUSABLE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG, errno.EIO}
#: SQLite's wording for the same conditions (``sqlite3.OperationalError`` carries no errno).
_SQLITE_UNUSABLE = ("disk is full", "readonly database", "unable to open database file", "disk i/o error",
                    "attempt to write a readonly")


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
def output_errors(run_dir: Path, recorded: int | None = None, resume_hint: str = RESUME_WITH_FLAG) -> Iterator[None]:
    """Turn write failures that mean "the output is unusable" into one-line :class:`OutputUnusableError`.

    ``recorded``: how many trials the run holds, so that the line says they are kept; ``resume_hint``:
    how the user continues once the cause is fixed.
    """
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not is_unusable(exc):
            raise
        kept = "" if recorded is None else f"; the {recorded} trial(s) recorded before are kept"
        raise OutputUnusableError(f"output: cannot write {run_dir}: {describe_os_error(exc)}{kept}; "
                                  f"fix it and {resume_hint}") from exc
