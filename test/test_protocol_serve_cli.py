"""``robofollow serve`` in its own process: both protocols, clean shutdown on SIGTERM/SIGINT
(policy closed), and bad input answered with exit code 2 and a one-line message."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from openpi_client.websocket_client_policy import WebsocketClientPolicy

from robofollow_ros.exit_status import EXIT_PORT_IN_USE
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.echo import instruction_code
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
pytestmark = [
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning"),
    pytest.mark.timeout(120),  # a server that never prints its line must not stall the suite
]


@contextmanager
def serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Start ``robofollow serve ... --port 0`` and yield it with the port from its first line."""
    proc = subprocess.Popen([*ROBOFOLLOW, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until listening (or the process died: empty line)
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield proc, int(line.rsplit(":", 1)[1])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_tcp_serve_gives_the_same_actions_as_the_in_process_policy_and_closes_on_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    kwargs = f'{{"chunk_size": 4, "close_marker": "{marker}"}}'
    with serving("--policy", "robofollow_ros.policy.drills.scripted:recording", "--kwargs", kwargs) as (proc, port):
        remote = load_policy(f"tcp://127.0.0.1:{port}", {"timeout_s": 30, "connect_attempts": 2})
        local = load_policy("robofollow_ros.policy.drills.scripted:recording", {"chunk_size": 4})
        for policy in (remote, local):
            policy.reset()
            policy.set_instruction("pick the cube")
        for seed in range(3):
            obs = make_observation(seed)
            np.testing.assert_array_equal(remote.predict(obs), local.predict(obs))
        remote.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert marker.read_text() == "closed\n"


def test_tcp_serve_debug_flag_controls_tracebacks() -> None:
    for debug, expect_full in (((), False), (("--debug",), True)):
        with serving("--policy", "robofollow_ros.policy.drills.scripted:faulty", *debug) as (proc, port):
            remote = load_policy(f"tcp://127.0.0.1:{port}", {"timeout_s": 30})
            with pytest.raises(RemotePolicyError) as info:
                remote.predict(make_observation())
            assert ("Traceback (most recent call last)" in info.value.remote_traceback) is expect_full
            remote.close()
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0


def test_a_hung_policy_times_out_and_sigterm_still_stops_the_server() -> None:
    args = ("--policy", "robofollow_ros.policy.drills.scripted:faulty", "--kwargs", '{"mode": "hang"}',
            "--policy-timeout", "0.3")
    with serving(*args) as (proc, port):
        remote = load_policy(f"tcp://127.0.0.1:{port}", {"timeout_s": 30})
        with pytest.raises(RemotePolicyError, match=r"no answer within 0\.3 s"):
            remote.predict(make_observation())
        remote.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0  # the stuck call (a 600 s hang) does not keep the process alive


def test_openpi_serve_answers_the_openpi_client() -> None:
    with serving("--protocol", "openpi", "--policy", "hold", "--kwargs", '{"chunk_size": 50}') as (proc, port):
        client = WebsocketClientPolicy("127.0.0.1", port)
        assert client.get_server_metadata() == {"policy": "hold"}
        request = to_openpi_observation(make_observation(seed=2), "pick the cube")
        actions = client.infer(request)["actions"]
        np.testing.assert_array_equal(actions, HoldPolicy(50).predict({"joint_action": {"vector": request["state"]}}))
        via_spec = load_policy(f"openpi://127.0.0.1:{port}", {"timeout_s": 30})
        assert via_spec.predict(make_observation()).shape == (50, 14)
        via_spec.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--policy", "nonsense"], "policy spec 'nonsense'"),
        (["--policy", "hold", "--kwargs", "{bad"], "--kwargs"),
        (["--policy", "hold", "--kwargs", "[1]"], "must be a JSON object"),
        (["--policy", "hold", "--kwargs", '{"chunk_size": 0}'], "chunk_size"),
        (["--policy", "hold", "--port", "70000"], "--port: must be an integer in 0..65535, got '70000'"),
        (["--policy", "hold", "--policy-timeout", "0"], "--policy-timeout"),
        (["--policy", "hold", "--host", "203.0.113.1"], "cannot listen on 203.0.113.1"),
        (["--policy", "hold", "--max-connections", "0"], "--max-connections: must be an integer in 1..10000, got '0'"),
        (["--policy", "hold", "--frame-timeout", "0"], "--frame-timeout"),
        (["--policy", "hold", "--batch-size", "4"], "no predict_batch"),
        (["--policy", "robofollow_ros.policy.drills.scripted:recording", "--batch-size", "4"], "no shareable = True"),
        (["--policy", "robofollow_ros.policy.drills.echo:shared_echo", "--batch-size", "4", "--batch-wait-ms", "-1"],
         "--batch-wait-ms"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_the_field(args: list[str], fragment: str) -> None:
    result = subprocess.run([*ROBOFOLLOW, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_a_port_in_use_exits_6_with_one_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run([*ROBOFOLLOW, "serve", "--policy", "hold", "--port", str(port)], capture_output=True,
                                text=True, timeout=60)
    assert result.returncode == EXIT_PORT_IN_USE
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr and "Traceback" not in result.stderr


def test_openpi_serve_batches_a_shareable_policy_and_each_client_keeps_its_prompt() -> None:
    args = ("--protocol", "openpi", "--policy", "robofollow_ros.policy.drills.echo:shared_echo", "--kwargs",
            '{"delay_s": 0.05}', "--batch-size", "4", "--batch-wait-ms", "200")
    with serving(*args) as (proc, port):
        clients = [WebsocketClientPolicy("127.0.0.1", port) for _ in range(6)]
        codes: dict[int, list[float]] = {}

        def ask(i: int) -> None:
            request = to_openpi_observation(make_observation(), f"prompt {i}")
            codes[i] = [float(clients[i].infer(request)["actions"][0, 0]) for _ in range(3)]

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(clients))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert codes == {i: [instruction_code(f"prompt {i}")] * 3 for i in range(len(clients))}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert "shared sessions, batches of up to 4" in (proc.stderr.read() if proc.stderr else "")
