"""Reading the package's YAML files (profiles, driver maps, rig, calibration, colour models, recordings) with
one set of errors.

Every way a file can be unreadable -- missing, not a file, not UTF-8 text, not YAML, not a mapping, or
refused by the OS -- is one ``error`` naming ``what`` the file is and its path, so each caller turns it
into its own one-line message (exit 2) instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_yaml_mapping(path: Path, what: str, error: type[Exception] = ValueError, hint: str = "") -> dict[str, Any]:
    """The mapping in ``path``; ``error`` names ``what`` and the path when it is missing, broken or not a mapping."""
    if not path.is_file():
        if path.is_dir():
            raise error(f"{what}: {path} is a directory, not a YAML file{f' ({hint})' if hint else ''}")
        raise error(f"{what}: {path} does not exist{f' ({hint})' if hint else ''}")
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{what}: {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                    "save it as UTF-8") from None
    except OSError as exc:
        raise error(f"{what}: cannot read {path} ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise error(f"{what}: {path} is not valid YAML ({_one_line(exc)})") from None
    if not isinstance(data, dict):
        raise error(f"{what}: {path} must hold a mapping, got {type(data).__name__}")
    return data


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
