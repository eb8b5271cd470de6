"""``robofollow bringup`` as a user runs it: a real subprocess over DDS in its own domain. It runs the
trials and prints the table, rejects bad input with exit 2 before starting anything, fails fast
with its own status on an unreachable policy or a port in use, exits with a distinct status when
trials could not be executed, and stops cleanly on SIGTERM (in one process) and on SIGINT (one
process per node), leaving a failed run.json."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_POLICY_UNREACHABLE, EXIT_PORT_IN_USE, EXIT_TRIALS_FAILED
from said import error_lines
from waiting import poll_until

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
TASK = "L0_pickup_red_cylinder"


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    # test/ on the path so that policy SPECs like ``test_node_policy:broken`` import in the subprocess
    test_dir = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (test_dir, os.environ.get("PYTHONPATH")) if p))
    # port 0: the live Foxglove server takes a free port, so tests never collide with a running viewer
    return subprocess.run([*ROBOFOLLOW, "bringup", *args, "--foxglove-port", "0"], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _results(run_dir: Path) -> list:  # type: ignore[type-arg]
    path = run_dir / "results.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else []
    except json.JSONDecodeError:
        return []


@pytest.mark.parametrize("mode", [[], ["--processes"]], ids=["one-process", "process-per-node"])
def test_bringup_sim_runs_the_trials_and_prints_the_table(tmp_path, mode):
    out = tmp_path / "run"
    done = _run("sim", *mode, "--no-render", "--tasks", TASK, "--rounds", "2", "--max-steps", "2",
                "--output", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hold over ROS" in done.stdout and "S2" in done.stdout
    how = "as processes" if mode else "in one process"  # the first line says what starts (then the nodes' own)
    assert done.stderr.startswith(f"robofollow bringup: starting 7 nodes {how} (sim_node, arm_bridge_node, "), \
        done.stderr[:300]
    results = _results(out)
    assert [r["round"] for r in results] == [1, 2] and all(r["policy_steps"] == 2 for r in results)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    # foxglove_node recorded every trial; each recording re-scores to the result the live trial produced
    recordings = sorted((out / "mcap").glob("*.mcap"))
    assert len(recordings) == 2
    for path, live in zip(recordings, results, strict=True):
        replay = subprocess.run([*ROBOFOLLOW, "replay", str(path), "--json"], capture_output=True, text=True,
                                timeout=120)
        assert replay.returncode == 0, replay.stderr
        replayed = json.loads(replay.stdout)["result"]
        assert (replayed["task"], replayed["intent_score"], replayed["exec_score"], replayed["frames"]) == (
            live["task"], live["intent_score"], live["exec_score"], live["frames"])


@pytest.mark.parametrize(("args", "words"), [
    (["--scene", "colour"], ["--scene", "colour"]),
    (["--levels", "L9"], ["--levels", "L9"]),
    (["--tasks", "no_such_task"], ["no_such_task"]),
    (["--rounds", "11"], ["--rounds", "11"]),
    (["--policy", "no_such_policy"], ["no_such_policy"]),
    (["--kwargs", "[1]"], ["--kwargs", "JSON object"]),
    (["--max-steps", "0"], ["--max-steps", "0"]),
    (["--profile", "/nonexistent/profile.yaml"], ["/nonexistent/profile.yaml"]),
    (["--driver-config", "no_such_driver"], ["--driver-config", "no_such_driver"]),
    (["--remap", "/a=/b"], ["--remap", "FROM:=TO"]),
    (["--calibration-dir", "/x"], ["--calibration-dir", "no perception_node"]),
    (["--privileged", "--policy", "openpi://127.0.0.1:9"], ["--privileged", "openpi://127.0.0.1:9"]),
])
def test_bad_input_exits_2_with_the_field_named(tmp_path, args, words):
    done = _run("sim", "--output", str(tmp_path / "run"), *args, timeout=60)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "Traceback" not in done.stderr and len(error_lines(done.stderr)) == 1
    for word in words:
        assert word in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("parameter", "words"), [
    ("warp_factor: 9", ["parameter 'warp_factor' is unknown"]),
    ("control_hz: 50", ["parameter 'control_hz'", "expected a float"]),
    ("control_hz: -5.0", ["parameter 'control_hz'", "must be > 0"]),
])
def test_a_bad_profile_parameter_exits_2_naming_file_node_and_parameter(tmp_path, parameter, words):
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"nodes:\n  - executable: policy_node\n    parameters: {{{parameter}}}\n"
                       "  - executable: trial_manager_node\n")
    done = _run("mock", "--profile", str(profile), "--output", str(tmp_path / "run"), timeout=60)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and str(profile) in line and "node policy_node" in line
    for word in words:
        assert word in line


def test_an_unreachable_policy_exits_at_once_naming_the_address(tmp_path):
    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
        done = _run("sim", "--policy", address, "--output", str(tmp_path / "run"), timeout=60)
    assert done.returncode == EXIT_POLICY_UNREACHABLE, done.stderr
    assert error_lines(done.stderr) == [
        f"robofollow bringup: error: policy {address} is unreachable: connection refused "
        "(is the server running on that port?)"]
    assert not (tmp_path / "run").exists()  # nothing started, nothing recorded


def test_a_foxglove_port_in_use_exits_naming_the_port_and_the_flag(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*ROBOFOLLOW, "bringup", "mock", "--foxglove-port", str(port), "--output",
                               str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_PORT_IN_USE, done.stderr
    assert len(error_lines(done.stderr)) == 1
    assert f"port {port} on 127.0.0.1" in done.stderr and "--foxglove-port" in done.stderr


def test_a_failing_policy_fails_its_trials_and_is_listed(tmp_path):
    done = _run("sim", "--no-render", "--policy", "test_node_policy:broken", "--tasks", TASK,
                "--max-steps", "2", "--output", str(tmp_path / "run"))
    # trials that could not be executed: a status of their own, not "ran and scored low" (0)
    assert done.returncode == EXIT_TRIALS_FAILED, done.stderr[-2000:]
    assert f"failed trial {TASK} r1: RuntimeError: model exploded" in done.stdout
    assert _results(tmp_path / "run")[0]["intent_score"] == 0.0


def test_non_empty_output_is_refused(tmp_path):
    (tmp_path / "old.txt").write_text("keep me")
    done = _run("sim", "--output", str(tmp_path), timeout=60)
    assert done.returncode == 2 and "not an empty directory" in done.stderr
    assert (tmp_path / "old.txt").read_text() == "keep me"


@pytest.mark.parametrize(("mode", "sig"), [([], signal.SIGTERM), (["--processes"], signal.SIGINT)])
def test_signal_stops_the_graph_cleanly_and_marks_the_run_interrupted(tmp_path, mode, sig):
    out = tmp_path / "run"
    proc = subprocess.Popen([*ROBOFOLLOW, "bringup", "sim", *mode, "--no-render", "--no-foxglove", "--tasks",
                             TASK, "--rounds", "3", "--max-steps", "1000000", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            start_new_session=True)
    lines: list[str] = []
    running = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "reset to L0_pickup_red_cylinder" in line:
                running.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert running.wait(timeout=120), "".join(lines[-30:])
        proc.send_signal(sig)
        assert proc.stdout is not None
        stdout = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(timeout=10)
    assert proc.returncode == 128 + sig, "".join(lines[-30:])
    assert f"stopped by signal {int(sig)}" in stdout
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and "interrupted" in run["error"]
    assert _results(out) == []  # the endless first trial was never scored
    assert "Traceback" not in "".join(lines)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _has_loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("moment", ["while the subcommands import", "while the node processes start"])
def test_ctrl_c_in_the_first_seconds_ends_cleanly(tmp_path, moment):
    """Ctrl-C at a terminal signals the whole foreground process group: it used to reach bringup inside an
    import (a KeyboardInterrupt traceback) and every node process still starting (one traceback each)."""
    proc = subprocess.Popen([*ROBOFOLLOW, "bringup", "mock", "--processes", "--no-foxglove", "--exit-when-done",
                             "--output", str(tmp_path / "run")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ), start_new_session=True)
    nodes: list[int] = []
    try:
        if moment == "while the subcommands import":  # main() runs: the CLI's modules pull numpy in
            assert poll_until(lambda: _has_loaded(proc.pid, "numpy"), 60)
        else:  # a node process importing its modules (before it can handle a signal)
            assert poll_until(lambda: any(_has_loaded(pid, "numpy") for pid in _children(proc.pid)), 120)
            nodes = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # as the terminal does: the foreground group
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, stderr[-3000:]
    assert "Traceback" not in stderr + stdout and "never retrieved" not in stderr, stderr[-3000:]
    assert poll_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in nodes), 30)  # no node left behind
