"""Every command that writes a run directory holds its lock: a second ``robofollow collect`` or ``owda eval``
into a directory another one is writing is refused in one line naming the holder (exit 5, like ``eval``),
touches nothing there, and the kernel drops a killed holder's lock; a read-only output is one line and
exit 5 too. Real processes, real ``flock``, a real read-only filesystem."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.datasets.collect import CollectConfig, open_output
from robofollow_ros.datasets.video import VideoSettings
from robofollow_ros.exit_status import EXIT_OK, EXIT_OUTPUT_UNUSABLE
from robofollow_ros.rundir.layout import DATASET_META_FILE, LOCK_FILE, METRICS_FILE, PREDICTIONS_FILE
from test_owda_chat_endpoint import ChatServer, small_suite  # noqa: F401 (a fixture)
from test_rundir_safety import _remount, _tmpfs
from waiting import poll_until

pytestmark = pytest.mark.timeout(300)

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]


def _files(root: Path) -> dict[str, bytes]:
    """Every result file under ``root`` (the lock file aside), with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != LOCK_FILE}


def _refused_by(proc: subprocess.CompletedProcess[str], holder_pid: int, holder_command: str) -> None:
    assert proc.returncode == EXIT_OUTPUT_UNUSABLE, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"in use by pid {holder_pid}" in errors[0] and holder_command in errors[0], errors[0]


def test_a_second_collect_into_a_busy_dataset_is_refused_naming_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    args = ["--tasks", "pickup_yellow_block_2", "--episodes-per-task", "20", "--image-size", "32x24",
            "--vcodec", "h264"]
    first = subprocess.Popen([*ROBOFOLLOW, "collect", "--output", str(out), *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        lock, identity = out / LOCK_FILE, out / DATASET_META_FILE
        # the lock is taken, then the settings a --resume is checked against are written (atomically):
        # stopped before that, the final check would find a dataset with nothing to resume
        assert poll_until(lambda: lock.is_file() and f'"pid": {first.pid}' in lock.read_text()
                          and identity.is_file(), 120)
        os.killpg(first.pid, signal.SIGSTOP)  # alive and holding the lock, but writing nothing more
        before = _files(out)
        second = subprocess.run([*ROBOFOLLOW, "collect", "--output", str(out), *args, "--resume"],
                                capture_output=True, text=True, timeout=120)
        _refused_by(second, first.pid, "collect --output")
        assert _files(out) == before
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    config = CollectConfig(output=out, tasks=("pickup_yellow_block_2",), episodes_per_task=20, width=32, height=24,
                           resume=True, video=VideoSettings("h264"))
    with open_output(config) as directory:  # the kernel dropped the killed collection's lock
        assert directory.recorded_identity is not None and directory.recorded_identity["episodes_per_task"] == 20


def test_a_second_owda_eval_into_a_busy_output_is_refused_and_a_killed_ones_output_resumes(
        small_suite: Any, tmp_path: Path) -> None:  # noqa: F811
    suite, suite_dir = small_suite
    server = ChatServer({a.anchor_id: a for a in suite.anchors})
    gate = threading.Event()  # the server holds its first answer until the test opens the gate
    answer = server.answer
    server.answer = lambda body: answer(body) if gate.wait(120) else 500  # type: ignore[method-assign]
    server.thread.start()
    out = tmp_path / "owda"
    argv = [*ROBOFOLLOW, "owda", "eval", "--suite", str(suite_dir), "--model", f"openai:{server.url}?model=m",
            "--output", str(out), "--timeout", "120"]
    try:
        first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            assert poll_until(lambda: server.requests, 120)  # it holds the lock and waits for its first answer
            before = _files(out)
            _refused_by(subprocess.run(argv, capture_output=True, text=True, timeout=120), first.pid, "owda eval")
            assert _files(out) == before and len(server.requests) == 1
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        gate.set()
        resumed = subprocess.run(argv, capture_output=True, text=True, timeout=240)
        assert resumed.returncode == EXIT_OK, resumed.stderr[-3000:]
        rows = (out / PREDICTIONS_FILE).read_text().splitlines()
        assert len(rows) == sum(len(f.instances) for f in suite.families) and (out / METRICS_FILE).is_file()
        assert not (out / LOCK_FILE).exists()
    finally:
        gate.set()
        server.httpd.shutdown()
        server.httpd.server_close()


def test_owda_eval_into_a_read_only_output_is_one_line_and_exit_5(small_suite: Any, tmp_path: Path) -> None:  # noqa: F811
    _, suite_dir = small_suite
    with _tmpfs(tmp_path / "fs", "16m") as fs:
        argv = [*ROBOFOLLOW, "owda", "eval", "--suite", str(suite_dir), "--model", "reference", "--output",
                str(fs / "out")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == EXIT_OK, done.stderr[-3000:]
        before = _files(fs / "out")
        _remount(fs, "ro")
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        finally:
            _remount(fs, "rw")
        assert proc.returncode == EXIT_OUTPUT_UNUSABLE, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert "Read-only file system" in errors[0] and errors[0].endswith("run the same command again"), errors[0]
        assert _files(fs / "out") == before
