"""The exit statuses of ``robofollow_ros.cli._common`` where this issue set them: trials that could not be
executed (``eval``), a port in use (``serve``), and the checks ``bringup`` makes before the first trial
(``preflight``: a policy server that cannot be reached, or that does not answer ``reset``)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from robofollow_ros.exit_status import EXIT_OK, EXIT_PORT_IN_USE, EXIT_TRIALS_FAILED
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.preflight import PolicyUnreachable, PortInUse, port_free, reach_policy

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
ONE_TRIAL = ["--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--max-steps", "1", "--no-render"]


@pytest.mark.parametrize(("policy", "status"), [
    (["--policy", "hold"], EXIT_OK),  # ran and scored low: a result, not a failure
    (["--policy", "robofollow_ros.policy.drills.scripted:faulty", "--kwargs", '{"mode": "raise"}'], EXIT_TRIALS_FAILED),
])
def test_eval_tells_trials_that_could_not_run_from_low_scores(tmp_path, policy, status):
    done = subprocess.run([*ROBOFOLLOW, "eval", *policy, *ONE_TRIAL, "--output", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == status, done.stderr[-2000:]


@pytest.mark.parametrize("protocol", ["robofollow", "openpi"])
def test_serve_on_a_port_in_use_names_the_port_and_the_flag(protocol):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*ROBOFOLLOW, "serve", "--policy", "hold", "--protocol", protocol, "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_PORT_IN_USE, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"robofollow serve: error: port {port} on 127.0.0.1 is in use; stop what holds it or choose another "
        "with --port (0 picks a free port)"]


def test_a_served_policy_is_reached_and_a_silent_one_is_not():
    with RoboFollowTcpServer(HoldPolicy(), "127.0.0.1", 0) as server:
        server.start()
        reach_policy(f"tcp://127.0.0.1:{server.address[1]}")  # connect + reset: no error
        assert server.stats["requests"] >= 1
    with socket.socket() as silent:  # accepts connections (the backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(PolicyUnreachable, match=rf"policy {address}: reset failed"):
            reach_policy(address, reset_timeout_s=1.0)


def test_port_free_names_the_flag():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=rf"port {port} on 127\.0\.0\.1 \(the view\) is in use.*--view-port"):
            port_free("127.0.0.1", port, "the view", "--view-port")
    port_free("127.0.0.1", 0, "the view", "--view-port")  # any free port: always fine
