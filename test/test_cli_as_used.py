"""The command line as people use it (issue 30): the installed console script in a subprocess, with real
sockets, real signals and real run directories."""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.evaluation.progress import StageProgress, Ticker
from robofollow_ros.exit_status import EXIT_INTERRUPTED, EXIT_OK, EXIT_PORT_IN_USE
from test_cli_tasks import ROBOFOLLOW
from test_orphans import alive, children
from waiting import poll_until


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_demo_takes_the_foxglove_port_and_refuses_a_taken_one_before_anything_starts(tmp_path: Path) -> None:
    """``demo --foxglove-port`` reaches the live server's check: a port in use is refused in one line naming it
    (exit 6, as bringup), before the policy server starts or the output directory is made."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = tmp_path / "demo"
        taken = _cli("demo", "--foxglove-port", str(port), "--output", str(out))
    assert taken.returncode == EXIT_PORT_IN_USE, taken.stderr
    assert taken.stderr.count("\n") == 1 and f"port {port} on 127.0.0.1 (the live Foxglove view) is in use" \
        in taken.stderr and "--foxglove-port" in taken.stderr
    assert not out.exists()
    alone = _cli("demo", "--foxglove-port", "0", "--skip-ros", "--output", str(out))
    assert alone.returncode == 2 and "--foxglove-port 0: the live view is the dry run's" in alone.stderr
    assert not out.exists()


def _recorded(run_dir: Path) -> list[dict]:
    try:
        return list(json.loads((run_dir / "results.json").read_text()))
    except (OSError, ValueError):  # not written yet, or caught between two writes of another process
        return []


def test_ctrl_c_of_eval_exits_130_naming_the_line_that_resumes_it(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the foreground process group, as a terminal sends it) once a trial is recorded: exit 130
    and the exact resume line; that line, run as printed, finishes the run with every trial once."""
    run_dir = tmp_path / "run dir"  # a space: the printed line must quote it
    argv = ["eval", "--policy", "hold", "--scene", "scene1", "--levels", "L0", "--rounds", "1", "--limit", "3",
            "--max-steps", "4", "--actions-per-step", "10", "--no-render", "--output", str(run_dir)]
    proc = subprocess.Popen([ROBOFOLLOW, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert poll_until(lambda: len(_recorded(run_dir)) >= 1 or proc.poll() is not None, 120)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err
    line = shlex.join(["robofollow", *argv, "--resume"])
    assert f"Continue the run with:\n  {line}\n" in err
    before = _recorded(run_dir)
    assert 1 <= len(before) < 3
    resumed = subprocess.run([ROBOFOLLOW, *shlex.split(line)[1:]], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert sorted(e["task"] for e in _recorded(run_dir)) == sorted({e["task"] for e in _recorded(run_dir)})
    assert len(_recorded(run_dir)) == 3 and _recorded(run_dir)[: len(before)] == before


@pytest.mark.parametrize("started", [1, 2], ids=["while-workers-start", "workers-running"])
def test_sigterm_of_collect_stops_its_workers_and_exits_130_without_a_traceback(tmp_path: Path, started: int) -> None:
    """``kill PID`` (SIGTERM to the process alone, as a scheduler or the end of a session sends it) to a collection
    running two worker processes: it ends as Ctrl-C does (one line, status 130) and takes its workers with it. It
    used to die at once and leave them running, orphaned, printing tracebacks when they found their parent gone.
    Sent as the first child appears, it lands while the pool starts its workers: one started then used to be left
    to fail on the pool's semaphores once the parent was gone (``interrupts.held``)."""
    proc = subprocess.Popen([ROBOFOLLOW, "collect", "--output", str(tmp_path / "demos"), "--tasks",
                             "pickup_red_cylinder", "--episodes-per-task", "4", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert poll_until(lambda: len(children(proc.pid)) >= started or proc.poll() is not None, 120)
        workers = children(proc.pid)
        assert proc.poll() is None, "the collection ended before it could be stopped"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert poll_until(lambda: not any(alive(p) for p in workers), 30), "worker processes outlived the collection"


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_ticker_writes_a_line_every_few_seconds_with_rate_and_eta_and_the_last_step() -> None:
    """Off a terminal a step per 0.25 s gives a line every 2 s (not per step, not never) and the last step's."""
    clock, out = _Clock(), io.StringIO()
    ticker = Ticker(100, "step", stream=out, every_s=2.0, clock=clock)
    for step in range(1, 101):
        clock.now += 0.25
        ticker.tick(step, note=f"loss {1 / step:.3f}")
    lines = out.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == [f"{n}/100" for n in range(8, 100, 8)] + ["100/100"]
    assert lines[0] == "step 8/100  4.0 steps/s  ETA 00:23  loss 0.125"
    assert lines[-1] == "step 100/100  4.0 steps/s  ETA 00:00  loss 0.010"
    assert Ticker(5, "x", stream=io.StringIO()).every_s == 4.0  # a log's default: a line every 4 s (issue 35)


def test_a_ticker_on_a_terminal_redraws_one_line_and_resumed_work_counts_its_own_rate() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock, out = _Clock(), Tty()
    ticker = Ticker(3000, "step", stream=out, clock=clock, already_done=1000)  # resumed at step 1000
    assert ticker.every_s == 0.5
    clock.now += 10.0
    ticker.tick(2000)
    assert out.getvalue() == "\r\x1b[2Kstep 2000/3000  100.0 steps/s  ETA 00:10"
    ticker.end()  # stopped early: the line is ended so an error message starts on its own
    assert out.getvalue().endswith("ETA 00:10\n")


def test_stage_progress_starts_a_line_per_stage() -> None:
    clock, out = _Clock(), io.StringIO()
    progress = StageProgress("owda generate", stream=out, every_s=5.0, clock=clock)
    for n in range(1, 4):
        clock.now += 6.0
        progress("anchors", n, 3)
    progress("compositions", 1, 2)  # a new stage: its clock starts now, nothing due yet
    clock.now += 1.0
    progress("compositions", 2, 2)  # its last count is always said
    assert out.getvalue().splitlines() == [
        "owda generate: anchors 1/3  0.2/s  ETA 00:12", "owda generate: anchors 2/3  0.2/s  ETA 00:06",
        "owda generate: anchors 3/3  0.2/s  ETA 00:00", "owda generate: compositions 2/2  2.0/s  ETA 00:00"]
    assert progress.written == 4


def test_the_docs_headless_live_view_script_runs_as_written(tmp_path: Path) -> None:
    """docs/foxglove.md's live-view script, run from its text: only the port (0: any free one, the machine may
    be running a viewer on 8765) and the rendering (off: the CPU renderer's first picture takes minutes) are
    changed. It scores the trial, serves it and leaves a recording that replays to the same result."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "foxglove.md").read_text(encoding="utf-8")
    intro = text.index("In code, with a live viewer too")
    start = text.index("```python\n", intro) + len("```python\n")
    script = text[start: text.index("```", start)]
    for doc, here in (("port=8765", "port=0"), ("SimWorld(render=True)", "SimWorld(render=False)")):
        assert script.count(doc) == 1, doc
        script = script.replace(doc, here)
    (tmp_path / "live.py").write_text(script, encoding="utf-8")
    done = subprocess.run([sys.executable, "live.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("IS 1.00 ES 1.00; recorded in runs/live/mcap/"), done.stdout
    (recording,) = (tmp_path / "runs" / "live" / "mcap").glob("*.mcap")
    replay = _cli("replay", str(recording), "--json")
    assert replay.returncode == 0 and json.loads(replay.stdout)["matches_live"] is True, replay.stderr
