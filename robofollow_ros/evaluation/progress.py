"""A progress line for long runs: trials done, rate and ETA, redrawn in place on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts finished trials; on a TTY redraws one line, otherwise prints every ``every`` trials."""

    def __init__(self, total: int, label: str = "trials", stream: TextIO | None = None, every: int = 10,
                 already_done: int = 0) -> None:
        self.total, self.label = total, label
        self.done = self._base = already_done
        self.failed = 0
        self.stream = stream or sys.stderr
        # Off a terminal (logs, CI) print every trial of a short run, else about every 1 %.
        self.every = max(1, every if total > 100 else 1)
        self._start = time.monotonic()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def advance(self, failed: bool = False, note: str = "") -> None:
        self.done += 1
        self.failed += int(failed)
        if self._tty or self.done % self.every == 0 or self.done == self.total:
            self._draw(note)

    def line(self, note: str = "") -> str:
        elapsed = time.monotonic() - self._start
        new = self.done - self._base  # trials finished by this process (a resumed run starts past zero)
        rate = new / elapsed * 60 if elapsed > 0 else 0.0
        remaining = (self.total - self.done) / (new / elapsed) if new and elapsed > 0 else None
        eta = "--:--" if remaining is None else f"{int(remaining // 60):02d}:{int(remaining % 60):02d}"
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        failed = f", {self.failed} failed" if self.failed else ""
        return f"[{bar}] {self.done}/{self.total} {self.label}{failed}  {rate:.1f}/min  ETA {eta}  {note}".rstrip()

    def _draw(self, note: str) -> None:
        text = self.line(note)
        if self._tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
