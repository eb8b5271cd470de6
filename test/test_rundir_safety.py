"""Run directory safety: one evaluator per directory, a kill at any point leaves a directory that
``--resume`` completes, and a read-only directory or a full disk gets one line and exit 5 with nothing
recorded lost. Real processes, real SIGKILLs, real read-only and full filesystems (tmpfs)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.exit_status import EXIT_OK, EXIT_OUTPUT_UNUSABLE
from robofollow_ros.rundir.store import RunStore
from test_cli_tasks import ROBOFOLLOW
from waiting import poll_until

pytestmark = pytest.mark.timeout(300)

SELECTION = ["--scene", "scene1", "--levels", "L0", "--limit", "2", "--rounds", "2", "--max-steps", "2",
             "--actions-per-step", "5", "--no-render"]
#: The trials of SELECTION in plan order.
PLAN = [(task, r) for task in ("L0_pickup_yellow_block_1_left", "L0_pickup_yellow_block_1_right") for r in (1, 2)]


def _eval(run_dir: Path, *extra: str, policy: str = "hold") -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "eval", "--policy", policy, *SELECTION, "--output", str(run_dir), *extra],
                          capture_output=True, text=True, timeout=280)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


def _wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    assert poll_until(condition, timeout), f"timed out waiting for {what}"


def _stored(run_dir: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{run_dir / 'results.sqlite'}?mode=ro", uri=True)) as db:
            return int(db.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0


def _assert_complete(run_dir: Path) -> list[dict[str, Any]]:
    results = json.loads((run_dir / "results.json").read_text())
    keys = [(e["task"], e["round"]) for e in results]
    assert keys == PLAN  # every trial exactly once, in plan order
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    with RunStore(run_dir / "results.sqlite") as store:
        assert sorted((t["task"], t["round"]) for t in store.trials()) == sorted(keys)
    assert not [p.name for p in run_dir.rglob("*.tmp")]  # stale temporaries swept
    return results


def test_a_second_evaluator_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # The first run's first call sleeps (and leaves the marker); the same policy resumes it without sleeping.
    sleeper = ["--policy", "robofollow_ros.policy.drills.scripted:dying", "--kwargs",
               json.dumps({"mode": "sleep", "sleep_s": 600, "once_marker": str(tmp_path / "slept")}),
               "--policy-timeout", "600"]
    first = subprocess.Popen([ROBOFOLLOW, "eval", *sleeper, *SELECTION, "--output", str(run_dir)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        lock = run_dir / ".robofollow.lock"
        _wait_for(lambda: lock.is_file() and f'"pid": {first.pid}' in lock.read_text(), "the first run's lock")
        second = _eval(run_dir, "--resume", *sleeper)
        assert second.returncode == EXIT_OUTPUT_UNUSABLE, second.stderr
        errors = _error_lines(second.stderr)
        assert len(errors) == 1 and "Traceback" not in second.stderr
        assert f"in use by pid {first.pid}" in errors[0]
        assert "eval --policy robofollow_ros.policy.drills.scripted:dying" in errors[0]  # the holder's command line
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    resumed = _eval(run_dir, "--resume", *sleeper)  # the kernel dropped the dead holder's lock
    assert resumed.returncode == EXIT_OK, resumed.stderr
    _assert_complete(run_dir)


# Where a child evaluator SIGKILLs itself: (function to patch, condition on its arguments).
KILL_POINTS = {
    "lock taken, nothing written": ("robofollow_ros.rundir.directory.sweep_temporaries", "True"),
    "run.json half written": ("robofollow_ros.rundir.atomic.os.replace", "str(args[1]).endswith('run.json')"),
    "run.json written, no SQLite yet": ("robofollow_ros.rundir.directory.RunStore", "True"),
    "SQLite created, run row not yet in it": ("robofollow_ros.rundir.store.RunStore.upsert_run", "True"),
    "trial committed to SQLite, results.json not rewritten": (
        "robofollow_ros.rundir.directory.RunDirectory.write_json", "args[1] == 'results.json' and args[2]"),
}

CHILD = textwrap.dedent("""
    import importlib, os, signal, sys
    target, condition = sys.argv[1], sys.argv[2]
    module_name, _, attr = target.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except ImportError:  # a method: module.Class.method
        module_name, _, cls = module_name.rpartition(".")
        owner = getattr(importlib.import_module(module_name), cls)
    original = getattr(owner, attr)
    def killer(*args, **kwargs):
        if eval(condition):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    setattr(owner, attr, killer)
    from robofollow_ros.cli import main
    sys.exit(main(sys.argv[3:]))
""")


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_kill_at_any_point_leaves_a_directory_that_resume_completes(tmp_path: Path, point: str) -> None:
    run_dir = tmp_path / "run"
    target, condition = KILL_POINTS[point]
    argv = ["eval", "--policy", "hold", *SELECTION, "--backend", "inline", "--output", str(run_dir)]
    child = subprocess.run([sys.executable, "-c", CHILD, target, condition, *argv], capture_output=True, text=True,
                           timeout=280)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    written = [p.name for p in run_dir.iterdir() if p.name != ".robofollow.lock" and not p.name.endswith(".tmp")]
    if written:  # a new run must not take over a directory a killed run wrote results into
        fresh = _eval(run_dir)
        assert fresh.returncode == 2 and "--resume" in fresh.stderr, fresh.stderr
    resumed = _eval(run_dir, "--resume")
    assert resumed.returncode == EXIT_OK, resumed.stderr[-3000:]
    _assert_complete(run_dir)


def test_resume_completes_a_directory_left_by_the_old_write_order(tmp_path: Path) -> None:
    # Before run directories were locked, the store was created before run.json: a kill in between left this.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunStore(run_dir / "results.sqlite").close()
    resumed = _eval(run_dir, "--resume")
    assert resumed.returncode == EXIT_OK, resumed.stderr[-3000:]
    _assert_complete(run_dir)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"needs root to mount a small tmpfs (a real read-only / full filesystem): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


def test_a_read_only_directory_gets_one_line_and_loses_nothing(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "fs", "16m") as fs:
        run_dir = fs / "run"
        done = _eval(run_dir)
        assert done.returncode == EXIT_OK, done.stderr[-3000:]
        before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
        _remount(fs, "ro")
        try:
            for argv in ([], ["--resume"]):  # a new run beside it, and a resume of it
                target = fs / "other" if not argv else run_dir
                proc = _eval(target, *argv)
                assert proc.returncode == EXIT_OUTPUT_UNUSABLE, proc.stderr
                errors = _error_lines(proc.stderr)
                assert len(errors) == 1 and "Read-only file system" in errors[0] and "Traceback" not in proc.stderr
            assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
        finally:
            _remount(fs, "rw")
        again = _eval(run_dir, "--resume")
        assert again.returncode == EXIT_OK, again.stderr[-3000:]
        assert [(e["task"], e["round"]) for e in _assert_complete(run_dir)] == [
            (e["task"], e["round"]) for e in json.loads(before["results.json"])]


def test_a_full_disk_gets_one_line_and_resume_completes_once_there_is_room(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "fs", "8m") as fs:
        run_dir = fs / "run"
        slow = ["--max-steps", "6", "--actions-per-step", "25"]  # later flags win: a few seconds per trial
        proc = subprocess.Popen([ROBOFOLLOW, "eval", "--policy", "hold", *SELECTION, *slow, "--output", str(run_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: _stored(run_dir) >= 1, "the first recorded trial")
        filler = fs / "filler"
        with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:  # fill the filesystem to the last byte
                fh.write(b"\0" * 65536)
        recorded = json.loads((run_dir / "results.json").read_text())
        _, err = proc.communicate(timeout=280)
        assert proc.returncode == EXIT_OUTPUT_UNUSABLE, err[-3000:]
        errors = _error_lines(err)
        assert len(errors) == 1 and "Traceback" not in err
        assert "No space left on device" in errors[0] or "disk is full" in errors[0], errors[0]
        kept = json.loads((run_dir / "results.json").read_text())
        assert kept[: len(recorded)] == recorded  # nothing recorded before the disk filled was lost
        filler.unlink()
        resumed = _eval(run_dir, "--resume", *slow)
        assert resumed.returncode == EXIT_OK, resumed.stderr[-3000:]
        final = _assert_complete(run_dir)
        assert [e for e in final if e in recorded] == recorded


@pytest.mark.parametrize("backend", ["local", "inline"])
def test_a_full_disk_while_recording_gets_one_line_and_keeps_the_recorded_trials(tmp_path: Path, backend: str) -> None:
    # --record: the worker writes each trial's MCAP as it goes; the SDK's writer reports a failed write only as a
    # log line per message (hundreds) and a RuntimeError at close, which came out as a traceback (exit 1)
    with _tmpfs(tmp_path / "fs", "8m") as fs:
        run_dir = fs / "run"
        slow = ["--max-steps", "6", "--actions-per-step", "25"]
        argv = [ROBOFOLLOW, "eval", "--policy", "hold", *SELECTION, *slow, "--record", "--backend", backend]
        proc = subprocess.Popen([*argv, "--output", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        _wait_for(lambda: _stored(run_dir) >= 1, "the first recorded trial")
        filler = fs / "filler"
        with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
            while True:  # fill the filesystem to the last byte
                fh.write(os.urandom(65536))
        recorded = json.loads((run_dir / "results.json").read_text())
        _, err = proc.communicate(timeout=280)
        assert proc.returncode == EXIT_OUTPUT_UNUSABLE, err[-3000:]
        assert "Traceback" not in err and "McapError" not in err and "PanicException" not in err, err[-3000:]
        errors = _error_lines(err)
        assert len(errors) == 1 and "No space left on device" in errors[0], errors
        assert "recorded before are kept" in errors[0] and "--resume" in errors[0], errors[0]
        kept = json.loads((run_dir / "results.json").read_text())
        assert kept[: len(recorded)] == recorded
        filler.unlink()
        resumed = subprocess.run([*argv, "--output", str(run_dir), "--resume"], capture_output=True, text=True,
                                 timeout=280)
        assert resumed.returncode == EXIT_OK, resumed.stderr[-3000:]
        final = _assert_complete(run_dir)
        assert [e for e in final if e in recorded] == recorded
        assert sorted(p.stem for p in (run_dir / "mcap").glob("*.mcap")) == sorted(
            f"{e['task']}_r{e['round']}_s{e['seed']}" for e in final)  # one whole recording per trial
