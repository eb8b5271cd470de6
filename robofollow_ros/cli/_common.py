"""Shared pieces of the CLI: the user-facing error type, the range-checked number types, ``--rig``, JSON printing.

Every numeric option of every subcommand takes its ``type`` from :func:`integer` or :func:`number`
(``test_cli_bad_input`` holds every option to it): an absurd value (``inf``, ``1e300``, ``-3``,
``10**12``) is refused while the arguments are parsed, in one line naming the option and the value,
before anything is read or written -- not accepted and then failing every call (``OverflowError``
from a socket timeout, ``MemoryError`` from a bootstrap) or running forever.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OUTPUT_UNUSABLE

if TYPE_CHECKING:
    from robofollow_ros.robot.rig_config import RigConfig

#: The longest timeout or duration an option takes: a week. Longer is no bound at all, and far longer
#: (``threading.TIMEOUT_MAX``, ~292 years) makes every socket and lock call fail with OverflowError.
MAX_SECONDS = 7 * 24 * 3600
#: Worker processes (or Ray actors) one command starts.
MAX_WORKERS = 1024
#: Policy calls per trial: far beyond any benchmark budget (default 10), still an end.
MAX_STEPS = 1_000_000
#: Rows executed per policy call (a chunk is 50 rows by default).
MAX_ACTIONS_PER_STEP = 10_000
#: ``--limit``: tasks kept per scene and level (the largest scene has a few hundred).
MAX_LIMIT = 10_000
#: Seeds: what numpy's and SAPIEN's generators take.
MAX_SEED = 2**32 - 1


class CliError(Exception):
    """An error the user can act on; printed as one line without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line (``robofollow eval: error: argument --workers: ...``) and exit 2.

    argparse's own ``error`` prints the whole usage first; the house rule is one line naming the field
    and the value. ``--help`` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Range:
    """An argparse ``type``: ``convert(text)`` within ``[low, high]`` (``(low, high]`` when ``low_open``)."""

    def __init__(self, kind: str, convert: Callable[[str], Any], low: Any, high: Any, low_open: bool,
                 unit: str) -> None:
        self.kind, self.convert, self.low_open, self.unit = kind, convert, low_open, unit
        self.bounds = (low, high)
        self.__name__ = kind  # argparse names the type in some messages

    def describe(self) -> str:
        low, high = self.bounds
        unit = f" {self.unit}" if self.unit else ""
        if self.low_open:
            return f"{self.kind} > {low:g} and <= {high:g}{unit}"
        return f"{self.kind} in {low}..{high}{unit}" if self.kind == "an integer" else \
            f"{self.kind} in [{low:g}, {high:g}]{unit}"

    def __call__(self, text: str) -> Any:
        try:
            value = self.convert(text)
        except (ValueError, OverflowError):
            value = None
        low, high = self.bounds
        if value is None or not math.isfinite(value) or not (low < value if self.low_open else low <= value) \
                or value > high:
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}")
        return value

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def integer(low: int, high: int, unit: str = "") -> Callable[[str], int]:
    """The argparse ``type`` of an integer option within ``low..high``."""
    return _Range("an integer", int, low, high, False, unit)


def number(low: float, high: float, *, low_open: bool = False, unit: str = "") -> Callable[[str], float]:
    """The argparse ``type`` of a finite number within ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    return _Range("a number", float, low, high, low_open, unit)


def seconds(high: float = MAX_SECONDS) -> Callable[[str], float]:
    """A timeout or a duration: a positive, finite number of seconds, at most ``high`` (a week)."""
    return number(0, high, low_open=True, unit="seconds")


#: A TCP port to bind; 0 picks a free one.
PORT = integer(0, 65535)
#: A seed.
SEED = integer(0, MAX_SEED)
#: Worker processes (or actors).
WORKERS = integer(1, MAX_WORKERS)
#: Policy calls per trial.
STEPS = integer(1, MAX_STEPS)


#: Largest camera picture side an option takes, in pixels.
MAX_PIXELS = 4096


def image_size(text: str) -> tuple[int, int]:
    """The argparse ``type`` of a picture size ``WIDTHxHEIGHT``, each side 1..4096 pixels."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 320x240, got {text!r}") from None
    if not (1 <= width <= MAX_PIXELS and 1 <= height <= MAX_PIXELS):
        raise argparse.ArgumentTypeError(f"each side must be 1..{MAX_PIXELS} pixels, got {text!r}")
    return width, height


def output_file(path: Path, flag: str, *, make_folder: bool = False) -> Path:
    """``path``, a file the command will write, checked before the work starts: not a directory, and in a
    folder that exists (``make_folder``: one this command creates). Otherwise one line naming ``flag`` (exit 2)."""
    if path.is_dir():
        raise CliError(f"{flag}: {path} is a directory; give a file name")
    folder = path.parent
    if not make_folder and not folder.is_dir():
        raise CliError(f"{flag}: the folder {folder} does not exist; create it or choose another {flag}")
    if folder.exists() and not folder.is_dir():
        raise CliError(f"{flag}: {folder} is not a folder")
    return path


@contextlib.contextmanager
def writing(path: Path, flag: str) -> Iterator[None]:
    """Around the writing of ``path``: an OS refusal is one line naming ``flag`` and the path, not a traceback --
    exit 5 where the output exists but cannot be written (read-only, full, permissions), exit 2 where the path
    itself is wrong (a file where a folder must be, a folder where a file must be)."""
    try:
        yield
    except OSError as exc:
        code = EXIT_BAD_INPUT if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.ENOENT) else EXIT_OUTPUT_UNUSABLE
        raise CliError(f"{flag}: cannot write {path} ({exc.strerror or exc})", code) from None


#: ``--rig``'s help, the same on every command that takes it.
RIG_HELP = ("rig: a name (robofollow, aloha, …: config/rigs/) or a rig YAML / folder; default: $ROBOFOLLOW_RIG or "
            "the built-in rig")


def add_rig_option(parser: argparse.ArgumentParser) -> None:
    """``--rig NAME|PATH`` on a command that loads the rig (in this process or in the ones it starts).

    The command line applies it (:func:`apply_rig`) after parsing and before the command's handler runs, so a
    bad rig is refused before anything is read or written. Stored as ``args.rig_spec``: ``robofollow bringup``'s
    positional ``rig`` is the profile."""
    parser.add_argument("--rig", dest="rig_spec", metavar="NAME|PATH", help=RIG_HELP)


def apply_rig(args: argparse.Namespace) -> RigConfig | None:
    """Load the rig ``--rig`` names (else ``$ROBOFOLLOW_RIG``'s) and make it the active rig of this process and of
    every process it starts: ``ROBOFOLLOW_RIG`` is set to the resolved rig YAML, which every component loads
    (``robot.rig_config.load_rig_config()``: nodes, Ray and pool workers, the oracle, servers this command
    starts). None where neither is given (the built-in rig, loaded where it is needed).

    A rig that cannot be loaded is one line naming ``--rig`` (or ``$ROBOFOLLOW_RIG``) and the value (exit 2).
    Loading reads YAML and URDF files only: no SAPIEN, no rclpy."""
    from robofollow_ros.robot.rig_config import RigConfigError
    from robofollow_ros.robot.rig_description import ENV_RIG, load_rig

    spec = getattr(args, "rig_spec", None)
    where = "--rig"
    if spec is not None and not spec.strip():
        raise CliError("--rig: '' is empty; give a rig's name or a rig YAML / folder")
    if spec is None:
        spec, where = os.environ.get(ENV_RIG) or None, f"${ENV_RIG}"
        if spec is None:
            return None
    try:
        rig = load_rig(spec)
    except (RigConfigError, OSError) as exc:
        raise CliError(f"{where}: {_one_line(exc)}") from None
    os.environ[ENV_RIG] = str(rig.source)
    return rig


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
