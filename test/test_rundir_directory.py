"""The run directory itself (``robofollow_ros.rundir``): who may take a directory, one holder at a time
(real processes, real ``flock``, a real SIGKILL), the resume check naming each differing field, and
atomic files whose killed writes the next holder sweeps."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robofollow_ros.rundir import Identity, NotEmptyError, OutputUnusableError, RunDirectory, RunDirError
from robofollow_ros.rundir.layout import LOCK_FILE

pytestmark = pytest.mark.timeout(300)

HOLDER = textwrap.dedent("""
    import sys
    from robofollow_ros.rundir import RunDirectory
    directory = RunDirectory.create(sys.argv[1])
    print("held", flush=True)
    sys.stdin.read()  # hold until the test closes stdin or kills us
    directory.close()
""")


def test_a_new_run_takes_an_absent_or_debris_only_directory_and_sweeps_the_debris(tmp_path: Path) -> None:
    fresh = RunDirectory.create(tmp_path / "a" / "b")  # parents are created
    assert (tmp_path / "a" / "b" / LOCK_FILE).is_file()
    fresh.close()

    left = tmp_path / "killed"
    (left / "meta").mkdir(parents=True)
    (left / LOCK_FILE).write_text('{"pid": 1}\n')  # a killed holder's lock file
    (left / ".run.json.k3j.tmp").write_text("{")  # and its cut-short atomic writes, at any depth
    (left / "meta" / ".info.json.x1.tmp").write_text("[")
    with pytest.raises(NotEmptyError):  # meta/ is content
        RunDirectory.create(left)
    (left / "meta" / ".info.json.x1.tmp").unlink()
    (left / "meta").rmdir()
    with RunDirectory.create(left):
        assert sorted(p.name for p in left.iterdir()) == [LOCK_FILE]
    assert not (left / LOCK_FILE).exists()  # the holder takes its lock file away when it lets go

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(NotEmptyError, match="not an empty directory"):
        RunDirectory.create(busy)
    assert (busy / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    for open_it in (RunDirectory.create, lambda p: RunDirectory.resume(p, identity=Identity({}))):
        with pytest.raises(RunDirError, match="exists and is not"):
            open_it(tmp_path / "file")


def test_a_second_holder_is_refused_naming_the_first_until_the_kernel_drops_a_killed_ones_lock(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for _ in range(2):  # a refused attempt leaves the holder's lock as it was
            with pytest.raises(OutputUnusableError, match=f"is in use by pid {holder.pid} \\(.*-c") as refused:
                RunDirectory.resume(run_dir, identity=Identity({}))
            assert "\n" not in str(refused.value)
        holder.kill()
        assert holder.wait(30) == -9
    finally:
        holder.kill()
    assert (run_dir / LOCK_FILE).is_file()  # SIGKILL left the file, but not the lock
    with RunDirectory.create(run_dir) as directory:  # the dead holder's file is debris
        directory.write_json("run.json", {"ok": True})
    assert json.loads((run_dir / "run.json").read_text()) == {"ok": True}


CONTENDER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from robofollow_ros.rundir.errors import OutputUnusableError
    from robofollow_ros.rundir.lock import RunDirLock
    root, rounds = Path(sys.argv[1]), int(sys.argv[2])
    done = 0
    while done < rounds:
        try:
            lock = RunDirLock(root).acquire()
        except OutputUnusableError:
            continue
        try:
            os.close(os.open(root / "inside", os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # fails if another is inside
            count = int((root / "count").read_text())
            (root / "count").write_text(str(count + 1))
            os.unlink(root / "inside")
        finally:
            lock.release()
        done += 1
""")


def test_the_lock_keeps_one_holder_while_holders_come_and_go_and_remove_its_file(tmp_path: Path) -> None:
    # Each release removes the lock file, which races processes that opened it just before: the lock
    # must still admit one holder at a time (else two are "inside" at once, or the count loses updates).
    (tmp_path / "count").write_text("0")
    processes, rounds = 4, 400
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(tmp_path), str(rounds)],
                              stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * processes, errors
    assert int((tmp_path / "count").read_text()) == processes * rounds
    assert not (tmp_path / LOCK_FILE).exists()


def test_resume_refuses_another_run_naming_each_field_that_differs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunDirectory.resume(run_dir, identity=Identity({"model": "a", "seed": 0})) as directory:
        assert directory.recorded_identity is None  # nothing recorded: the caller starts afresh
        directory.write_json("run.json", {"model": "a", "seed": 0, "tasks": ["t1", "t2"]})

    def resume(fields: dict, **where: object) -> RunDirectory:
        return RunDirectory.resume(run_dir, identity=Identity(fields, **where))  # type: ignore[arg-type]

    with resume({"model": "a", "seed": 0, "tasks": ("t1", "t2")}) as same:  # a tuple is what JSON calls a list
        assert same.recorded_identity == {"model": "a", "seed": 0, "tasks": ["t1", "t2"]}
    with pytest.raises(RunDirError) as refused:
        resume({"model": "b", "seed": 1, "tasks": ["t1", "t2"]})
    assert str(refused.value).startswith(f"--output: {run_dir} holds another run (model, seed differ: model \"a\" "
                                         'in the run, "b" now; seed 0 in the run, 1 now); ')
    with pytest.raises(RunDirError, match=r'\(tasks differ: tasks \["t1", "t2"\] in the run, absent now\)'):
        resume({"model": "a", "seed": 0})  # a recorded field it lacks differs too ...
    with resume({"model": "a", "seed": 0}, partial=True):  # ... unless the record holds other fields
        pass
    with pytest.raises(RunDirError, match=r"\(seed differ: seed 0 in the run, 2 now\)"):
        resume({"model": "a", "seed": 2}, partial=True)
    long = ["t1", *(letter * 40 for letter in "uvw")]
    with pytest.raises(RunDirError, match=r"\(tasks differ: tasks \(first difference at #2: \"t2\" in the run, "
                                          rf"\"{'u' * 40}\" now\) with 2 entries in the run, 4 now\)"):
        resume({"model": "a", "seed": 0, "tasks": long})  # a long list is told by where it parts
    with pytest.raises(RunDirError, match=r'\(tasks differ: tasks \["t1", "t2"\] in the run, \["t1"\] now\)'):
        resume({"model": "a", "seed": 0, "tasks": ["t1"]})  # a short one is shown whole

    with RunDirectory.resume(run_dir, identity=Identity({}, partial=True)) as directory:
        directory.write_json("meta/robofollow.json", {"collect": {"fps": 10}, "episodes": [1, 2]})
    with resume({"fps": 10}, record="meta/robofollow.json", key="collect") as directory:
        assert directory.recorded_identity == {"fps": 10}
    with pytest.raises(RunDirError, match=r"\(fps differ: fps 10 in the run, 25 now\)"):
        resume({"fps": 25}, record="meta/robofollow.json", key="collect")

    (run_dir / "run.json").write_text('{"model": ')
    with pytest.raises(RunDirError, match=r"run\.json is not valid JSON"):
        resume({"model": "a"})
    assert not (run_dir / LOCK_FILE).exists()  # every refusal let go of the lock


def test_files_are_atomic_in_their_format_and_a_closed_directory_writes_nothing(tmp_path: Path) -> None:
    directory = RunDirectory.create(tmp_path / "run")
    directory.write_json("run.json", {"name": "café", "n": [1]})
    directory.write_json("meta/info.json", {"name": "café"}, indent=4)
    directory.write_json("metrics.json", {"name": "café"}, ensure_ascii=True)
    directory.write_bytes("mcap/t.mcap", b"\x00\x01")
    root = directory.path
    assert (root / "run.json").read_bytes() == '{\n  "name": "café",\n  "n": [\n    1\n  ]\n}\n'.encode()
    assert (root / "meta" / "info.json").read_text(encoding="utf-8") == '{\n    "name": "café"\n}\n'
    assert (root / "metrics.json").read_text() == '{\n  "name": "caf\\u00e9"\n}\n'
    assert directory.read_json("run.json") == {"name": "café", "n": [1]}
    (tmp_path / "plain").write_text("x")  # a dataset is read by others: the mode open() gives, not mkstemp's 0600
    assert {(root / n).stat().st_mode for n in ("run.json", "meta/info.json")} == {(tmp_path / "plain").stat().st_mode}
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        LOCK_FILE, "mcap/t.mcap", "meta/info.json", "metrics.json", "run.json"]  # no temporary left
    directory.close()
    directory.close()  # a second close does nothing
    with pytest.raises(RuntimeError, match="closed"):
        directory.write_json("run.json", {})
    assert json.loads((root / "run.json").read_text())["n"] == [1]


def test_the_package_imports_only_the_standard_library_and_the_ground_floor() -> None:
    # What rundir/__init__.py promises, so that every command (and no ROS install) can build on it.
    allowed = {"robofollow_ros.jsonlimits", "robofollow_ros.paths"}
    package = Path(__file__).resolve().parents[1] / "robofollow_ros" / "rundir"
    wrong = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                ours = name.startswith("robofollow_ros.rundir") or name in allowed
                if not (top in sys.stdlib_module_names or top == "__future__" or ours):
                    wrong.append(f"{path.name}: {name}")
    assert wrong == []
