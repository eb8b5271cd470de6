"""Instruction controls (issue 39): planned beside every trial on its seed, recorded and resumable, and what
they measure. The end-to-end cases run the oracle (reads the privileged task id, never the words) and the
memorizer (reads only the words) headless on two L0 tasks whose swap draws an instruction the memorizer was
trained on (an L0 instruction is a training variant verbatim)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from robofollow_ros.evaluation.control_stats import control_report, format_controls
from robofollow_ros.evaluation.controls import CONTROLS, behaviour, parse_controls, plan_control, with_controls
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.evaluation.selection import trial_keys
from robofollow_ros.rundir import RunDirError
from test_cli_tasks import ROBOFOLLOW

#: Two L0 tasks whose round-1 swap lands on another L0 task of the layout (chosen by plan_control, not by hand).
TASKS = ("L0_pickup_yellow_block_2", "L0_push_red_cylinder_to_left_cube")


def _config(tmp_path: Path, policy: str, name: str, **kw) -> EvalConfig:  # type: ignore[no-untyped-def]
    base = dict(policy=policy, output=tmp_path / name, tasks=TASKS, scenes=("scene1", "scene2"), levels=("L0",),
                rounds=1, backend="inline", controls=CONTROLS)
    base.update(kw)
    return EvalConfig(**base)


def test_parse_controls_orders_and_refuses_in_one_line() -> None:
    assert parse_controls("swap,blank") == ("blank", "swap")
    assert parse_controls(None) == ()
    with pytest.raises(ValueError, match="--controls: 'mute' is not one of"):
        parse_controls("blank,mute")
    with pytest.raises(ValueError, match="--controls: swap given twice"):
        parse_controls("swap,swap")


def test_plans_change_only_the_words_and_are_drawn_by_seed(registry) -> None:  # type: ignore[no-untyped-def]
    task = registry.eval_task(TASKS[0])
    assert plan_control(registry, task, "blank", task.seed(1)).instruction == ""
    swap = plan_control(registry, task, "swap", task.seed(1))
    other = registry.eval_task(swap.scored_task)
    assert other.layout == task.layout and other.scene == task.scene and behaviour(other) != behaviour(task)
    assert swap.instruction == other.instruction
    shuffled = plan_control(registry, task, "shuffled", task.seed(1))
    assert shuffled.scored_task is None and shuffled.instruction != task.instruction
    para = plan_control(registry, task, "paraphrase", task.seed(1))
    assert para.scored_task is None and para.instruction.lower() != task.instruction.lower()
    assert para.instruction in registry.training_task(task.base_task_type).instructions
    # the same seed draws the same; the draws over seeds are not all one
    assert plan_control(registry, task, "shuffled", task.seed(1)) == shuffled
    assert len({plan_control(registry, task, "shuffled", task.seed(r)).instruction for r in range(1, 11)}) > 1


def test_a_control_without_a_candidate_is_skipped_and_said(registry) -> None:  # type: ignore[no-untyped-def]
    lonely = next(t for t in registry.evaluation if plan_control(registry, t, "swap", t.seed(1)) is None)
    keys, skipped = with_controls(registry, trial_keys([lonely], 1), ("blank", "swap"))
    assert [k.control for k in keys] == ["", "blank"]
    assert skipped == [{"trial": keys[0].trial_id, "control": "swap", "reason": "no other task in this layout"}]


def test_stats_signs_and_mcnemar_on_synthetic_pairs() -> None:
    def entry(task: str, control: str = "", done: bool = True, **kw):  # type: ignore[no-untyped-def]
        e = {"task": task, "round": 1, "seed": 7, "scene": "scene1", "level_tag": "L0", "completion_ok": done,
             "intent_score": 1.0 if done else 0.0, "exec_score": 1.0 if done else 0.0, **kw}
        if control:
            e.update(control=control, partner=f"{task}_r1_s7")
        return e

    trials = []
    for i in range(6):
        t = f"t{i}"
        trials += [entry(t), entry(t, "blank", done=False),
                   entry(t, "swap", done=i < 4, original_verdict={"completion_ok": i >= 4})]
    report = control_report(trials, n_resamples=500)
    blank = report["blank"]["all"]
    assert blank["n"] == 6 and blank["CR"]["value"] == 1.0 and blank["CR"]["only_true"] == 6
    assert blank["CR"]["mcnemar_p"] == pytest.approx(2 / 2**6)
    assert blank["CR_control"]["k"] == 0 and blank["CR_control"]["ci"][1] > 0  # Wilson: never a point
    swap = report["swap"]["scene1/L0"]
    assert (swap["follows_new"]["k"], swap["still_old"]["k"], swap["n"]) == (4, 2, 6)
    assert "n=6" in format_controls(report)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("controls")
    for policy in ("oracle", "memorizer"):
        run_evaluation(_config(tmp, policy, policy, settings=_settings()))
    return tmp


def _settings():  # type: ignore[no-untyped-def]
    from robofollow_ros.evaluation.episode import EpisodeSettings

    return EpisodeSettings()


def _results(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "results.json").read_text())


def test_every_control_is_a_recorded_trial_paired_with_its_true_one(runs) -> None:  # type: ignore[no-untyped-def]
    run_dir = runs / "oracle"
    results = _results(run_dir)
    assert [(e["task"], e.get("control", "")) for e in results] == [(t, c) for t in TASKS for c in ("", *CONTROLS)]
    seeds = {e["task"]: e["seed"] for e in results if "control" not in e}
    for e in results:
        assert e["seed"] == seeds[e["task"]]
        if "control" in e:
            assert e["partner"] == f"{e['task']}_r1_s{e['seed']}"
    swap = next(e for e in results if e.get("control") == "swap")
    assert swap["scored_task"] != swap["task"] and swap["original_verdict"]["task"] == swap["task"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["arguments"]["controls"] == list(CONTROLS) and run["controls"]["asked"] == list(CONTROLS)
    assert run["expected_trials"] == len(results) == 10
    summary = json.loads((run_dir / "summary.json").read_text())  # true trials only
    assert sum(g["episodes"] for g in summary["groups"].values()) == 2
    with sqlite3.connect(run_dir / "results.sqlite") as conn:
        rows = conn.execute("SELECT task, control FROM trials ORDER BY trial_index").fetchall()
    assert rows == [(e["task"], e.get("control", "")) for e in results]


def test_resume_refuses_other_controls_and_runs_nothing_twice(runs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RunDirError, match="controls"):
        run_evaluation(_config(runs, "oracle", "oracle", controls=("blank",), resume=True, settings=_settings()))
    outcome = run_evaluation(_config(runs, "oracle", "oracle", resume=True, settings=_settings()))
    assert outcome.recorded == 0 and len(_results(runs / "oracle")) == 10


def test_oracle_ignores_the_words_and_the_memorizer_follows_them(runs) -> None:  # type: ignore[no-untyped-def]
    oracle = control_report(_results(runs / "oracle"), n_resamples=500)
    for control in ("blank", "shuffled", "paraphrase"):
        assert oracle[control]["all"]["CR"]["value"] == 0.0 and oracle[control]["all"]["IS"]["value"] == 0.0
    assert oracle["swap"]["all"]["follows_new"]["k"] == 0 and oracle["swap"]["all"]["still_old"]["k"] == 2
    assert oracle["paraphrase"]["all"]["same_verdict"]["k"] == 2

    memorizer = control_report(_results(runs / "memorizer"), n_resamples=500)
    assert memorizer["blank"]["all"]["CR_true"]["k"] == 2 and memorizer["blank"]["all"]["CR"]["value"] > 0
    assert memorizer["swap"]["all"]["follows_new"]["k"] == 2
    assert memorizer["paraphrase"]["all"]["same_verdict"]["k"] == 2


def test_report_controls_text_json_csv_and_plot(runs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_dir = runs / "memorizer"
    proc = subprocess.run([ROBOFOLLOW, "report", str(run_dir), "--controls", "--json", "--bootstrap", "200",
                           "--csv", str(tmp_path / "csv"), "--png", str(tmp_path / "c.png")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data["controls"]) == set(CONTROLS) and (tmp_path / "c.png").stat().st_size > 1000
    rows = (tmp_path / "csv" / "controls.csv").read_text().splitlines()
    assert rows[0].startswith("control,scene,level,measure,n")
    assert "swap,all,all,follows_new,2,2,1.0," in rows[1:][[r.split(",")[:4] for r in rows[1:]].index(
        ["swap", "all", "all", "follows_new"])]
    main = subprocess.run([ROBOFOLLOW, "report", str(run_dir), "--json", "--no-plot", "--bootstrap", "200"],
                          capture_output=True, text=True, timeout=120)
    assert main.returncode == 0, main.stderr
    cells = json.loads(main.stdout)["cells"]  # true trials only: the blank failures are not in the main table
    assert [(c["n"], c["CR"]) for c in (cells["S1"]["L0"], cells["S2"]["L0"])] == [(1, 100.0), (1, 100.0)]


def test_an_old_store_gains_the_control_column(tmp_path) -> None:
    from robofollow_ros.rundir.store import RunStore

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript("CREATE TABLE trials (run_id TEXT, trial_index INTEGER, scene TEXT, level TEXT, "
                           "layout TEXT, task TEXT, round INTEGER, seed INTEGER, intent_score REAL, exec_score REAL,"
                           " intent_ok INTEGER, exec_ok INTEGER, completion_ok INTEGER, result_json TEXT, "
                           "PRIMARY KEY (run_id, trial_index));"
                           "CREATE UNIQUE INDEX trials_once ON trials (run_id, task, round);")
    with RunStore(path) as store:
        indexes = {r[1] for r in store.conn.execute("PRAGMA index_list(trials)")}
        columns = {r[1] for r in store.conn.execute("PRAGMA table_info(trials)")}
    assert "control" in columns and "trials_once" not in indexes and "trials_once_per_control" in indexes
