"""No orphans: the processes a supervisor starts end with it, even when it is killed with SIGKILL.

``robofollow bringup mock`` runs one process per node; killed with ``kill -9`` mid-run, none of its
node processes may survive it by more than 2 s (they used to run on: the trial manager alone, the
arm bridge and the policy node on DDS). The demo's policy server (``dry_run.served_policy``) dies
with the demo the same way. The bootstrap of ``child_process`` is checked on its own too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from robofollow_ros.child_process import PARENT_PID_ENV, child_command, child_env
from waiting import poll_until

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is ``pid``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]  # the command name may hold spaces and ')'
        if int(ppid) == pid and state != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_killed_bringup_leaves_no_node_behind(tmp_path):
    out = tmp_path / "run"
    bringup = subprocess.Popen([*ROBOFOLLOW, "bringup", "mock", "--policy", "hold", "--tasks", "L0_pickup_red_cylinder",
                                "--rounds", "10", "--max-steps", "400", "--output", str(out), "--foxglove-port", "0",
                                "--exit-when-done"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    nodes: list[int] = []
    try:
        # every node runs, and the trials have begun (the trial manager wrote its run.json)
        assert poll_until(lambda: len(children(bringup.pid)) >= 6 and (out / "run.json").is_file(), 120), \
            "bringup's node processes and its first trial did not start"
        nodes = children(bringup.pid)
        assert all("robofollow_ros.nodes." in command_line(pid) for pid in nodes)
        bringup.send_signal(signal.SIGKILL)
        bringup.wait(timeout=10)
        killed_at = time.monotonic()
        gone = poll_until(lambda: not any(alive(pid) for pid in nodes), 2.0)
        assert gone, f"left 2 s after bringup's SIGKILL: {[command_line(p) for p in nodes if alive(p)]}"
        assert time.monotonic() - killed_at <= 2.5
    finally:
        # nothing of this test outlives it, whatever happened above: bringup's group, and each node's own
        for group in (bringup.pid, *nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        bringup.wait(timeout=10)


def test_the_demos_policy_server_dies_with_the_demo(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from robofollow_ros.dry_run import served_policy

        with served_policy("hold", Path({str(tmp_path / "server.log")!r})) as spec:
            print(spec, flush=True)
            sys.stdin.read()  # until killed
    """)
    demo = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline().startswith("tcp://127.0.0.1:")
        servers = children(demo.pid)
        assert len(servers) == 1 and "serve" in command_line(servers[0])
        demo.send_signal(signal.SIGKILL)
        demo.wait(timeout=10)
        assert poll_until(lambda: not alive(servers[0]), 2.0), "the policy server outlived the demo's SIGKILL by 2 s"
    finally:
        os.killpg(demo.pid, signal.SIGKILL)
        demo.wait(timeout=10)


def test_the_bootstrap_runs_the_module_as_python_dash_m_would():
    done = subprocess.run(child_command("robofollow_ros.cli", ["--version"]), env=child_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("robofollow_ros ")


def test_a_child_whose_parent_died_before_it_armed_ends_at_once():
    """The race: the parent dies between spawning the child and the child arming the kernel's signal."""
    env = child_env()
    env[PARENT_PID_ENV] = str(2**22 + 1)  # a parent that is not ours: as if it had died already
    done = subprocess.run(child_command("robofollow_ros.cli", ["--version"]), env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -signal.SIGHUP and done.stdout == ""


def test_without_the_variable_nothing_is_armed():
    script = ("import os; os.environ.pop('ROBOFOLLOW_PARENT_PID', None); "
              "from robofollow_ros.child_process import follow_parent; print(follow_parent())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "False"


def test_an_orphan_whose_teardown_holds_the_interpreter_lock_still_ends_within_two_seconds():
    """The orphan's hard exit is faulthandler's C thread, not a Python timer: that one needs the interpreter lock,
    and a teardown inside a C call that keeps it (here a backtracking regex, for tens of seconds) delayed the
    exit by as long (``nodes._main.StopEvent``)."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join((str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")))}
    script = ("import sys, subprocess\n"
              "from robofollow_ros.child_process import child_command, child_env\n"
              "node = subprocess.Popen(child_command('gil_teardown_node'), env=child_env())\n"
              "print(node.pid, flush=True)\n"
              "sys.stdin.read()  # until killed\n")
    supervisor = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    node = 0
    try:
        assert supervisor.stdout is not None
        node = int(supervisor.stdout.readline())
        assert supervisor.stdout.readline().strip() == "spinning"  # the node's own line, through the same pipe
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait(timeout=10)
        killed_at = time.monotonic()
        assert poll_until(lambda: not alive(node), 2.0), "the orphan outlived its supervisor by 2 s"
        assert time.monotonic() - killed_at <= 2.5
    finally:
        for group in (supervisor.pid, node):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        supervisor.wait(timeout=10)
    assert supervisor.stderr is not None
    assert "Timeout (0:00:01)!" in supervisor.stderr.read()  # faulthandler's dump: where the teardown was stuck
