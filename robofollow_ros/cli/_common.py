"""Shared pieces of the CLI: the user-facing error type and JSON printing."""

from __future__ import annotations

import json
import sys
from typing import Any

# Exit statuses of every ``robofollow`` command that runs trials (eval, bringup, demo, collect, ...),
# one table for all of them so scripts and CI can tell the cases apart (docs/exit-status in README).
#: The run finished and every trial was executed and scored -- whatever the scores are.
EXIT_OK = 0
#: An unexpected internal error (a bug): a traceback was printed.
EXIT_INTERNAL = 1
#: Bad input (unknown task, malformed file, bad flag or profile): the user must change the command.
EXIT_BAD_INPUT = 2
#: The run finished but some trials could not be executed (policy errors or timeouts, a worker that
#: died): their results are recorded as failed-to-run, distinct from "ran and scored low".
EXIT_TRIALS_FAILED = 3
#: The policy could not be reached before the first trial (connect + reset failed); nothing ran.
EXIT_POLICY_UNREACHABLE = 4
#: The output directory cannot be used: held by another process's lock, read-only, or the disk is full.
#: Everything recorded before the failure is kept; ``--resume`` continues once the cause is gone.
EXIT_OUTPUT_UNUSABLE = 5
#: A port this command must listen on is in use (Foxglove, policy servers).
EXIT_PORT_IN_USE = 6


class CliError(Exception):
    """An error the user can act on; printed as one line without a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
