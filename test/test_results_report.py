"""``robofollow report``: Table 1 of a run, published models beside it, and the PNG plot."""

from __future__ import annotations

import json

from robofollow_ros.benchmark import default_registry
from robofollow_ros.cli import main
from robofollow_ros.evaluation.report import published_table
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.scoring import score_trajectory
from robofollow_ros.scoring.synthetic import Puppet


def make_run(tmp_path):
    reg = default_registry()
    task = reg.eval_task("L0_pickup_yellow_block_1_left")
    good = score_trajectory(task, Puppet(task).pick("left", task.source).home("left").frames)
    bad = score_trajectory(task, Puppet(task).hold(2).frames)
    run_dir = tmp_path / "myrun"
    with RunWriter(run_dir, arguments={}, selected_tasks=[("scene1", task.task_id)], expected_trials=2) as run:
        run.record_trial(good, task=task, round_index=1, seed=task.seed(1))
        run.record_trial(bad, task=task, round_index=2, seed=task.seed(2))
    return run_dir


def test_report_table_and_png(tmp_path, capsys):
    run_dir = make_run(tmp_path)
    assert main(["report", str(run_dir), "--compare", "PI05", "pi0"]) == 0
    out = capsys.readouterr().out
    s1 = next(line for line in out.splitlines() if line.startswith("S1"))
    assert "50.0/50.0/50.0" in s1  # IS, ES, CR of one full and one empty trial, in percent
    assert "99.1/98.5/98.8" in out  # PI05, S1 L0 from results.csv
    png = run_dir / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_json(tmp_path, capsys):
    run_dir = make_run(tmp_path)
    assert main(["report", str(run_dir), "--no-plot", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"]["S1"]["L0"] == {"IS": 50.0, "ES": 50.0, "CR": 50.0}
    assert data["png"] is None and not (run_dir / "report.png").exists()


def test_report_bad_input_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().err
    run_dir = make_run(tmp_path)
    assert main(["report", str(run_dir), "--compare", "GPT9"]) == 2
    assert "unknown model 'GPT9'" in capsys.readouterr().err


def test_published_table_by_name_or_id():
    assert published_table("PI0")["S2"]["L1"] == {"IS": 77.5, "ES": 67.1, "CR": 66.3}
    assert published_table("π₀") == published_table("PI0")
