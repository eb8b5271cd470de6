"""The command line as people use it (issue 30): the installed console script in a subprocess, with real
sockets, real signals and real run directories."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
from pathlib import Path

from robofollow_ros.exit_status import EXIT_INTERRUPTED, EXIT_OK, EXIT_PORT_IN_USE
from test_cli_tasks import ROBOFOLLOW
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
