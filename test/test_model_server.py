"""The model-side package (model_server/, ``robofollow_model_server``) against our real clients.

The server runs in its own process with nothing of ours on its path but the package and the test
policies (``PYTHONPATH=model_server:test``), as it would in a model's environment; ``tcp://`` and
``openpi://`` clients from robofollow_ros (and openpi's own openpi-client) drive it over real
sockets. The policy answers with a digest of what it received, so equal digests prove that every
image byte, the joints and the instruction crossed both wires intact. Shutdown: SIGTERM ends the
process with status 0 and closes the policy, also with a torch call in progress, never with the
"terminate called without an active exception" abort of issue 25 (the same for ``robofollow serve``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from openpi_client.websocket_client_policy import WebsocketClientPolicy

from model_server_doubles import digest_row
from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.robofollow.codec import decode_message, encode_message

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'model_server'}{os.pathsep}{ROOT / 'test'}",
               "PYTHONUNBUFFERED": "1"}
MODEL_SERVER = [sys.executable, "-m", "robofollow_model_server"]
ROBOFOLLOW_SERVE = [sys.executable, "-m", "robofollow_ros.cli", "serve"]
pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")]


@contextmanager
def serving(command: list[str], *args: str,
            env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen([*command, "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env or PACKAGE_ENV, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until listening, or the process died (empty line)
        assert line.startswith("Policy server: 127.0.0.1:"), (line, proc.stderr.read() if proc.stderr else "")
        yield proc, int(line.rsplit(":", 1)[1])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def stop(proc: subprocess.Popen[str], signals: int = 1, timeout_s: float = 40) -> tuple[int, str]:
    """SIGTERM; with ``signals=2`` a second one once the server says it is stopping (two at once
    would reach Python's handler as one)."""
    proc.send_signal(signal.SIGTERM)
    seen = ""
    if signals == 2:
        assert proc.stderr is not None
        while "stopping" not in (line := proc.stderr.readline()):
            assert line, "the server ended without saying it was stopping"
            seen += line
        seen += line
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, seen + err


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout_s} s"
        time.sleep(0.02)


def test_tcp_clients_get_what_the_policy_saw_byte_for_byte_and_sigterm_exits_0(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    with serving(MODEL_SERVER, "--policy", "model_server_doubles:digest", "--kwargs",
                 f'{{"chunk": 5, "close_marker": "{marker}"}}') as (proc, port):
        for episode in (1, 2):  # a second client: the policy passes from one connection to the next
            client = load_policy(f"tcp://127.0.0.1:{port}", {"timeout_s": 30, "connect_attempts": 2})
            client.reset()
            client.set_instruction("pick the cube")
            for step in (1, 2):
                obs = make_observation(seed=10 * episode + step, instruction="pick the cube")
                actions = client.predict(obs)
                assert actions.shape == (5, 14) and actions.dtype == np.float32
                np.testing.assert_array_equal(actions[0], np.float32(obs["joint_action"]["vector"]))
                np.testing.assert_array_equal(actions[1], np.float32(digest_row(obs, "pick the cube", episode, step)))
            client.close()
        assert not marker.exists()
        status, err = stop(proc)
    assert status == 0, err
    assert marker.read_text() == "closed" and "terminate called" not in err


def test_openpi_clients_ours_and_openpis_get_the_policy_answers(tmp_path: Path) -> None:
    with serving(MODEL_SERVER, "--policy", "model_server_doubles:digest", "--protocol", "openpi") as (proc, port):
        client = load_policy(f"openpi://127.0.0.1:{port}", {"timeout_s": 30, "connect_attempts": 2})
        assert client.server_info() == {"policy": "model_server_doubles:digest", "server": "robofollow-model-server"}
        client.set_instruction("stack the cups")
        obs = make_observation(seed=3, instruction="stack the cups")
        actions = client.predict(obs)
        sent = to_openpi_observation(obs, "stack the cups")  # what went over the wire: 224×224 CHW
        seen = {"observation": {key: {"rgb": sent["images"][name].transpose(1, 2, 0)} for key, name in
                                (("head_camera", "cam_high"), ("left_camera", "cam_left_wrist"),
                                 ("right_camera", "cam_right_wrist"))}}
        np.testing.assert_array_equal(actions[0], np.float32(obs["joint_action"]["vector"]))
        np.testing.assert_array_equal(actions[1], np.float32(digest_row(seen, "stack the cups", 1, 1)))
        client.close()
        peer = WebsocketClientPolicy("127.0.0.1", port)  # openpi's own client
        reply = peer.infer({**sent, "prompt": "another task"})
        assert reply["actions"].shape == (4, 14) and set(reply["server_timing"]) == {"infer_ms"}
        assert reply["actions"][1][9] == np.float32(digest_row(seen, "another task", 1, 1)[9])
        bad = {**sent, "state": np.zeros(13, np.float32)}
        with pytest.raises(Exception, match="state: 13 values; expected 14"):
            WebsocketClientPolicy("127.0.0.1", port).infer(bad)
        status, err = stop(proc)  # openpi's client is still connected: shutdown closes it
    assert status == 0 and "terminate called" not in err, err


def _raw_call(sock: socket.socket, body: bytes) -> dict:
    sock.sendall(struct.pack(">I", len(body)) + body)
    length = struct.unpack(">I", sock.recv(4, socket.MSG_WAITALL))[0]
    return decode_message(sock.recv(length, socket.MSG_WAITALL))


def test_bad_requests_get_one_line_errors_and_the_connection_stays_in_step() -> None:
    with serving(MODEL_SERVER, "--policy", "model_server_doubles:digest") as (proc, port):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            obs = make_observation(seed=1)
            pickled = (b'{"cmd": "predict", "obs": {"__numpy_array__": true, "data": "", "dtype": "object", '
                       b'"shape": []}}')
            assert "dtype: 'object' is not a bool, integer or float" in _raw_call(sock, pickled)["error"]
            obs["joint_action"]["vector"] = np.zeros(13)
            assert _raw_call(sock, encode_message({"cmd": "predict", "obs": obs}))["error"] == \
                "joint_action.vector: 13 values; expected 14"
            huge = (b'{"cmd": "predict", "obs": {"__numpy_array__": true, "data": "AAAA", "dtype": "uint8", '
                    b'"shape": [1000000000000]}}')
            assert "do not match shape" in _raw_call(sock, huge)["error"]
            assert "unknown command 'fly'" in _raw_call(sock, b'{"cmd": "fly"}')["error"]
            nested = b"[" * 200_000 + b"]" * 200_000
            assert "more than 100,000 JSON objects/arrays" in _raw_call(sock, nested)["error"]
            assert _raw_call(sock, encode_message({"cmd": "reset"})) == {"res": None}  # still in step
            sock.sendall(struct.pack(">I", 0))  # a bad frame length: dropped silently, like the reference
            assert sock.recv(1) == b""
        assert stop(proc)[0] == 0


def test_the_package_imports_nothing_of_robofollow_ros_ros_sapien_or_torch() -> None:
    probe = ("import sys, robofollow_model_server.__main__, robofollow_model_server.tcp, "
             "robofollow_model_server.openpi;"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'robofollow_ros', 'rclpy', 'sapien', 'torch'}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=PACKAGE_ENV, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    pyproject = (ROOT / "model_server" / "pyproject.toml").read_text()
    assert 'dependencies = ["numpy>=1.22", "msgpack>=1.0", "websockets>=13"]' in pyproject


def _predict_in_background(port: int) -> threading.Thread:
    def call() -> None:
        client = load_policy(f"tcp://127.0.0.1:{port}", {"timeout_s": 60, "connect_attempts": 2})
        with contextlib.suppress(ConnectionError, RemotePolicyError):  # the server goes away mid-call
            client.predict(make_observation(seed=1))
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("command", [MODEL_SERVER, ROBOFOLLOW_SERVE], ids=["model-server", "robofollow-serve"])
def test_sigterm_during_a_torch_call_finishes_it_closes_the_policy_and_exits_0(command: list[str],
                                                                              tmp_path: Path) -> None:
    """The call in progress (1.5 s inside torch) completes before the policy is closed and Python exits."""
    started, marker = tmp_path / "started", tmp_path / "closed"
    kwargs = f'{{"busy_s": 1.5, "started": "{started}", "close_marker": "{marker}"}}'
    with serving(command, "--policy", "model_server_doubles:torch_policy", "--kwargs", kwargs) as (proc, port):
        _predict_in_background(port)
        wait_for(started)
        status, err = stop(proc)
    assert status == 0, err[-2000:]
    assert "terminate called" not in err and marker.read_text() == "closed"


@pytest.mark.parametrize("command", [MODEL_SERVER, ROBOFOLLOW_SERVE], ids=["model-server", "robofollow-serve"])
def test_a_second_sigterm_leaves_a_hung_torch_call_without_aborting(command: list[str], tmp_path: Path) -> None:
    """Issue 25's abort: Python finalizing under a thread inside torch. A call that would run 60 s is
    left behind at the second signal; the process exits 0 at once, without the C++ abort."""
    started = tmp_path / "started"
    with serving(command, "--policy", "model_server_doubles:torch_policy", "--kwargs",
                 f'{{"busy_s": 60, "started": "{started}"}}') as (proc, port):
        _predict_in_background(port)
        wait_for(started)
        began = time.monotonic()
        status, err = stop(proc, signals=2)
    assert status == 0, err[-2000:]
    assert "terminate called" not in err and "leaving without waiting" in err
    assert time.monotonic() - began < 10


def test_a_blocking_close_is_left_behind_at_the_grace_and_the_exit_is_0(tmp_path: Path) -> None:
    marker = tmp_path / "close"
    with serving(MODEL_SERVER, "--policy", "model_server_doubles:digest", "--grace", "2", "--kwargs",
                 f'{{"close_marker": "{marker}", "close_mode": "block"}}') as (proc, _port):
        began = time.monotonic()
        status, err = stop(proc)
    assert status == 0, err[-2000:]
    assert marker.read_text() == "closing" and "leaving without waiting for model-server-close" in err
    assert time.monotonic() - began < 15  # the grace (2 s) and the process' start-up margin, not the 600 s close
    assert "Traceback" not in err


def test_a_second_signal_during_a_blocking_close_exits_at_once(tmp_path: Path) -> None:
    marker = tmp_path / "close"
    with serving(MODEL_SERVER, "--policy", "model_server_doubles:digest", "--grace", "300", "--kwargs",
                 f'{{"close_marker": "{marker}", "close_mode": "block"}}') as (proc, _port):
        proc.send_signal(signal.SIGTERM)
        wait_for(marker)  # close() has started (and blocks)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert time.monotonic() - began < 10 and "leaving without waiting for model-server-close" in err


@pytest.mark.parametrize("protocol", ["robofollow", "openpi"])
def test_a_raising_close_is_one_line_and_the_exit_is_0(protocol: str) -> None:
    with serving(MODEL_SERVER, "--protocol", protocol, "--policy", "model_server_doubles:digest", "--kwargs",
                 '{"close_mode": "raise"}') as (proc, _port):
        status, err = stop(proc)
    assert status == 0, err[-2000:]
    assert "policy close() failed: RuntimeError: could not release the model's device\n" in err
    assert "Traceback" not in err and "second line" not in err


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--idle-timeout", "-1", "expected a finite number > 0"),
    ("--frame-timeout", "nan", "expected a finite number > 0"),
    ("--max-connections", "0", "expected a finite number >= 1"), ("--max-connections", "2.5", "is not an integer"),
    ("--busy-wait", "-3", "expected a finite number >= 0"), ("--grace", "inf", "expected a finite number >= 0")])
def test_a_bad_bound_exits_2_naming_the_flag_and_the_value(flag: str, value: str, expected: str) -> None:
    """Checked by argparse before the policy loads or a port is bound: never a server that refuses every
    connection (``--max-connections 0``) or closes it at once (a negative timeout)."""
    proc = subprocess.run([*MODEL_SERVER, "--policy", "model_server_doubles:digest", "--port", "0", flag, value],
                          capture_output=True, text=True, env=PACKAGE_ENV, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and not proc.stdout, proc.stdout
    separator = ": " if "finite" in expected else " "
    assert proc.stderr == f"error: argument {flag}: {value!r}{separator}{expected} (see --help)\n"
