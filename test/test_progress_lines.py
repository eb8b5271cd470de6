"""No silent wait over 5 s (issue 35, item 4): a wait is named before it begins, or while it lasts.

Each test holds a stage open on purpose (an event, a FIFO the policy reads) and reads the line *before*
letting the stage end, so a line printed only afterwards would fail it; nothing here sleeps. And
``make demo`` passes the demo's options through.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.progress import QUIET_S, Heartbeat, Ticker
from test_cli_tasks import ROBOFOLLOW

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[1]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_heartbeat_says_what_is_waited_for_while_the_wait_lasts() -> None:
    out, told = io.StringIO(), threading.Event()

    def describe() -> str:
        told.set()
        return "… waiting for the gate, 1 s"

    with Heartbeat(describe, out, every_s=0.05) as beat:
        assert told.wait(30), "no line while the wait lasted"  # the block is the wait: it has not ended
        first = out.getvalue()
    assert first.startswith("… waiting for the gate, 1 s\n")
    assert beat._thread is not None and not beat._thread.is_alive()  # nothing is said after the wait


def test_a_short_wait_says_nothing_and_a_terminal_line_is_wiped_at_its_end() -> None:
    quiet = io.StringIO()
    with Heartbeat(lambda: "never", quiet, every_s=QUIET_S):
        pass  # over long before QUIET_S: a refusal right after stays one line
    assert quiet.getvalue() == ""

    tty, told = _Tty(), threading.Event()

    def building() -> str:
        told.set()
        return "… building"

    with Heartbeat(building, tty, every_s=0.05):
        assert told.wait(30)
    written = tty.getvalue()
    assert written.startswith("\r\x1b[2K… building") and "\n" not in written  # redrawn in place
    assert written.endswith("\r\x1b[2K")  # and wiped: what follows starts on a clean line


def test_a_ticker_kept_alive_writes_its_line_while_one_step_lasts() -> None:
    """Training: a step that outlasts the ticker's period (a loaded machine) no longer silences it."""
    written = threading.Event()

    class Log(io.StringIO):
        def write(self, text: str) -> int:
            written.set()
            return super().write(text)

    out = Log()
    ticker = Ticker(10, "step", stream=out, every_s=60.0)
    ticker.tick(1, note="loss 0.5000")  # not due yet: nothing written
    assert out.getvalue() == ""
    ticker.every_s = 0.05  # due from now on; the next step does not come
    with ticker.keep_alive():
        assert written.wait(30), "no line while the second step lasted"  # the step is this block: under way
    assert out.getvalue().splitlines()[0].startswith("step 1/10 ") and out.getvalue().endswith("loss 0.5000\n")


def test_sim_node_names_the_renderer_build_before_the_first_picture() -> None:
    """The first picture holds the interpreter for up to a minute: the line must come before it, not after."""
    from robofollow_ros.nodes.sim_node import SimNode

    said: list[str] = []
    release, rendering = threading.Event(), threading.Event()

    class Logger:
        def info(self, line: str) -> None:
            said.append(line)

    class Scratch:  # the throw-away world whose first picture builds the renderer
        def reset(self, task: Any, seed: int) -> None:
            pass

        def render_images(self) -> None:
            rendering.set()
            assert release.wait(30)

        def close(self) -> None:
            pass

    class Node:
        registry = type("Registry", (), {"eval_tasks": staticmethod(lambda: ["a task"])})()

        def get_logger(self) -> Logger:
            return Logger()

    worker = threading.Thread(target=SimNode._warm_renderer, args=(Node(), Scratch()))
    worker.start()
    try:
        assert rendering.wait(30)
        assert len(said) == 1 and said[0].startswith("building the renderer: the first picture takes up to a minute")
    finally:
        release.set()
        worker.join(30)
    assert said[1].startswith("renderer warmed up in ")


def test_the_demo_tells_a_silent_bringup_by_its_last_line(tmp_path: Path) -> None:
    """In one process, bringup's sim_node holds the interpreter while it takes its first picture, so bringup
    itself cannot speak; the demo relays its lines and, while it is silent, quotes the last one."""
    from robofollow_ros.dry_run import _run_relayed

    gate = tmp_path / "gate"
    os.mkfifo(gate)
    child = [sys.executable, "-c", textwrap.dedent(f"""
        import sys
        print("[INFO] [1796525422.372029663] [sim_node]: building the renderer", file=sys.stderr, flush=True)
        open({str(gate)!r}).read()  # the long call
        print("the table")
    """)]
    told = threading.Event()

    class Log(io.StringIO):
        def write(self, text: str) -> int:
            if text.startswith("… robofollow bringup: "):
                told.set()
            return super().write(text)

    log, result = Log(), []
    relay = threading.Thread(target=lambda: result.append(_run_relayed(child, log, 120)))
    relay.start()
    try:
        assert told.wait(60), log.getvalue()  # the child is still held: said while it is silent
        lines = log.getvalue().splitlines()
        assert lines[0] == "[INFO] [1796525422.372029663] [sim_node]: building the renderer"  # relayed as it came
        assert lines[1].startswith("… robofollow bringup: ")
        assert lines[1].endswith(" since its last line: [sim_node]: building the renderer")
    finally:
        with open(gate, "w") as fifo:
            fifo.write("go")
        relay.join(60)
    assert result == [(0, "the table\n")]


GATED_POLICY = textwrap.dedent("""
    import numpy as np

    class Gated:
        '''Holds its first predict until the test writes to the FIFO ``gate``: a trial that lasts.'''
        def __init__(self, gate):
            self.gate, self.open = gate, False
        def reset(self):
            pass
        def set_instruction(self, text):
            pass
        def predict(self, obs):
            if not self.open:
                with open(self.gate) as fifo:
                    fifo.read()
                self.open = True
            return np.repeat(np.asarray(obs["joint_action"]["vector"], dtype=np.float32)[None], 5, axis=0)

    def make(gate):
        return Gated(gate)
""")


def test_eval_names_the_trial_it_waits_for_before_the_trial_ends(tmp_path: Path) -> None:
    """The trial is held open by its policy until the test has read the line saying it runs."""
    (tmp_path / "gated_policy.py").write_text(GATED_POLICY)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    proc = subprocess.Popen(
        [ROBOFOLLOW, "eval", "--policy", "gated_policy:make", "--kwargs", json.dumps({"gate": str(gate)}),
         "--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--max-steps", "1", "--actions-per-step", "5",
         "--no-render", "--policy-timeout", "60", "--output", str(tmp_path / "run")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # streamed: each line as the command writes it
            said.append(line.rstrip("\n"))
            if line.startswith("… running L0_pickup_red_cylinder_r1"):
                break
        assert proc.poll() is None, said  # the trial is still held: the line came while it lasted
        assert said[-1].startswith("… running L0_pickup_red_cylinder_r1") and said[-1].endswith("0/1 trials done")
        assert "running 1 trial of gated_policy:make in 1 worker process" in said  # said before the trial
        with open(gate, "w") as fifo:  # let the trial go on
            fifo.write("go")
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "\n".join(said) + err[-2000:]
    assert "1/1 trials" in err


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_passes_the_demos_options_through() -> None:
    def demo_line(*variables: str) -> str:
        done = subprocess.run(["make", "-n", "demo", *variables], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if " demo" in line and "robofollow" in line][-1]

    assert demo_line().endswith("robofollow demo")  # the README's command, as before
    assert demo_line("FOXGLOVE_PORT=0").endswith("robofollow demo --foxglove-port 0")
    line = demo_line("FOXGLOVE_PORT=8766", "DEMO_ARGS=--per-group 1 --no-render")
    assert line.endswith("robofollow demo --foxglove-port 8766 --per-group 1 --no-render")

    from robofollow_ros.cli import build_parser

    args = build_parser().parse_args(line.split("robofollow ", 1)[1].split())  # options the demo takes
    assert (args.foxglove_port, args.per_group, args.no_render) == (8766, 1, True)
