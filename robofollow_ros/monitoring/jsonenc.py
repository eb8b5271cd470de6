"""Compact JSON of monitoring payloads: scorer frames and observations hold numpy values."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def encode_json(message: Any) -> str:
    return json.dumps(message, default=_default, separators=(",", ":"))
