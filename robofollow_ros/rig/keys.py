"""The operator's keys in the bringup terminal: one key acts at once, without Enter.

A person at the rig presses ``p`` to hold a trial because an arm is about to hit something; a key that
waits for Enter is a second too late. On a terminal (``isatty``) :class:`KeyReader` puts it in cbreak
mode (``termios``: no line buffering, no echo; Ctrl-C still interrupts) and hands every key to its
callback as it comes (Enter as ``""``); it gives the terminal its settings back on every way out —
:meth:`KeyReader.close` (the owner's ``finally``), and ``atexit`` for an exit that skips it (an exception
through ``main``, Ctrl-C) — since a shell left in cbreak mode neither echoes nor edits lines. Not a
terminal (a pipe: ``robofollow bringup`` forwarding its own keys to a trial manager process, a test,
a script): one key per line, as typed before.

ROS-free: the trial manager (in process) and ``robofollow bringup`` (forwarding keys to the trial
manager's process, which as a background process group may not read the terminal) both use it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable
from typing import IO, Any

#: Keys that end the reader (end of input on a terminal: Ctrl-D).
_EOF_KEYS = ("\x04",)


class KeyReader:
    """Read keys from ``stream`` on a daemon thread and call ``on_key`` with each (lower case, Enter: "")."""

    def __init__(self, stream: IO[Any], on_key: Callable[[str], None]) -> None:
        self._stream, self._on_key = stream, on_key
        self._saved: list[Any] | None = None
        self._fd = -1
        self._lock = threading.Lock()
        self.single_key = False  # True once the terminal is in cbreak mode

    def start(self) -> KeyReader:
        """Put a terminal in cbreak mode (a pipe stays as it is) and start reading."""
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream without a descriptor (pytest's capture)
            fd = -1
        if fd >= 0 and os.isatty(fd):
            import termios
            import tty

            with self._lock:
                self._fd, self._saved = fd, termios.tcgetattr(fd)
                tty.setcbreak(fd, termios.TCSANOW)
                self.single_key = True
            atexit.register(self.close)
        threading.Thread(target=self._read, name="keys", daemon=True).start()
        return self

    def close(self) -> None:
        """Give the terminal its settings back (idempotent; the reader thread may stay blocked, it is a daemon)."""
        with self._lock:
            saved, self._saved = self._saved, None
            if saved is None:
                return
            import termios

            with contextlib.suppress(OSError, termios.error):  # a terminal gone (hung up): nothing to restore
                termios.tcsetattr(self._fd, termios.TCSADRAIN, saved)
        atexit.unregister(self.close)

    def _read(self) -> None:
        if self.single_key:
            while self._saved is not None:
                try:
                    data = os.read(self._fd, 1)
                except OSError:
                    return
                if not data or data.decode(errors="replace") in _EOF_KEYS or self._saved is None:
                    return  # the end of input, or a key read after close: not the operator's any more
                key = data.decode(errors="replace")
                self._on_key("" if key in ("\r", "\n") else key.lower())
            return
        for line in self._stream:
            self._on_key(str(line).strip().lower())
