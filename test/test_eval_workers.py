"""The evaluator never hangs: a worker that dies fails only its trial and is replaced, and every policy
call is bounded (``--policy-timeout``). Real worker processes, real signals, a real OOM kill, real sockets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.exit_status import EXIT_POLICY_UNREACHABLE, EXIT_TRIALS_FAILED
from test_cli_tasks import ROBOFOLLOW

pytestmark = pytest.mark.timeout(300)

FAST = EpisodeSettings(max_steps=2, actions_per_step=5)
SELECTION = ["--scene", "scene1,scene2", "--levels", "L0", "--limit", "2", "--rounds", "1", "--max-steps", "2",
             "--actions-per-step", "5", "--no-render"]
ORDER = ["L0_pickup_yellow_block_1_left", "L0_pickup_yellow_block_1_right", "L0_pickup_red_cylinder",
         "L0_pickup_left_cube"]
VICTIM = ORDER[1]  # the second trial: the worker that replaces the dead one must run the last two
DYING = "robofollow_ros.policy.drills.scripted:dying"
TIMED_OUT = "PolicyTimeoutError: policy predict: no answer within"


def _config(tmp_path: Path, **kw: Any) -> EvalConfig:
    base: dict[str, Any] = dict(policy=DYING, output=tmp_path / "run", scenes=("scene1", "scene2"), levels=("L0",),
                                rounds=1, limit=2, settings=FAST)
    base.update(kw)
    return EvalConfig(**base)


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    entries = json.loads((run_dir / "results.json").read_text())
    assert [e["task"] for e in entries] == ORDER  # every trial exactly once, in plan order
    return {e["task"]: e for e in entries}


def _assert_only_the_victim_failed(results: dict[str, dict[str, Any]], reason: str) -> None:
    victim = results[VICTIM]
    assert reason in victim["policy_error"], victim["policy_error"]
    assert victim["intent_score"] == 0.0 and not victim["completion_ok"]
    for task in ORDER:
        if task != VICTIM:  # the others ran to the end, exactly as hold runs them
            assert "policy_error" not in results[task], results[task].get("policy_error")
            assert results[task]["frames"] == 1 + 2 * 5 and results[task]["policy_steps"] == 2


def _cli_eval(tmp_path: Path, kwargs: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "eval", "--policy", DYING, "--kwargs", json.dumps(kwargs), *SELECTION,
                           "--workers", "1", "--output", str(tmp_path / "run"), *extra],
                          capture_output=True, text=True, timeout=280)


@pytest.mark.parametrize(("mode", "reason"), [
    ("abort", "worker process aborted (SIGABRT)"),
    ("os_exit", "worker process exited with status 3"),
    ("sigkill", "worker process was killed by SIGKILL"),
])
def test_a_worker_that_dies_fails_only_its_trial_and_is_replaced(tmp_path: Path, mode: str, reason: str) -> None:
    proc = _cli_eval(tmp_path, {"mode": mode, "task": VICTIM})
    assert proc.returncode == EXIT_TRIALS_FAILED, proc.stderr[-3000:]
    _assert_only_the_victim_failed(_results(tmp_path / "run"), reason)
    assert f"failed trial {VICTIM}" in proc.stdout and reason in proc.stdout
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "complete"


def _memory_cgroup(path_name: str) -> Path | None:
    """A fresh memory cgroup limited to 96 MiB (v1 or v2), or None where this process may not make one."""
    for root, limit_file in ((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                             (Path("/sys/fs/cgroup"), "memory.max")):
        group = root / path_name
        try:
            if limit_file == "memory.max" and "memory" not in (root / "cgroup.controllers").read_text():
                continue
            group.mkdir()
            (group / limit_file).write_text(str(96 * 1024 * 1024))
            return group
        except OSError:
            if group.is_dir():
                group.rmdir()
    return None


def test_a_worker_killed_by_the_oom_killer_fails_only_its_trial(tmp_path: Path) -> None:
    group = _memory_cgroup(f"robofollow-test-{os.getpid()}")
    if group is None:
        pytest.skip("needs a writable memory cgroup (root) to provoke a real, bounded OOM kill")
    try:
        proc = _cli_eval(tmp_path, {"mode": "oom", "task": VICTIM, "cgroup": str(group)})
    finally:
        group.rmdir()  # empty again: the OOM-killed worker was its only member
    assert proc.returncode == EXIT_TRIALS_FAILED, proc.stderr[-3000:]
    _assert_only_the_victim_failed(_results(tmp_path / "run"), "killed by SIGKILL from the kernel's out-of-memory")


@pytest.mark.parametrize("backend", ["local", "inline"])
def test_sys_exit_inside_an_in_process_policy_fails_its_trial(tmp_path: Path, backend: str) -> None:
    outcome = run_evaluation(_config(tmp_path, policy_kwargs={"mode": "exit", "task": VICTIM}, backend=backend))
    _assert_only_the_victim_failed(_results(tmp_path / "run"), "the policy called sys.exit(3)")
    assert outcome.replaced_workers == 0  # the worker lived on: nothing but the trial failed
    assert len(outcome.failed_trials) == 1 and outcome.failed_trials[0][0].startswith(f"{VICTIM}_r1_")


@pytest.mark.parametrize("backend", ["local", "inline"])
def test_a_sleeping_in_process_policy_times_out_and_the_run_goes_on(tmp_path: Path, backend: str) -> None:
    outcome = run_evaluation(_config(tmp_path, policy_kwargs={"mode": "sleep", "task": VICTIM, "sleep_s": 120},
                                     policy_timeout_s=2.0, backend=backend))
    _assert_only_the_victim_failed(_results(tmp_path / "run"), f"{TIMED_OUT} 2 s")
    assert outcome.replaced_workers == 1  # the stuck call cannot be stopped: a fresh worker or policy took over


def test_a_frozen_worker_is_killed_at_the_trial_deadline(tmp_path: Path) -> None:
    # SIGSTOP stops every thread of the worker, the timeout guard too: only the driver's deadline can answer.
    outcome = run_evaluation(_config(tmp_path, policy_kwargs={"mode": "freeze", "task": VICTIM}, trial_deadline_s=20.0))
    _assert_only_the_victim_failed(_results(tmp_path / "run"), "no result within 20 s; the worker was killed")
    assert outcome.replaced_workers == 1


def test_a_sleeping_remote_policy_times_out_and_the_run_goes_on(tmp_path: Path) -> None:
    marker = tmp_path / "slept"  # the server's policy sleeps 4 s once, on the victim's first predict
    kwargs = {"mode": "sleep", "task": VICTIM, "sleep_s": 4, "once_marker": str(marker)}
    server = subprocess.Popen([ROBOFOLLOW, "serve", "--policy", DYING, "--kwargs", json.dumps(kwargs), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # blocks until the server listens (or died: empty line)
        assert line.startswith("Policy server: 127.0.0.1:"), line
        spec = f"tcp://127.0.0.1:{line.rsplit(':', 1)[1].strip()}"
        # the served drill tells its victim by privileged.task_id, which only --privileged sends over the wire
        proc = subprocess.run([ROBOFOLLOW, "eval", "--policy", spec, "--privileged", "--policy-timeout", "3",
                               *SELECTION, "--output", str(tmp_path / "run")], capture_output=True, text=True,
                              timeout=280)
    finally:
        server.kill()
        server.wait(30)
    assert proc.returncode == EXIT_TRIALS_FAILED, proc.stderr[-3000:]
    assert marker.exists()  # the server's policy really slept
    _assert_only_the_victim_failed(_results(tmp_path / "run"), f"{TIMED_OUT} 3 s")


def test_an_unreachable_policy_server_stops_the_run_before_any_trial(tmp_path: Path) -> None:
    """As bringup: one line naming the address once, in seconds -- checked before the first worker, whose client
    would retry its connection 20 times (about a minute) with the default kwargs used here."""
    import socket
    import time

    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
        started = time.monotonic()
        proc = subprocess.run([ROBOFOLLOW, "eval", "--policy", address, *SELECTION, "--output", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=280)
        took = time.monotonic() - started
    assert proc.returncode == EXIT_POLICY_UNREACHABLE, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        f"robofollow eval: error: policy {address} is unreachable: connection refused "
        "(is the server running on that port?)"]
    assert took < 20, f"{took:.1f} s: the worker's reconnects ran"
    assert not (tmp_path / "run").exists()  # checked before the run directory: the same command runs once it is up


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
