"""Bad files and paths given to ``robofollow`` subcommands are one line on stderr naming the option (or file)
and the value, before anything is written; never a traceback:

* a YAML file that is not UTF-8 (bringup profile, driver map, rig, colour model) is named by the one YAML
  reader (``yamlio``), and bringup reads the driver map and the camera calibration before any node starts;
* an output path that cannot be used -- a missing folder for ``report --png``, a file given as
  ``export-lerobot --output``, a missing calibration directory -- is exit 2 before the work starts, and a
  folder that exists but cannot be written is exit 5.

Real files: real Latin-1 bytes, a real run directory, a real read-only filesystem (tmpfs, root only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OUTPUT_UNUSABLE
from said import error_lines

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
#: Not UTF-8: a Latin-1 "café" and two bytes no UTF-8 text starts with.
NOT_UTF8 = b'name: "caf\xe9 \xff\xfe"\n'


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOFOLLOW, *args], capture_output=True, text=True, timeout=timeout)


def _one_line(done: subprocess.CompletedProcess[str], status: int = EXIT_BAD_INPUT) -> str:
    """The one stderr line of a refused command (asserting the status and that there is no traceback)."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == status, done.stderr[-3000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


# -- YAML that is not UTF-8 ------------------------------------------------------------------------------

@pytest.fixture
def not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(NOT_UTF8)
    return path


def _names_the_file(line: str, path: Path) -> None:
    assert str(path) in line and "UTF-8" in line, line


def test_a_bringup_profile_that_is_not_utf8_is_named(tmp_path, not_utf8):
    line = _one_line(_cli("bringup", "mock", "--profile", str(not_utf8), "--output", str(tmp_path / "run")))
    _names_the_file(line, not_utf8)
    assert not (tmp_path / "run").exists()


def test_a_driver_config_that_is_not_utf8_is_named_before_any_node_starts(tmp_path, not_utf8):
    line = _one_line(_cli("bringup", "mock", "--driver-config", str(not_utf8), "--no-foxglove",
                          "--output", str(tmp_path / "run")))
    _names_the_file(line, not_utf8)
    assert "--driver-config" in line and not (tmp_path / "run").exists()


def test_a_broken_driver_config_is_refused_before_any_node_starts(tmp_path):
    broken = tmp_path / "drivers.yaml"
    broken.write_text("arms: {left: {kind: piper}}\n")
    line = _one_line(_cli("bringup", "mock", "--driver-config", str(broken), "--no-foxglove",
                          "--output", str(tmp_path / "run")))
    assert "--driver-config" in line and str(broken) in line, line
    assert not (tmp_path / "run").exists()


def test_a_rig_yaml_that_is_not_utf8_is_named(tmp_path, not_utf8):
    line = _one_line(_cli("sim", "calibration", "--rig", str(not_utf8), "--out", str(tmp_path / "cal")))
    _names_the_file(line, not_utf8)
    assert not (tmp_path / "cal").exists()


def test_a_colour_model_that_is_not_utf8_is_named(not_utf8):
    line = _one_line(_cli("perception", "eval", "--colour-model", str(not_utf8), "--max-trials", "1"))
    _names_the_file(line, not_utf8)
    assert "--colour-model" in line


def test_an_extrinsics_file_to_merge_into_that_is_not_utf8_is_named_before_solving(tmp_path, not_utf8):
    line = _one_line(_cli("calibrate", "extrinsics", "--recording", str(tmp_path / "no_recording"),
                          "--camera-info", str(tmp_path / "no_info.yaml"), "--out", str(not_utf8)))
    assert line.startswith("robofollow calibrate: error: --out: ") and str(not_utf8) in line and "UTF-8" in line, line
    assert not_utf8.read_bytes() == NOT_UTF8


# -- output and input paths ------------------------------------------------------------------------------

def _run_dir(tmp_path: Path) -> Path:
    """A run directory holding one real trial (hold, no rendering, inline: a few seconds)."""
    run = tmp_path / "run"
    done = _cli("eval", "--policy", "hold", "--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--max-steps", "1",
                "--actions-per-step", "5", "--no-render", "--backend", "inline", "--output", str(run), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


def test_report_png_into_a_missing_folder_exits_2_naming_it(tmp_path):
    run = _run_dir(tmp_path)
    png = tmp_path / "no" / "such" / "folder" / "r.png"
    line = _one_line(_cli("report", str(run), "--png", str(png)))
    assert "--png" in line and str(png.parent) in line, line
    assert not (tmp_path / "no").exists()


def test_report_png_that_is_a_directory_exits_2_naming_it(tmp_path):
    run = _run_dir(tmp_path)
    png = tmp_path / "pictures"
    png.mkdir()
    line = _one_line(_cli("report", str(run), "--png", str(png)))
    assert "--png" in line and str(png) in line, line


def test_report_png_on_a_read_only_filesystem_exits_5(tmp_path):
    from test_rundir_safety import _remount, _tmpfs

    run = _run_dir(tmp_path)
    with _tmpfs(tmp_path / "fs", "1m") as fs:
        _remount(fs, "ro")
        try:
            line = _one_line(_cli("report", str(run), "--png", str(fs / "r.png")), EXIT_OUTPUT_UNUSABLE)
        finally:
            _remount(fs, "rw")
        assert "--png" in line and str(fs / "r.png") in line and "Read-only file system" in line, line


def test_export_lerobot_output_that_is_a_file_exits_2_naming_it(tmp_path):
    target = tmp_path / "dataset"
    target.write_text("not a directory\n")
    bag = tmp_path / "bag.mcap"
    bag.write_bytes(b"")
    line = _one_line(_cli("export-lerobot", str(bag), "--output", str(target)))
    assert "--output" in line and str(target) in line, line
    assert target.read_text() == "not a directory\n"


def test_a_missing_calibration_directory_is_named_by_bringup(tmp_path):
    missing = tmp_path / "no_calibration"
    line = _one_line(_cli("bringup", "rig", "--calibration-dir", str(missing), "--foxglove-port", "0",
                          "--output", str(tmp_path / "run")))
    assert "--calibration-dir" in line and str(missing) in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [
    ["perception", "eval", "--max-trials", "1", "--calibration"],
    ["calibrate", "colour", "--sim", "--calibration"],
])
def test_a_missing_calibration_directory_is_named(tmp_path, argv):
    missing = tmp_path / "no_calibration"
    line = _one_line(_cli(*argv, str(missing)))
    assert "--calibration" in line and str(missing) in line, line
    assert not missing.exists()


def test_report_of_a_results_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "results.json").write_bytes(b'[{"task": "\xff"}]')
    line = _one_line(_cli("report", str(tmp_path), "--no-plot"))
    assert str(tmp_path / "results.json") in line, line


@pytest.mark.parametrize(("argv", "flag"), [
    (["replay", "trial.mcap", "--picture", "MISSING/p.png"], "--picture"),
    (["perception", "eval", "--perturb", "clean", "--plot", "MISSING/p.png"], "--plot"),
    (["report", "--compare-runs", "a", "b", "--png", "MISSING/c.png"], "--png"),
])
def test_a_picture_into_a_missing_folder_is_refused_before_the_work(tmp_path, argv, flag):
    missing = tmp_path / "no" / "folder"
    line = _one_line(_cli(*(a.replace("MISSING", str(missing)) for a in argv)))
    assert line.split(": error: ")[1].startswith(f"{flag}: the folder {missing} does not exist"), line


@pytest.mark.parametrize("argv", [
    ["calibrate", "intrinsics", "--images", ".", "--camera", "head", "--out", "DIR"],
    ["owda", "capture", "--scene", "scene2", "--layout", "default", "--out", "DIR"],
    ["sim", "urdf", "--out", "DIR"],
])
def test_a_directory_given_as_an_output_file_is_refused(tmp_path, argv):
    line = _one_line(_cli(*(a.replace("DIR", str(tmp_path)) for a in argv)))
    assert f"--out: {tmp_path} is a directory" in line, line


def test_an_output_on_a_read_only_filesystem_exits_5_naming_it(tmp_path):
    from test_rundir_safety import _remount, _tmpfs

    with _tmpfs(tmp_path / "fs", "1m") as fs:
        _remount(fs, "ro")
        try:
            line = _one_line(_cli("sim", "urdf", "--out", str(fs / "rig.urdf")), EXIT_OUTPUT_UNUSABLE)
        finally:
            _remount(fs, "rw")
    assert f"--out: cannot write {fs / 'rig.urdf'} (Read-only file system)" in line, line


@pytest.mark.parametrize("argv", [
    ["eval", "--policy", "hold", "--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--output", "FILE/run"],
    ["collect", "--tasks", "pickup_yellow_block_2", "--output", "FILE/dataset"],
    ["record", "FILE/teleop.mcap"],
])
def test_an_output_below_a_file_is_bad_input(tmp_path, argv):
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    line = _one_line(_cli(*(a.replace("FILE", str(file)) for a in argv)))
    assert str(file) in line and "a part of that path is a file" in line, line
    assert file.read_text() == "mine\n"


def test_an_anchor_file_that_is_not_utf8_is_named_by_its_own_option(tmp_path, not_utf8):
    line = _one_line(_cli("owda", "execute", "--anchor", "a", "--instruction", "x", "--sim", "--anchor-file",
                          str(not_utf8)))
    assert f"--anchor-file: {not_utf8}" in line and "UTF-8" in line, line
