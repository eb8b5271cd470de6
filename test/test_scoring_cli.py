"""``robofollow score``: JSON shape on a good file; exit code 2 naming frame and field on bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.scoring import TrajectoryError, frame_from_dict
from robofollow_ros.scoring.synthetic import Puppet

TASK = "L0_place_yellow_block_1_behind_red_cylinder"


def trajectory() -> dict:
    p = Puppet(TASK)
    tgt, src = p.objects["red_cylinder"], p.objects["yellow_block_1"]
    p.pick("right", "yellow_block_1").place("right", (tgt[0], tgt[1] + 0.06, src[2])).home("right")
    return {"task": TASK, "frames": [f.to_dict() for f in p.frames]}


def write(tmp_path: Path, payload: object, raw: str | None = None) -> str:
    path = tmp_path / "traj.json"
    path.write_text(raw if raw is not None else json.dumps(payload))
    return str(path)


def test_score_json_shape_in_a_subprocess(tmp_path):
    path = write(tmp_path, trajectory())
    out = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "score", path, "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert (view["task"], view["intent"], view["exec"], view["complete"]) == (TASK, 1.0, 1.0, True)
    assert list(view["stages"]) == ["stage1_source_select", "stage2_relative_place", "stage3_finish"]
    assert set(view["stages"]["stage3_finish"]) == {"intent", "exec", "intent_max", "exec_max", "intent_reason",
                                                    "exec_reason"}
    assert view["final_target_ok"] is True


def test_score_text_output(tmp_path, capsys):
    assert main(["score", write(tmp_path, trajectory())]) == 0
    assert "stage2_relative_place" in capsys.readouterr().out


def bad(tmp_path: Path, capsys, payload: object = None, raw: str | None = None) -> str:
    assert main(["score", write(tmp_path, payload, raw)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_unknown_task(tmp_path, capsys):
    data = trajectory()
    data["task"] = "L0_no_such_task"
    assert "L0_no_such_task" in bad(tmp_path, capsys, data)


def test_empty_frames_get_the_official_verdict_on_an_empty_trajectory(tmp_path, capsys):
    assert main(["score", write(tmp_path, {"task": TASK, "frames": []}), "--results-entry"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert (entry["intent_score"], entry["exec_score"], entry["completion_ok"]) == (0.0, 0.0, False)
    assert "frames" not in entry  # the official entry's fields only
    assert [p["intent_reason"] for p in entry["phases"]] == [
        "trajectory/source missing", "gated: stage1 intent not full", "gated: prior intent not full"]
    assert entry["final_target_reason"] == "n/a (no relation target)" and entry["wrong_arm_intervened"] is False


def test_missing_object_names_frame_and_field(tmp_path, capsys):
    data = trajectory()
    del data["frames"][3]["objects"]["red_cylinder"]
    assert "frame 3: objects.red_cylinder: missing" in bad(tmp_path, capsys, data)


def test_nan_names_frame_and_field(tmp_path, capsys):
    data = trajectory()
    data["frames"][5]["ee_left"][1] = math.nan
    err = bad(tmp_path, capsys, raw=json.dumps(data))  # json writes NaN, which Python reads back
    assert "frame 5: ee_left[1]: expected a finite number" in err


def test_wrong_vector_length_names_frame_and_field(tmp_path, capsys):
    data = trajectory()
    data["frames"][7]["objects"]["yellow_block_1"] = [0.0, 0.1]
    assert "frame 7: objects.yellow_block_1: expected 3 numbers, got 2" in bad(tmp_path, capsys, data)


def test_not_json_and_missing_file(tmp_path, capsys):
    assert "invalid JSON at line 1 column 2" in bad(tmp_path, capsys, raw="{nope")
    assert main(["score", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_scene3_needs_the_source_quaternion():
    frame = Puppet("L0_r_pick2_via4_to6_short_front").frames[0].to_dict()
    del frame["object_quats"]["red_bar_2"]
    with pytest.raises(TrajectoryError, match=r"frame 0: object_quats.red_bar_2: missing"):
        frame_from_dict(frame, 0, required_quats=["red_bar_2"])


def test_gripper_must_be_a_number():
    frame = Puppet(TASK).frames[0].to_dict()
    frame["gripper_left"] = "open"
    with pytest.raises(TrajectoryError, match=r"frame 4: gripper_left: expected a number"):
        frame_from_dict(frame, 4)


def score_in_subprocess(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "score", path], capture_output=True, text=True,
                          timeout=120, check=False)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize(("raw", "expected"), [
    (json.dumps({"task": TASK, "frames": []})[:-1] + ', "n": 1' + "0" * 400 + "}", "integer with 401 digits"),
    ("[" * 100_000 + "]" * 100_000, "nesting deeper than 64 levels"),
    (json.dumps({"task": TASK, "frames": []})[:-1] + ', "n": 1e400}', "out of range for a float"),
])
def test_hostile_json_is_one_line_and_exit_2(tmp_path, raw, expected):
    path = tmp_path / "hostile.json"
    path.write_text(raw)
    assert expected in one_line_error(score_in_subprocess(str(path)))


def test_dev_zero_and_a_huge_file_are_refused_by_size(tmp_path):
    from robofollow_ros.cli.score import MAX_TRAJECTORY_BYTES

    line = one_line_error(score_in_subprocess("/dev/zero"))
    assert f"over the {MAX_TRAJECTORY_BYTES:,}-byte limit" in line
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:  # sparse: no disk is used
        fh.truncate(8 * MAX_TRAJECTORY_BYTES)
    assert f"{8 * MAX_TRAJECTORY_BYTES:,} bytes, over the {MAX_TRAJECTORY_BYTES:,}-byte limit" in one_line_error(
        score_in_subprocess(str(huge)))
