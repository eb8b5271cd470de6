"""``robofollow bringup`` when something goes wrong mid-run, as a user sees it (a real subprocess over DDS):
a stalled in-process policy fails its trial within ``--policy-timeout`` and the run exits 3; a node
process killed with SIGKILL is named with its signal in one line, the run exits with a documented
status (3), and ``run.json`` is never left ``running`` — also when the trial manager itself, the
run directory's writer, is the one killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_TRIALS_FAILED
from test_orphans import children, command_line

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
TASK = "L0_pickup_red_cylinder"
STALL = ["--policy", "robofollow_ros.policy.drills.scripted:dying", "--kwargs", '{"mode": "sleep", "sleep_s": 3600}']


def _results(run_dir: Path) -> list:  # type: ignore[type-arg]
    path = run_dir / "results.json"
    return json.loads(path.read_text()) if path.is_file() else []


@pytest.mark.parametrize("rig", ["mock", "sim"])
def test_a_stalled_in_process_policy_fails_its_trial_within_the_policy_timeout(tmp_path, rig):
    out = tmp_path / "run"
    extra = ["--no-render"] if rig == "sim" else []
    started = time.monotonic()
    done = subprocess.run([*ROBOFOLLOW, "bringup", rig, *extra, *STALL, "--policy-timeout", "2", "--tasks", TASK,
                           "--max-steps", "3", "--no-foxglove", "--exit-when-done", "--output", str(out)],
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == EXIT_TRIALS_FAILED, done.stderr[-3000:]
    assert f"failed trial {TASK} r1: PolicyTimeoutError: policy predict: no answer within 2 s" in done.stdout
    (result,) = _results(out)
    assert result["policy_error"] == "PolicyTimeoutError: policy predict: no answer within 2 s"
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert time.monotonic() - started < 300  # the graph's start-up and one 2 s stall, not a trial limit


def _start_long_run(out: Path) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    """``bringup mock`` (one process per node) on a trial that runs until stopped; returns once it runs."""
    proc = subprocess.Popen([*ROBOFOLLOW, "bringup", "mock", "--policy", "hold", "--tasks", TASK, "--max-steps",
                             "100000", "--no-foxglove", "--exit-when-done", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    running = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if f"trial 1/1: {TASK}" in line:
                running.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not running.wait(timeout=180):
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the first trial did not begin:\n" + "".join(lines[-30:]))
    return proc, lines, reader


def _node_pid(supervisor: int, executable: str) -> int:
    (pid,) = [p for p in children(supervisor) if f"robofollow_ros.nodes.{executable} " in command_line(p) + " "]
    return pid


@pytest.mark.parametrize("victim", ["policy_node", "trial_manager_node"])
def test_a_killed_node_is_named_with_its_signal_and_the_run_is_not_left_running(tmp_path, victim):
    out = tmp_path / "run"
    proc, lines, reader = _start_long_run(out)
    try:
        os.kill(_node_pid(proc.pid, victim), signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    reader.join(timeout=10)
    output = "".join(lines)
    assert proc.returncode == EXIT_TRIALS_FAILED, output[-3000:]  # documented; never 247 (-9 passed through)
    said = [line for line in lines if line.startswith("robofollow bringup: ")]
    assert f"robofollow bringup: {victim} was killed by SIGKILL (signal 9)\n" in said, output[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed", run
    assert victim in run["error"] and "Traceback" not in output
    if victim == "policy_node":  # the trial manager outlived it: it recorded the trial under way as a fault
        (result,) = _results(out)
        assert result["fault"] == "node-died" and victim in result["fault_reason"], result
        assert "policy_error" not in result
    else:  # the writer itself died: bringup closed the run it left, naming how it ended
        assert "SIGKILL" in run["error"]
        assert _results(out) == []


@pytest.mark.parametrize("value", ["0", "-3", "inf", "nan"])
def test_a_bad_policy_timeout_is_one_line_naming_the_flag(tmp_path, value):
    done = subprocess.run([*ROBOFOLLOW, "bringup", "mock", "--policy-timeout", value, "--output",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert done.stderr.strip().splitlines() == [
        "robofollow bringup: error: argument --policy-timeout: must be a number > 0 and <= 604800 seconds, "
        f"got {value!r} (see robofollow bringup --help)"]
    assert not (tmp_path / "run").exists()
