"""The paper-scale bench (bench/learned_mirage.py), its bookkeeping: a running stage leaves heartbeats that count
its wall and CPU time, its descendants' included, so a stage killed at a session's end is not lost from the
times the docs report; ``--status`` sums ended runs and cut ones, and names those it cannot count; a stopped
evaluation is reported on its whole rounds."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from bench.learned_mirage import status_report, step, whole_rounds

# A stage whose CPU is spent by a grandchild, as eval's and collect's workers spend it: it spins until told to stop.
SPINNER = ("import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', "
           "'import os, sys\\nwhile not os.path.exists(sys.argv[1]): pass', sys.argv[1]]))")


def _records(work: Path) -> list[dict]:
    path = work / "stages.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_for(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_running_stage_beats_with_its_descendants_cpu(tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    runner = threading.Thread(target=step, args=(tmp_path, "spin", [stop.as_posix()], 0.2,
                                                 [sys.executable, "-c", SPINNER]))
    runner.start()
    try:
        _wait_for(lambda: any(r["exit"] == "running" and r["cpu_s"] >= 0.5 for r in _records(tmp_path)))
    finally:
        stop.touch()
        runner.join(timeout=60)
    records = _records(tmp_path)
    assert records[0]["exit"] == "started" and records[-1]["exit"] == 0
    beats = [r for r in records if r["exit"] == "running"]
    assert beats[-1]["cpu_s"] <= records[-1]["cpu_s"] + 0.1  # the end's count (getrusage) includes every beat's
    assert all(r["started"] == records[0]["started"] for r in records)
    assert "spin: 1 run(s)" in status_report(tmp_path) and "not ended" not in status_report(tmp_path)


def test_status_counts_a_killed_run_to_its_last_heartbeat_and_names_one_without(tmp_path: Path) -> None:
    rows = [
        {"stage": "eval", "started": "T1", "exit": "started"},
        {"stage": "eval", "started": "T1", "exit": "running", "wall_s": 3600.0, "cpu_s": 7000.0},
        {"stage": "eval", "started": "T1", "exit": "running", "wall_s": 7200.0, "cpu_s": 14000.0},  # then SIGKILL
        {"stage": "eval", "started": "T2", "exit": "started"},
        {"stage": "eval", "started": "T2", "wall_s": 1800.0, "cpu_s": 3600.0, "exit": 0},
        {"stage": "eval", "started": "T0", "exit": "started"},  # killed before heartbeats existed
    ]
    (tmp_path / "stages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = status_report(tmp_path).splitlines()[0]
    assert line.startswith("eval: 3 run(s), wall 2.50 h, CPU 4.89 h; last exit 0")
    assert "1 not ended (running, or killed), counted to their last heartbeat" in line
    assert "1 started (T0) without an end or a heartbeat: not counted" in line


def test_an_interrupted_stage_stops_its_command_and_records_it(tmp_path: Path) -> None:
    stop = tmp_path / "stop"  # never made: only the interruption ends it
    failure: list[BaseException] = []

    def run() -> None:
        try:
            step(tmp_path, "spin", [stop.as_posix()], 0.2, [sys.executable, "-c", SPINNER])
        except BaseException as e:  # what the thread raised is the test's subject
            failure.append(e)

    runner = threading.Thread(target=run)
    runner.start()
    _wait_for(lambda: any(r["exit"] == "running" for r in _records(tmp_path)))
    import ctypes  # the interruption a SIGTERM handler raises, delivered to the stage's thread

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(runner.ident), ctypes.py_object(SystemExit))
    runner.join(timeout=90)
    assert not runner.is_alive()
    assert failure and isinstance(failure[0], SystemExit)
    assert _records(tmp_path)[-1]["exit"] == "interrupted"
    # the spinning grandchild was stopped with its stage: no CPU is spent after the end (its group got SIGTERM)
    _wait_for(lambda: not _spinners(stop))


def _spinners(stop: Path) -> list[str]:
    return [d.name for d in Path("/proc").iterdir() if d.name.isdigit() and _cmdline(d).endswith(stop.as_posix())]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_whole_rounds_are_the_rounds_every_planned_task_holds(tmp_path: Path) -> None:
    plan = {"selected_tasks": [{"scene": "scene1", "task": t} for t in ("A", "B", "C")]}
    (tmp_path / "run.json").write_text(json.dumps(plan))

    def holding(*trials: tuple[str, int], control: str = "") -> tuple[int, int]:
        rows = [{"task": t, "round": r} for t, r in trials] + ([{"task": "C", "round": 2, "control": control}]
                                                              if control else [])
        (tmp_path / "results.json").write_text(json.dumps(rows))
        return whole_rounds(tmp_path)

    assert holding() == (0, 0)
    assert holding(("A", 1), ("B", 1)) == (0, 2)
    assert holding(("A", 1), ("B", 1), ("C", 1), ("A", 2)) == (1, 1)
    assert holding(("A", 1), ("B", 1), ("C", 1), ("A", 2), ("B", 2), control="blank") == (1, 2)  # not a true trial
    assert holding(*[(t, r) for r in (1, 2) for t in "ABC"]) == (2, 0)
