"""``--tasks b,a`` runs b before a, as the official evaluate.py keeps the order given, and refuses what it
refuses a list spanning scenes; here such a list runs (see ``parse_task_list``); an id given twice is
refused; ``run.json``'s ``arguments.tasks`` keeps the order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.cli import main
from robofollow_ros.evaluation.runner import EvalConfig
from robofollow_ros.evaluation.selection import parse_task_list, select_tasks

A, B, C = "L0_pickup_yellow_block_1_left", "L0_pickup_yellow_block_1_right", "L0_pickup_yellow_block_2"
OTHER_SCENE = "L0_pickup_red_cylinder"
L1 = "L1_s11_pick_left_of_green"


def test_the_order_given_is_the_trial_order() -> None:
    reg = default_registry()
    ids = parse_task_list(f"{C},{A},{L1},{B}")
    assert ids == (C, A, L1, B)
    chosen = select_tasks(reg, ["scene1"], ["L0", "L1"], None, ids)
    assert [t.task_id for t in chosen] == [C, A, L1, B]
    assert [t.task_id for t in select_tasks(reg, ["scene1"], ["L0"], 2, ids)] == [C, A]  # limit: first given
    assert [t.task_id for t in select_tasks(reg, ["scene1"], ["L0"], None, None)][:2] == [A, B]  # registry order


def test_an_id_given_twice_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=f"^--tasks: {B} given twice$"):
        parse_task_list(f"{B},{A},{B}")


def test_eval_refuses_a_duplicate_in_one_line_before_anything_is_written(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r"
    assert main(["eval", "--policy", "oracle", "--tasks", f"{A},{OTHER_SCENE},{A}", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "given twice" in err[0] and not out.exists()


def test_run_json_keeps_the_order_given(tmp_path: Path) -> None:
    config = EvalConfig(policy="oracle", output=tmp_path / "r", tasks=(B, A), rounds=1, render=False)
    arguments = json.loads(json.dumps(config.arguments()))
    assert arguments["tasks"] in (f"{B},{A}", [B, A])


def test_run_json_says_when_the_official_evaluator_cannot_rerun_the_task_list() -> None:
    from robofollow_ros.evaluation.run_record import official_rerun

    spanning = official_rerun("L0_pickup_red_cylinder,L0_pickup_yellow_block_1_left",
                              [("scene2", "L0_pickup_red_cylinder"), ("scene1", "L0_pickup_yellow_block_1_left")])
    assert spanning["reproducible"] is False and "2 scenes (scene1, scene2)" in spanning["why"]
    one = official_rerun("L0_pickup_red_cylinder,L0_pickup_blue_cylinder",
                         [("scene2", "L0_pickup_red_cylinder"), ("scene2", "L0_pickup_blue_cylinder")])
    assert one == {"reproducible": True, "why": None}
    assert official_rerun(None, [("scene1", "a"), ("scene2", "b")])["reproducible"] is True  # --scene all: fine
