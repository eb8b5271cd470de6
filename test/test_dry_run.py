"""The main job's dry run: a served policy, the ROS graph against it, the headless reference, compared."""

from __future__ import annotations

import json

from robofollow_ros.dry_run import compare_verdicts, dry_run_task_ids, run_dry_run


def _entry(task: str, rnd: int, intent: float, complete: bool) -> dict:
    return {"task": task, "round": rnd, "intent_score": intent, "exec_score": intent, "completion_ok": complete}


def test_compare_verdicts_names_every_difference():
    ros = [_entry("a", 1, 1.0, True), _entry("b", 1, 0.4, False)]
    headless = [_entry("a", 1, 1.0, True), _entry("b", 1, 0.8, False), _entry("c", 1, 0.0, False)]
    compared, diffs = compare_verdicts(ros, headless)
    assert compared == 2
    assert "b r1: intent_score 0.4 over ROS vs 0.8" in diffs
    assert "b r1: exec_score 0.4 over ROS vs 0.8" in diffs
    assert "c r1: missing over ROS" in diffs
    assert compare_verdicts(headless, headless) == (3, [])


def test_default_trials_cover_every_scene_at_l0_and_l1(registry):
    ids = dry_run_task_ids(registry)
    tasks = [registry.eval_task(i) for i in ids]
    assert [(t.scene, t.level) for t in tasks] == [(s, lv) for s in ("scene1", "scene2", "scene3", "scene4")
                                                   for lv in ("L0", "L1")]


def test_served_policy_over_ros_equals_headless(tmp_path, registry):
    outcome = run_dry_run(tmp_path / "dry", registry, policy="hold", render=False, foxglove_port=0)
    assert outcome.compared == 8 and outcome.differences == []
    ros = json.loads((outcome.ros_dir / "results.json").read_text())
    assert [e["task"] for e in ros] == dry_run_task_ids(registry)
    assert "tcp://127.0.0.1:" in outcome.table  # the graph ran against the served process
    assert len(list((outcome.ros_dir / "mcap").glob("*.mcap"))) == 8
    # The demo's served oracle needs the ground truth over the wire: the dry run asks for it (--privileged
    # on its bringup, privileged on the headless reference), and both runs say so.
    for run_dir in (outcome.ros_dir, outcome.headless_dir):
        assert json.loads((run_dir / "run.json").read_text())["arguments"]["privileged"] is True
