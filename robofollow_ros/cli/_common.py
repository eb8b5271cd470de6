"""Shared pieces of the CLI: the user-facing error type and JSON printing."""

from __future__ import annotations

import json
import sys
from typing import Any

from robofollow_ros.exit_status import EXIT_BAD_INPUT


class CliError(Exception):
    """An error the user can act on; printed as one line without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
