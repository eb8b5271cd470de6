"""Progress lines for long work, redrawn in place on a terminal: ``Progress`` counts trials (rate per
minute, ETA); ``Ticker`` rate-limits a line for work counted in many small steps (training, OWDA suites)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
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


def clock_text(seconds: float) -> str:
    """``mm:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Ticker:
    """A rate-limited progress line for work counted in small steps (training steps, suite families).

    ``tick(done)`` is cheap and may be called for every step; a line is written only when ``every_s`` has
    passed since the last one (a terminal redraws one line in place every half second; a log gets one line
    every 5 s, so a long run neither floods it nor goes silent) and for the last step. The line says
    ``label done/total``, the rate over this process's steps and the ETA, then the caller's ``note``."""

    def __init__(self, total: int, label: str, unit: str = "steps", stream: TextIO | None = None,
                 every_s: float | None = None, already_done: int = 0,
                 clock: Callable[[], float] = time.monotonic, started: float | None = None) -> None:
        self.total, self.label, self.unit = total, label, unit
        self.stream = stream or sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s if every_s is not None else (0.5 if self._tty else 5.0)
        self._clock = clock
        self._start = self._last = clock() if started is None else started
        self._base = self.done = already_done
        self.lines = 0
        self._open = False  # a terminal line drawn in place and not yet ended

    def tick(self, done: int, note: str = "") -> bool:
        """Record ``done`` steps; write the line if it is due (or ``done`` reached the total). True if written."""
        self.done = done
        now = self._clock()
        if now - self._last < self.every_s and done < self.total:
            return False
        self._last = now
        self.write(self.line(note), final=done >= self.total)
        return True

    def line(self, note: str = "") -> str:
        elapsed = self._clock() - self._start
        rate = (self.done - self._base) / elapsed if elapsed > 0 else 0.0
        eta = clock_text((self.total - self.done) / rate) if rate > 0 else "--:--"
        per = f"{rate:.1f} {self.unit}/s" if self.unit else f"{rate:.1f}/s"
        return f"{self.label} {self.done}/{self.total}  {per}  ETA {eta}  {note}".rstrip()

    def write(self, text: str, final: bool = False) -> None:
        if self._tty:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
            self._open = not final
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.lines += 1

    def end(self) -> None:
        """End a line left open on a terminal (the work stopped early), so what follows starts on its own."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


class StageProgress:
    """A ``progress(stage, done, total)`` callback (``decisions.generator``, ``decisions.validate``) as
    rate-limited lines on ``stream``: a :class:`Ticker` per stage, its label ``prefix: stage``."""

    def __init__(self, prefix: str, stream: TextIO | None = None, every_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix, self.stream, self.every_s, self._clock = prefix, stream, every_s, clock
        self._stage: str | None = None
        self._ticker: Ticker | None = None
        self._since = clock()  # when the stage under way began: the previous one's last report
        self.lines = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._ticker is None or stage != self._stage:
            if self._ticker is not None:
                self.lines += self._ticker.lines
            self._stage = stage
            self._ticker = Ticker(total, f"{self.prefix}: {stage}", unit="", stream=self.stream,
                                  every_s=self.every_s, clock=self._clock, started=self._since)
        self._ticker.tick(done)
        self._since = self._clock()

    def end(self) -> None:
        if self._ticker is not None:
            self._ticker.end()

    @property
    def written(self) -> int:
        """Lines written so far, over every stage."""
        return self.lines + (self._ticker.lines if self._ticker is not None else 0)
