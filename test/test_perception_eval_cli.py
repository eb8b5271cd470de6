"""``robofollow perception eval``: perception watched against SAPIEN's ground truth while the oracle plays."""

from __future__ import annotations

import json

import pytest

from robofollow_ros.cli import main


def test_eval_reports_accuracy_identity_speed_and_oracle_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["perception", "eval", "--scene", "scene3", "--rounds", "1", "--max-trials", "1", "--every", "2",
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("median_position_error_m", "p95_position_error_m", "identity_accuracy", "frames",
                "frames_per_second"):
        assert report[key] is not None, key
    assert report["frames"] >= 3  # the settled layout, then frames while the arm moves
    assert report["identity_checks"] >= 6 * report["frames"] - 6  # (almost) every object visible every frame
    assert report["median_position_error_m"] < 0.01 and report["p95_position_error_m"] < 0.02
    assert report["identity_accuracy"] >= 0.99
    assert report["trials"] == 1 and report["oracle_agreement"] == 1.0


@pytest.mark.parametrize(("argv", "message"), [
    (["--scene", "scene9"], "--scene: expected one of all, scene1, scene2, scene3, scene4, got 'scene9'"),
    (["--rounds", "0"], "argument --rounds: must be an integer in 1..10, got '0'"),
    (["--rounds", "11"], "argument --rounds: must be an integer in 1..10, got '11'"),
    (["--every", "0"], "argument --every: must be an integer in 1..1000, got '0'"),
    (["--static", "--oracle-agreement"], "--oracle-agreement: needs a policy"),
    (["--policy", "no_such_policy_spec"], "--policy"),
    (["--calibration", "/no/such/dir"], "--calibration: calibration file: /no/such/dir/head.yaml does not exist"),
])
def test_bad_input_exits_2_naming_the_field(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perception", "eval", *argv]) == 2
    assert message in capsys.readouterr().err


def test_perturbed_eval_scores_every_item_against_its_goals(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    png, table = tmp_path / "perturb.png", tmp_path / "perturb.md"
    code = main(["perception", "eval", "--scene", "scene1", "--static", "--max-trials", "1", "--perturb",
                 "clean,wb warm,table oak,distractors", "--plot", str(png), "--markdown", str(table), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["trials"] == 1
    items = {item["name"]: item for item in report["items"]}
    assert list(items) == ["clean", "wb warm", "table oak", "distractors"]
    for item in items.values():
        assert item["identity_accuracy"] == 1.0 and item["misses"] == 0 and item["false_detections"] == 0
        assert item["median_error_m"] < 0.003, item["name"]
    assert items["clean"]["drift_reported_share"] == 0.0
    assert items["wb warm"]["drift_reported_share"] == 1.0 and items["table oak"]["drift_reported_share"] == 1.0
    assert items["table oak"]["goal_level"] and items["table oak"]["goals_met"]
    assert "goals_met" not in items["distractors"]  # no goal is stated for distractors
    assert items["distractors"]["unexplained_segments"] >= 3  # purple, cyan and a blue one (unused in scene 1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| table oak |" in table.read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--perturb", "nope"], "--perturb: 'nope' is neither a suite"),
    (["--plot", "x.png"], "--plot/--markdown: only with --perturb"),
    (["--perturb", "clean", "--no-depth"], "--perturb: scores perception with depth"),
    (["--colour-model", "/no/such.yaml"], "--colour-model: colour model: /no/such.yaml does not exist"),
])
def test_bad_perturbation_input_exits_2_naming_the_field(argv: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perception", "eval", *argv]) == 2
    assert message in capsys.readouterr().err
