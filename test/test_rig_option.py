"""``--rig NAME|PATH`` as a user types it: every command that loads the rig takes it from one helper
(``cli._common.add_rig_option`` / ``apply_rig``), refuses a bad one in one line before anything is written,
makes it the active rig of the command and of every process it starts (``ROBOFOLLOW_RIG``), and the run
records it: ``run.json``'s ``rig`` (name, YAML, every file with its SHA-256, as on disk), and ``--resume``
refuses a run made on another rig, naming both. Real console-script runs (one oracle trial without
pictures, one graph of nodes as processes), real files."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.cli import build_parser
from robofollow_ros.cli._common import RIG_HELP
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK
from robofollow_ros.paths import share_path
from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG
from robofollow_ros.robot.rig_description import ENV_RIG, RIGS_DIR
from said import error_lines

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
TASK = "L0_pickup_red_cylinder"
ONE_TRIAL = ["--policy", "oracle", "--no-render", "--tasks", TASK, "--rounds", "1"]
#: Every command that loads the rig, and the arguments it needs besides (OUT: where it would write).
COMMANDS = {
    "eval": ["eval", "--policy", "hold", "--output", "OUT"],
    "collect": ["collect", "--output", "OUT"],
    "bringup": ["bringup", "mock", "--output", "OUT"],
    "demo": ["demo", "--output", "OUT"],
    "sim snapshot": ["sim", "snapshot", "--task", TASK, "--out", "OUT"],
    "sim calibration": ["sim", "calibration", "--out", "OUT"],
    "owda execute": ["owda", "execute", "--anchor", "a", "--instruction", "b", "--sim"],
    "doctor": ["doctor", "--quick"],
}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != ENV_RIG}
    return subprocess.run([*ROBOFOLLOW, *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})})


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _other_rig(folder: Path, name: str = "lab_copy") -> Path:
    """The built-in rig's YAML under another ``name:``, its URDF named by absolute path."""
    text = DEFAULT_RIG_CONFIG.read_text(encoding="utf-8")
    lines = [f"name: {name}" if line.startswith("name:") else
             f"urdf: {share_path('urdf', 'robofollow_rig.urdf')}" if line.startswith("urdf:") else line
             for line in text.splitlines()]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rig.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "rig.yaml"


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


# -- one helper, every command -------------------------------------------------------------------------------
def _leaves(parser: argparse.ArgumentParser, prog: str = "") -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prog.strip(): parser}
    out = {}
    for name, sub in subs[0].choices.items():
        out.update(_leaves(sub, f"{prog} {name}"))
    return out


def test_every_command_that_loads_the_rig_takes_the_one_rig_option() -> None:
    taking = {}
    for prog, parser in _leaves(build_parser()).items():
        option = next((a for a in parser._actions if "--rig" in a.option_strings), None)
        if option is not None:
            taking[prog] = (option.dest, option.help, option.metavar)
    assert set(taking) == set(COMMANDS)
    assert set(taking.values()) == {("rig_spec", RIG_HELP, "NAME|PATH")}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_rig_is_one_line_naming_it_and_nothing_is_written(command: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [str(out) if a == "OUT" else a for a in COMMANDS[command]]
    line = _one_line(_cli(*argv, "--rig", "nope"))
    assert line.startswith(f"robofollow {command.split()[0]}: error: --rig: rig: 'nope' is neither"), line
    assert "robofollow" in line and "aloha" in line  # the names it knows
    assert not out.exists()


def test_a_bad_rig_in_the_environment_is_named_as_such(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    line = _one_line(_cli("eval", "--policy", "hold", "--output", str(tmp_path / "run"),
                          env={ENV_RIG: str(missing)}))
    assert f"${ENV_RIG}: " in line and str(missing) in line, line
    assert not (tmp_path / "run").exists()


# -- what a run records --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("rig") / "run"
    done = _cli("eval", "--rig", "robofollow", *ONE_TRIAL, "--output", str(run))
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    return run


def test_run_json_records_the_rig_and_its_files_as_on_disk(oracle_run: Path) -> None:
    run = _json(oracle_run / "run.json")
    rig = run["rig"]
    assert (rig["name"], rig["config"]) == ("robofollow", str(DEFAULT_RIG_CONFIG))
    urdf = share_path("urdf", "robofollow_rig.urdf")
    assert [f["path"] for f in rig["files"]] == [str(DEFAULT_RIG_CONFIG), str(urdf)]
    assert all(f["sha256"] == _sha256(f["path"]) for f in rig["files"])
    # the official field, keyed as before: the built-in rig's files relative to the package
    assert run["config_sha256"] == {"config/robot/rig.yaml": _sha256(DEFAULT_RIG_CONFIG),
                                    "urdf/robofollow_rig.urdf": _sha256(urdf)}
    assert run["status"] == "complete" and _json(oracle_run / "results.json")[0]["task"] == TASK


def test_a_resume_on_another_rig_is_refused_naming_both(oracle_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(oracle_run, tmp_path / "run"))
    other = _other_rig(tmp_path / "lab")
    before = _files(run)
    line = _one_line(_cli("eval", "--rig", str(other), *ONE_TRIAL, "--output", str(run), "--resume"))
    assert f"--output: {run} holds another run (rig.name differ: " in line, line
    assert 'rig.name "robofollow" in the run, "lab_copy" now' in line, line
    assert _files(run) == before  # a refusal changes nothing


def test_a_run_recorded_before_rigs_were_named_ran_on_the_built_in_one(oracle_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(oracle_run, tmp_path / "run"))
    record = _json(run / "run.json")
    del record["rig"]
    (run / "run.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    line = _one_line(_cli("eval", "--rig", str(_other_rig(tmp_path / "lab")), *ONE_TRIAL, "--output", str(run),
                          "--resume"))
    assert 'rig.name "robofollow" in the run, "lab_copy" now' in line, line
    same = _cli("eval", *ONE_TRIAL, "--output", str(run), "--resume")
    assert same.returncode == EXIT_OK, same.stderr[-3000:]


def test_the_node_processes_of_bringup_run_on_its_rig(tmp_path: Path) -> None:
    """``bringup --rig`` with one process per node: the trial manager (its own process) writes run.json, and
    records the rig bringup was given: the nodes inherit ``ROBOFOLLOW_RIG``."""
    other = _other_rig(tmp_path / "lab")
    out = tmp_path / "run"
    done = _cli("bringup", "sim", "--processes", "--rig", str(other.parent), "--no-render", "--tasks", TASK,
                "--rounds", "1", "--max-steps", "1", "--no-foxglove", "--exit-when-done", "--output", str(out))
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    run = _json(out / "run.json")
    assert run["status"] == "complete" and run["rig"]["name"] == "lab_copy"
    assert run["rig"]["config"] == str(other) and run["config_sha256"][str(other)] == _sha256(other)


def test_doctor_prints_what_the_rig_resolved_to() -> None:
    done = _cli("doctor", "--quick", "--rig", "robofollow")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    urdf = share_path("urdf", "robofollow_rig.urdf")
    assert lines[1] == f"[ok  ] rig robofollow: {DEFAULT_RIG_CONFIG} -> URDF {urdf} (2 files)"
    assert lines[2].split() == ["sha256", _sha256(DEFAULT_RIG_CONFIG), str(DEFAULT_RIG_CONFIG)]
    assert lines[3].split() == ["sha256", _sha256(urdf), str(urdf)]
    report = json.loads(_cli("doctor", "--quick", "--json", "--rig", "robofollow").stdout)
    assert report["checks"][0]["name"] == "rig" and report["checks"][0]["extra"]["urdf"] == str(urdf)


# -- the rig travels to the workers ---------------------------------------------------------------------------
def test_workers_get_a_shipped_rig_by_name_and_any_other_by_path(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """A Ray node's copy of the package may sit elsewhere: the built-in and ``config/rigs/`` rigs travel by name
    and are found in the worker's own copy; a lab's file travels by its path."""
    from robofollow_ros.evaluation.trial_worker import rig_for_workers, use_rig

    monkeypatch.delenv(ENV_RIG, raising=False)
    assert rig_for_workers() is None
    use_rig(None)
    assert ENV_RIG not in os.environ
    other = _other_rig(tmp_path / "lab")
    for active, travels, becomes in ((str(DEFAULT_RIG_CONFIG), "robofollow", DEFAULT_RIG_CONFIG),
                                     (str(RIGS_DIR / "aloha" / "rig.yaml"), "aloha", RIGS_DIR / "aloha" / "rig.yaml"),
                                     (str(other), str(other), other)):
        monkeypatch.setenv(ENV_RIG, active)
        assert rig_for_workers() == travels
        monkeypatch.setenv(ENV_RIG, "")
        use_rig(travels)
        assert os.environ[ENV_RIG] == str(becomes)


def test_a_collection_records_its_rig_and_one_from_before_reads_as_the_built_in(monkeypatch: pytest.MonkeyPatch,
                                                                                 tmp_path: Path) -> None:
    from robofollow_ros.datasets.collect import CollectConfig, collect_identity
    from robofollow_ros.rundir.layout import COLLECT_IDENTITY_KEY, DATASET_META_FILE

    monkeypatch.setenv(ENV_RIG, str(_other_rig(tmp_path / "lab")))
    config = CollectConfig(output=tmp_path / "ds")
    identity = collect_identity(config)
    assert identity.fields["rig"] == "lab_copy"
    meta = tmp_path / "ds" / DATASET_META_FILE
    meta.parent.mkdir(parents=True)
    old = {k: v for k, v in identity.fields.items() if k != "rig"}
    meta.write_text(json.dumps({COLLECT_IDENTITY_KEY: old}), encoding="utf-8")
    recorded = identity.recorded(tmp_path / "ds")
    assert recorded is not None and identity.differences(recorded) == ["rig"]
    assert identity.describe(recorded, ["rig"]) == 'rig "robofollow" in the run, "lab_copy" now'


def test_the_aloha_twin_runs_the_same_verdict_over_ros_as_headless(tmp_path: Path) -> None:
    """``--rig aloha`` end to end: the sim graph plays Trossen's Interbotix drivers (the rig's ``driver_config``),
    the arm bridge speaks them, and the trial's verdict equals the headless evaluator's on the same twin."""
    task = "L0_pickup_yellow_block_1_left"
    ros, headless = tmp_path / "ros", tmp_path / "headless"
    done = _cli("bringup", "sim", "--rig", "aloha", "--policy", "oracle", "--no-render", "--tasks", task,
                "--rounds", "1", "--no-foxglove", "--exit-when-done", "--output", str(ros), timeout=300)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    done = _cli("eval", "--rig", "aloha", *ONE_TRIAL[:-4], "--tasks", task, "--rounds", "1",
                "--output", str(headless), timeout=300)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    verdicts = []
    for out in (ros, headless):
        assert _json(out / "run.json")["rig"]["name"] == "aloha"
        (row,) = _json(out / "results.json")
        verdicts.append((row["intent_score"], row["exec_score"], row["completion_ok"]))
    assert verdicts[0] == verdicts[1] == (1.0, 1.0, True), verdicts
