"""``robofollow eval --resume`` on a run directory it cannot continue: a corrupt ``results.sqlite`` or
``run.json`` is one line naming the file (exit 2), and a ``results.sqlite`` holding another run than the
``run.json`` beside it is refused naming both run ids (exit 2) -- it used to re-run every trial into the
same store. Nothing in the directory is changed by a refusal. Real files: a real run, then real
corruption (random bytes over SQLite's header, a truncated database, broken JSON, another run's store)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK
from robofollow_ros.rundir.layout import LOCK_FILE
from said import error_lines

pytestmark = pytest.mark.timeout(300)

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
RUN = ["eval", "--policy", "hold", "--tasks", "L0_pickup_red_cylinder", "--rounds", "2", "--max-steps", "1",
       "--actions-per-step", "5", "--no-render", "--backend", "inline"]


def _eval(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOFOLLOW, *RUN, "--output", str(run_dir), *extra], capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    done = _eval(run)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    return run


def _copy(run: Path, tmp_path: Path, name: str = "run") -> Path:
    target = tmp_path / name
    shutil.copytree(run, target)
    return target


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != LOCK_FILE}


def _refused(run: Path) -> str:
    before = _files(run)
    done = _eval(run, "--resume")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    assert _files(run) == before  # a refusal writes nothing
    return lines[0]


def _run_id(run: Path) -> str:
    return str(json.loads((run / "run.json").read_text())["run_id"])


@pytest.mark.parametrize("damage", ["random bytes over the header", "truncated", "another program's database"])
def test_a_corrupt_results_sqlite_is_named(finished_run, tmp_path, damage):
    run = _copy(finished_run, tmp_path)
    store = run / "results.sqlite"
    if damage == "random bytes over the header":
        data = bytearray(store.read_bytes())
        data[:100] = bytes(range(100))
        store.write_bytes(bytes(data))
    elif damage == "truncated":
        store.write_bytes(store.read_bytes()[:1500])
    else:  # a valid SQLite file whose trials table is not ours
        store.unlink()
        with sqlite3.connect(store) as db:
            db.execute("CREATE TABLE trials (name TEXT)")
    line = _refused(run)
    assert f"--output: {store} is damaged or not a RoboFollow results store" in line, line


@pytest.mark.parametrize(("content", "words"), [
    (b'{"status": "running", ', "not valid JSON"),
    (b'{"status": "\xff"}', "not valid JSON"),
    (b"[1, 2]", "does not record"),
    (None, "run_id"),  # the run's own settings, without its id
])
def test_a_corrupt_run_json_is_named(finished_run, tmp_path, content, words):
    run = _copy(finished_run, tmp_path)
    if content is None:
        data = json.loads((run / "run.json").read_text())
        del data["run_id"]
        content = json.dumps(data).encode()
    (run / "run.json").write_bytes(content)
    line = _refused(run)
    assert str(run / "run.json") in line and words in line, line


def test_a_results_sqlite_of_another_run_is_refused_naming_both_run_ids(finished_run, tmp_path):
    ours = _copy(finished_run, tmp_path, "ours")
    foreign = tmp_path / "foreign"
    assert _eval(foreign).returncode == EXIT_OK  # a second run of the same trials: its own run id
    shutil.copy(foreign / "results.sqlite", ours / "results.sqlite")
    line = _refused(ours)
    assert _run_id(ours) in line and _run_id(foreign) in line and str(ours / "results.sqlite") in line, line
    with sqlite3.connect(ours / "results.sqlite") as db:  # still only the other run's trials, none added
        assert db.execute("SELECT DISTINCT run_id FROM trials").fetchall() == [(_run_id(foreign),)]


@pytest.mark.parametrize("extra", [("--record",), ("--record", "--record-rate", "10")])
def test_resume_refuses_other_recording_settings(finished_run, tmp_path, extra):
    """A run recorded for only some trials, or at two rates, would not describe one run: refused, naming the field."""
    run = _copy(finished_run, tmp_path)
    before = _files(run)
    done = _eval(run, "--resume", *extra)
    assert done.returncode == EXIT_BAD_INPUT and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "arguments.record" in done.stderr and len(error_lines(done.stderr)) == 1, done.stderr
    assert _files(run) == before
