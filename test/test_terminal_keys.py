"""The operator's single keys on a real pseudo-terminal (``pty.openpty``), and line input from a pipe.

The trial manager runs as its own process with the pty as its controlling terminal, as in the bringup
terminal: ``p`` without Enter pauses the run and ``r`` resumes it (its log answers each key), the terminal is
in cbreak mode meanwhile, and after Ctrl-C (typed into the pty: the line discipline sends SIGINT) the terminal
has exactly its settings from before. A process that dies of an exception restores them too (``atexit``).
From a pipe (bringup forwarding keys, a script) a key is a line.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from robofollow_ros.rig.keys import KeyReader

ROOT = Path(__file__).resolve().parents[1]
#: Make the pty the controlling terminal of the new session, then become the program (Ctrl-C then reaches it).
ON_TERMINAL = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.executable, " \
              "[sys.executable, *sys.argv[1:]])"


class Terminal:
    """A pty whose slave is a child's stdin/stdout/stderr and controlling terminal; the master reads its output."""

    def __init__(self, *argv: str) -> None:
        self.master, self.slave = pty.openpty()
        self.before = termios.tcgetattr(self.slave)
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", RCUTILS_COLORIZED_OUTPUT="0")
        self.proc = subprocess.Popen([sys.executable, "-c", ON_TERMINAL, *argv], stdin=self.slave,
                                     stdout=self.slave, stderr=self.slave, start_new_session=True, env=env)
        self.output = ""

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} within {timeout} s; the terminal showed:\n{self.output[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], min(remaining, 0.5))
            if ready:
                try:
                    self.output += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the child closed the terminal: nothing more will come
                    assert text in self.output, f"no {text!r}; the terminal showed:\n{self.output[-3000:]}"

    def drain(self, seconds: float) -> None:
        """Read what the child wrote within ``seconds`` (a pty whose output nobody reads blocks its writer)."""
        ready, _, _ = select.select([self.master], [], [], seconds)
        if ready:
            with contextlib.suppress(OSError):
                self.output += os.read(self.master, 65536).decode(errors="replace")

    def cbreak(self) -> bool:
        return not termios.tcgetattr(self.slave)[3] & termios.ICANON

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


def test_a_single_key_acts_in_the_trial_manager_and_ctrl_c_gives_the_terminal_back(tmp_path):
    terminal = Terminal("-m", "robofollow_ros.nodes.trial_manager_node", "--ros-args",
                        "-p", "confirm_with_key:=true", "-p", "mode:=rig", "-p", "wait_for_nodes:=[nobody]",
                        "-p", f"output:={tmp_path / 'run'}")
    try:
        assert not terminal.cbreak()  # a line-buffered terminal, as a shell leaves it
        deadline = time.monotonic() + 60
        while not terminal.cbreak():  # the node is up and reads keys: one key at a time
            assert terminal.proc.poll() is None and time.monotonic() < deadline, terminal.output
            terminal.drain(0.05)  # its output meanwhile (the terminal's mode changes without an event)
        terminal.type(b"p")  # no Enter
        terminal.wait_for("key 'p': phase idle; the next trial waits for resume")
        terminal.type(b"r")
        terminal.wait_for("key 'r': phase idle; running the protocol")
        terminal.type(b"x")
        terminal.wait_for("key 'x': not one of Enter (confirm the layout), p (pause)")
        terminal.type(b"\x03")  # Ctrl-C: SIGINT from the line discipline, as at the bringup terminal
        assert terminal.proc.wait(timeout=30) == 0
        assert termios.tcgetattr(terminal.slave) == terminal.before
    finally:
        terminal.close()


def test_an_exception_after_the_keys_started_still_gives_the_terminal_back():
    script = ("import sys; from robofollow_ros.rig.keys import KeyReader; "
              "r = KeyReader(sys.stdin, print).start(); print('single', r.single_key, flush=True); "
              "raise RuntimeError('boom')")
    terminal = Terminal("-c", script)
    try:
        terminal.wait_for("single True")
        terminal.wait_for("RuntimeError: boom")
        assert terminal.proc.wait(timeout=30) == 1
        assert termios.tcgetattr(terminal.slave) == terminal.before
    finally:
        terminal.close()


def test_keys_from_a_pipe_are_lines():
    read, write = os.pipe()
    got: list[str] = []
    done = threading.Event()

    def on_key(key: str) -> None:
        got.append(key)
        if len(got) == 3:
            done.set()

    with os.fdopen(read) as stream:
        reader = KeyReader(stream, on_key).start()
        assert not reader.single_key
        os.write(write, b"P\n\nd\n")
        os.close(write)
        assert done.wait(10)
        reader.close()  # nothing to restore
    assert got == ["p", "", "d"]


def test_bringup_hands_single_keys_to_a_trial_manager_process_in_its_own_process_group():
    # bringup's own code (running._forward_keys) at the terminal; the "trial manager" is a process in a group of
    # its own, as bringup starts nodes, that echoes the lines it reads on its stdin
    script = ("import subprocess, sys; from robofollow_ros.bringup import running; "
              "child = subprocess.Popen([sys.executable, '-c', 'import sys\\nfor l in sys.stdin: "
              "print(\"GOT\", repr(l), flush=True)'], stdin=subprocess.PIPE, process_group=0); "
              "reader = running._forward_keys(child); print('single', reader.single_key, flush=True)\n"
              "try:\n    child.wait()\nexcept KeyboardInterrupt:\n    child.kill()\nfinally:\n    reader.close()")
    terminal = Terminal("-c", script)
    try:
        terminal.wait_for("single True")
        terminal.type(b"d")
        terminal.wait_for("GOT 'd\\n'")
        terminal.type(b"\r")
        terminal.wait_for("GOT '\\n'")
        terminal.type(b"\x03")
        terminal.proc.wait(timeout=30)
        assert termios.tcgetattr(terminal.slave) == terminal.before
    finally:
        terminal.close()
