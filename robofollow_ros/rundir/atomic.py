"""Atomic files: a reader (a report, a dashboard, a resumed run) never sees half of one.

Every write goes to ``.<name>.<random>.tmp`` in the target's own folder, is flushed to disk, then
renamed over the target: the rename is atomic on POSIX, so a kill or a full disk leaves either the
old file or the new one. What a kill can leave is the temporary; :func:`is_temporary` names it so
that the next holder of the run directory's lock sweeps it (:func:`sweep_temporaries`).

The file gets the permissions a plain ``open(path, "w")`` would give it (``0o666`` less the umask),
not ``mkstemp``'s owner-only ``0o600``: a dataset or a run directory is read by others too.

JSON is formatted in RoboFollow's style by default (indent 2, non-ASCII kept, trailing newline);
callers whose files have another established format (LeRobot's ``meta/*.json``: indent 4; OWDA's
files: ASCII escapes) pass it, so that moving to this helper changed no byte on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

TEMPORARY_SUFFIX = ".tmp"


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``os.umask`` must set one)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: What ``open(path, "w")`` creates, given the umask at import.
_FILE_MODE = 0o666 & ~_umask()


def json_bytes(payload: Any, *, indent: int = 2, ensure_ascii: bool = False) -> bytes:
    """``payload`` as the UTF-8 bytes of a JSON file: indented, with a trailing newline."""
    return (json.dumps(payload, indent=indent, ensure_ascii=ensure_ascii) + "\n").encode("utf-8")


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary in the same folder + fsync + rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, payload: Any, *, indent: int = 2, ensure_ascii: bool = False) -> None:
    write_bytes_atomic(path, json_bytes(payload, indent=indent, ensure_ascii=ensure_ascii))


def read_json(path: str | Path) -> Any:
    """A JSON file's content (``ValueError`` when it is not JSON); for run files this package wrote."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def is_temporary(path: Path) -> bool:
    """True for a file an atomic write cut short can leave: ``.<name>.<random>.tmp``."""
    return path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX) and path.is_file()


def sweep_temporaries(root: Path) -> list[str]:
    """Remove every temporary under ``root`` (any depth); returns them relative to ``root``, sorted.

    Call it only while holding ``root``'s lock: a temporary of a live writer is its file-to-be.
    Symbolic links to folders are not followed (what they point to is not this run's).
    """
    removed = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if is_temporary(path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(str(path.relative_to(root)))
    return sorted(removed)
