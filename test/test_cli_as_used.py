"""The command line as people use it (issue 30): the installed console script in a subprocess, with real
sockets, real signals and real run directories."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from robofollow_ros.exit_status import EXIT_PORT_IN_USE
from test_cli_tasks import ROBOFOLLOW


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
