"""Progress lines for long work, redrawn in place on a terminal: ``Progress`` counts trials (rate per
minute, ETA); ``Ticker`` rate-limits a line for work counted in many small steps (training, OWDA suites);
``Heartbeat`` says what is waited for while work that reports nothing itself runs (a trial, a worker's start).

No command waits silently for more than :data:`QUIET_S` (issue 35): a wait that may be long is named in a line
*before* it begins (``==> building the renderer ...``), and a long one gets a line every ``QUIET_S`` in a log."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

#: A log (not a terminal) gets a progress line at least this often while a command works or waits, seconds.
QUIET_S = 4.0
#: A terminal's line, redrawn in place, is redrawn this often.
TTY_REDRAW_S = 0.5
#: Said before the first picture of a process (SAPIEN builds its shared renderer state then; ``sim.renderer``).
RENDERER_HINT = "the first picture builds the renderer: up to a minute on a CPU"


def is_tty(stream: TextIO) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


class Heartbeat:
    """While work that reports nothing itself runs, a line every ``every_s`` of silence: ``describe()``, which
    says what is waited for and for how long (:func:`waited`). A daemon thread writes it; ``touch()`` tells it
    that something else was just written (the caller's own progress line, written holding ``lock``, which every
    write of the heartbeat holds too, so that lines do not interleave). On a terminal the line is redrawn in
    place, as :class:`Progress` draws, and wiped when the wait ends. A wait that ends within ``every_s`` says
    nothing: a refusal after it stays one line.

    A thread cannot speak while another holds the interpreter lock for long (SAPIEN's first picture does):
    so such a wait is also named before it begins."""

    def __init__(self, describe: Callable[[], str], stream: TextIO | None = None,
                 every_s: float | None = None) -> None:
        self.describe = describe
        self.stream = stream or sys.stderr
        self._tty = is_tty(self.stream)
        self.every_s = every_s if every_s is not None else (TTY_REDRAW_S if self._tty else QUIET_S)
        self.lock = threading.Lock()
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines = 0
        self.open = False  # a terminal line drawn in place and not yet ended
        self.own = False  # ... and this heartbeat drew it (else the caller's progress line)

    def touch(self) -> None:
        self._last = time.monotonic()

    def start(self) -> Heartbeat:
        self.touch()
        self._thread = threading.Thread(target=self._run, name="robofollow-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self.open and self.own:  # a heartbeat's line goes; the caller's progress line is the caller's
            with self.lock:
                self._write("\r\x1b[2K")
                self.open = False

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(max(0.05, self._last + self.every_s - time.monotonic())):
            if time.monotonic() - self._last < self.every_s:
                continue
            try:
                text = self.describe()
            except Exception as exc:  # a report must never end the work it reports on
                text = f"(progress unavailable: {exc})"
            with self.lock:
                if self._stop.is_set():
                    return
                self._write(("\r\x1b[2K" + text) if self._tty else text + "\n")
                self.open = self.own = self._tty
                self.lines += 1
            self.touch()

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the stream closed under us (the command is ending)
            self._stop.set()


def waited(since: float) -> str:
    """``8 s`` / ``2:05`` since ``since`` (``time.monotonic``)."""
    seconds = time.monotonic() - since
    return f"{seconds:.0f} s" if seconds < 100 else clock_text(seconds)


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
        self._tty = is_tty(self.stream)
        self._heartbeat: Heartbeat | None = None

    def waiting(self, describe: Callable[[], str]) -> Heartbeat:
        """A :class:`Heartbeat` for the waits between this counter's lines (a trial may take minutes): it writes
        to the same stream, under the same lock, and every line drawn here resets it. Use it as a context."""
        self._heartbeat = Heartbeat(describe, self.stream)
        return self._heartbeat

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
        beat = self._heartbeat
        with beat.lock if beat is not None else contextlib.nullcontext():
            if self._tty:
                self.stream.write("\r\x1b[2K" + text + ("\n" if self.done == self.total else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
            if beat is not None:
                beat.touch()
                beat.open, beat.own = self._tty and self.done != self.total, False


def clock_text(seconds: float) -> str:
    """``mm:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Ticker:
    """A rate-limited progress line for work counted in small steps (training steps, suite families).

    ``tick(done)`` is cheap and may be called for every step; a line is written only when ``every_s`` has
    passed since the last one (a terminal redraws one line in place every half second; a log gets one line
    every :data:`QUIET_S`, so a long run neither floods it nor goes silent) and for the last step. The line says
    ``label done/total``, the rate over this process's steps and the ETA, then the caller's ``note``."""

    def __init__(self, total: int, label: str, unit: str = "steps", stream: TextIO | None = None,
                 every_s: float | None = None, already_done: int = 0,
                 clock: Callable[[], float] = time.monotonic, started: float | None = None) -> None:
        self.total, self.label, self.unit = total, label, unit
        self.stream = stream or sys.stderr
        self._tty = is_tty(self.stream)
        self.every_s = every_s if every_s is not None else (TTY_REDRAW_S if self._tty else QUIET_S)
        self._clock = clock
        self._start = self._last = clock() if started is None else started
        self._base = self.done = already_done
        self.lines = 0
        self._open = False  # a terminal line drawn in place and not yet ended
        self._note = ""
        self._lock = threading.Lock()

    def tick(self, done: int, note: str = "") -> bool:
        """Record ``done`` steps; write the line if it is due (or ``done`` reached the total). True if written."""
        with self._lock:
            self.done, self._note = done, note
            now = self._clock()
            if now - self._last < self.every_s and done < self.total:
                return False
            self._last = now
            self.write(self.line(note), final=done >= self.total)
            return True

    @contextlib.contextmanager
    def keep_alive(self) -> Iterator[None]:
        """Within the block the line is also written from a thread when a step outlasts ``every_s`` (a loaded
        machine, a large batch): a line every ``every_s`` whatever a step costs, with the count so far."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(max(0.05, self._last + self.every_s - self._clock())):
                with self._lock:
                    if not stop.is_set() and self._clock() - self._last >= self.every_s:
                        self._last = self._clock()
                        self.write(self.line(self._note))

        thread = threading.Thread(target=run, name="robofollow-ticker", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)

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
