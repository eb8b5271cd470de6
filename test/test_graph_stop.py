"""Every node of a running graph stops within 2 s of SIGINT, under load (issue 35): the sim graph and the mock graph,
one process per node (``robofollow bringup <graph> --processes``, Foxglove included), their policy served by
``robofollow serve`` (``marked_policy``: each predict takes 1 s and says when it starts), two CPU burners beside
them on the machine's cores. The signal comes while a predict is in flight (the served policy has started one and
not answered it), and reaches every node at once, as ``ros2 launch`` sends it on Ctrl-C; each node's time is from
that moment until its process is gone (or a zombie: bringup, its parent, reaps it), polled every 5 ms.

Measured on 2 shared cores (n = 11 per graph): every node 0.02–0.23 s; before ``nodes._main.leave_after_stop``,
0.2–3.9 s (n = 6 and 7; once a node that bringup SIGKILLed 13 s after the signal), most of it the interpreter's
finalization after the node's teardown had ended. The 5 s of policy_node that the issue saw came from a wait for
sim_node's render reply that the stop did not end (``test_node_stop``). The sim graph runs without rendering: its
renderer's warm-up (20–50 s here) would outlast the test's minute. The run is marked interrupted: the peers the
trial manager sees leave are leaving for the same Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from waiting import poll_until

REPO = Path(__file__).resolve().parents[1]
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
TASK = "L0_pickup_red_cylinder"
#: docs/ros.md: every node stops within 2 s of SIGINT (launch's grace before SIGTERM is 5 s).
STOP_BOUND_S = 2.0
#: How long each served predict takes: a signal polled for "in flight" lands well inside one.
PREDICT_S = 1.0
NODE_PREFIX = "robofollow_ros.nodes."
GRAPH_NODES = {
    "sim": {"sim_node", "arm_bridge_node", "robot_state_node", "policy_node", "stage_monitor_node",
            "trial_manager_node", "foxglove_node"},
    "mock": {"mock_hardware_node", "arm_bridge_node", "robot_state_node", "policy_node", "stage_monitor_node",
             "trial_manager_node", "foxglove_node"},
}
# exclusive: wall-clock bounds, run alone after the parallel phase (make test)
pytestmark = [pytest.mark.timeout(150), pytest.mark.exclusive]


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _node_name(pid: int) -> str | None:
    """The node executable a child of bringup runs (``python -m robofollow_ros.child_process <module> ...``)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return None
    return next((a.removeprefix(NODE_PREFIX) for a in args if a.startswith(NODE_PREFIX)), None)


def _in_flight(marker: Path) -> bool:
    """The served policy has started a predict, the second or a later one, and not answered it yet."""
    try:
        lines = marker.read_text().split()
    except OSError:
        return False
    return lines.count("start") >= 2 and lines[-1] == "start"


@pytest.mark.parametrize("graph", ["sim", "mock"])
def test_every_node_stops_within_two_seconds_of_sigint_beside_two_cpu_burners(tmp_path: Path, graph: str) -> None:
    env = {**os.environ, "ROS_LOG_DIR": str(tmp_path / "ros_log"),
           "PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "test"), os.environ.get("PYTHONPATH", "")))}
    marker, log = tmp_path / "predicts", tmp_path / "bringup.log"
    burners: list[subprocess.Popen[bytes]] = []
    server = bringup = None
    nodes: dict[str, int] = {}
    stopped: dict[str, float] = {}
    try:
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        server = subprocess.Popen(
            [*ROBOFOLLOW, "serve", "--policy", "marked_policy:make", "--port", "0",
             "--kwargs", json.dumps({"marker": str(marker), "latency_s": PREDICT_S})],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path,
            start_new_session=True)
        assert server.stdout is not None
        first = server.stdout.readline()  # "Policy server: HOST:PORT" once it listens
        assert first.startswith("Policy server:"), first
        port = int(first.rsplit(":", 1)[1])
        with log.open("wb") as out:
            bringup = subprocess.Popen(
                [*ROBOFOLLOW, "bringup", graph, "--processes", *(["--no-render"] if graph == "sim" else []),
                 "--policy", f"tcp://127.0.0.1:{port}", "--foxglove-port", "0", "--tasks", TASK, "--rounds", "3",
                 "--max-steps", "1000000", "--output", str(tmp_path / "run")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env, cwd=tmp_path,
                start_new_session=True)
        assert poll_until(lambda: _in_flight(marker), 90, interval_s=0.01), \
            f"no predict in flight within 90 s:\n{log.read_text()[-3000:]}"
        nodes = {name: pid for pid in _children(bringup.pid) if (name := _node_name(pid)) is not None}
        assert set(nodes) == GRAPH_NODES[graph], nodes

        signalled = time.monotonic()
        for pid in nodes.values():
            os.kill(pid, signal.SIGINT)

        def all_gone() -> bool:
            for name, pid in nodes.items():
                if name not in stopped and not _alive(pid):
                    stopped[name] = time.monotonic() - signalled
            return len(stopped) == len(nodes)

        poll_until(all_gone, 15, interval_s=0.005)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        # nothing of this test outlives it: bringup's and the server's groups, and each node's own
        for group in [p.pid for p in (bringup, server) if p is not None] + list(nodes.values()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        for proc in (bringup, server):
            if proc is not None:
                proc.wait(timeout=30)
    times = ", ".join(f"{n} {stopped[n]:.2f} s" if n in stopped else f"{n} still running"
                      for n in sorted(nodes, key=lambda n: -stopped.get(n, 99)))
    print(f"{graph}: stopped after SIGINT: {times}")
    assert len(stopped) == len(nodes) and max(stopped.values()) <= STOP_BOUND_S, times
    assert "Traceback" not in log.read_text(), log.read_text()[-5000:]
    # the run was interrupted, whichever peer the trial manager saw leave first (all of them stop for the Ctrl-C)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run["status"], run.get("error")) == ("failed", "interrupted before all trials ran"), run.get("error")
