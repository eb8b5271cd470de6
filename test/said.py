"""What a command said on stderr, less its progress lines.

A command tells a long wait before it (``… checking the sim profile …, 4 s``); on a loaded machine such a line
may come before the one error line a refusal prints. Tests of "one line, no traceback" judge the rest."""

from __future__ import annotations

PROGRESS = "… "


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.strip().splitlines() if not line.startswith(PROGRESS)]
