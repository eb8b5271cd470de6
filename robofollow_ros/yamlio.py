"""Reading the package's YAML files (profiles, driver maps, calibration, recordings) with one set of errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_yaml_mapping(path: Path, what: str, error: type[Exception] = ValueError, hint: str = "") -> dict[str, Any]:
    """The mapping in ``path``; ``error`` names ``what`` and the path when it is missing, broken or not a mapping."""
    if not path.is_file():
        raise error(f"{what}: {path} does not exist{f' ({hint})' if hint else ''}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise error(f"{what}: {path} is not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise error(f"{what}: {path} must hold a mapping, got {type(data).__name__}")
    return data
