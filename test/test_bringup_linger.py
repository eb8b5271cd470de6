"""``robofollow bringup`` run from a terminal keeps the live Foxglove view up after the trials until Ctrl-C
(then exits 0, closing viewers with a close frame); ``--exit-when-done`` exits by itself. A pseudo-terminal
makes the run interactive, as a person's shell would."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from robofollow_ros.monitoring.ws_client import FoxgloveProbe

TASK = "L0_pickup_red_cylinder"


class Terminal:
    """A child process on a pseudo-terminal; its output is collected by a reader thread."""

    def __init__(self, args: list[str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                     env=dict(os.environ))
        os.close(slave)
        self.text = ""
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            with self._changed:
                self.text += chunk.decode(errors="replace")
                self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while (match := re.search(pattern, self.text)) is None:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"no {pattern!r} (exit {self.proc.poll()}):\n{self.text[-3000:]}")
                self._changed.wait(0.2)
        return match

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def _bringup(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "robofollow_ros.cli", "bringup", "sim", "--no-render", "--tasks", TASK,
            "--rounds", "1", "--max-steps", "1", "--foxglove-port", "0", "--output", str(tmp_path / "run"),
            *extra]


def test_from_a_terminal_the_live_view_stays_up_until_ctrl_c(tmp_path: Path) -> None:
    term = Terminal(_bringup(tmp_path))
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        port = term.wait_for(r"Foxglove: connect to ws://127\.0\.0\.1:(\d+)", 600)[1]
        term.wait_for(r"trials done; the Foxglove view stays up", 600)
        assert "S1" in term.text or TASK in term.text  # the score table came first
        probe = FoxgloveProbe(f"ws://127.0.0.1:{port}")
        asyncio.run_coroutine_threadsafe(probe.connect(), loop).result(30)
        asyncio.run_coroutine_threadsafe(probe.wait_for(lambda: bool(probe.channels), 20, "ads"), loop).result(30)
        assert term.proc.poll() is None, "bringup exited although it runs in a terminal"
        term.proc.send_signal(signal.SIGINT)
        assert term.proc.wait(timeout=120) == 0, term.text[-3000:]
        asyncio.run_coroutine_threadsafe(probe.wait_closed(20), loop).result(30)
        assert probe.close_frame_received, f"closed without a close frame (code {probe.close_code})"
    finally:
        term.close()
        loop.call_soon_threadsafe(loop.stop)


def test_exit_when_done_exits_by_itself_in_a_terminal(tmp_path: Path) -> None:
    term = Terminal(_bringup(tmp_path, "--exit-when-done"))
    try:
        assert term.proc.wait(timeout=600) == 0, term.text[-3000:]
        assert "stays up" not in term.text
        assert (tmp_path / "run" / "results.json").is_file()
    finally:
        term.close()
