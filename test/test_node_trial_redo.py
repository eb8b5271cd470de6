"""Redo of trials already recorded, over DDS in the mock profile's graph (one process here).

The layouts wait for the operator's confirmation (``auto_confirm: false``), as on the rig. Round 1 runs and is
recorded, and marked "success" after it ended. While round 2 waits for its table, the redo service (key ``d``)
runs round 1 again at once — the last recorded trial, not the one waiting — as ``…_attempt2``; round 2 waits
until after it. While round 2 runs, ``/robofollow/trial/redo_trial`` names round 1 (its attempt-2 id): it
runs again after round 2, as attempt 3. results.json and SQLite hold one entry per round, round 1's being
attempt 3 with attempts 1 (with its mark) and 2 inside ``superseded_attempts``; the summary counts two
trials, and a name that is no recorded trial is refused in one line.
"""

from __future__ import annotations

import json
import sqlite3

from std_msgs.msg import String
from std_srvs.srv import Trigger

from profile_graph import start_profile_graph
from robofollow_ros.exit_status import EXIT_OK
from robofollow_ros.nodes import trial_protocol as tp
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"


def test_a_recorded_trial_is_redone_its_entry_kept_as_superseded_and_counted_once(tmp_path):
    run = tmp_path / "run"
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: list[String] = []
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got), tp.LATCHED)
        mark = operator.create_publisher(String, tp.TOPIC_MARK, 10)
        redo_trial = operator.create_publisher(String, tp.TOPIC_REDO_TRIAL, 10)
        confirm = operator.create_client(Trigger, tp.SERVICE_CONFIRM_RESET)
        redo = operator.create_client(Trigger, tp.SERVICE_REDO)
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 2, "actions_per_step": 10,
                                   "auto_confirm": False, "health_checks": "",
                                   "output": str(run)}})["trial_manager_node"]

        def states() -> list[dict]:  # type: ignore[type-arg]
            return [json.loads(m.data) for m in got]

        def reached(phase: str, round_index: int, attempt: int) -> bool:
            return any(t["phase"] == phase and t.get("round") == round_index and t.get("attempt") == attempt
                       for t in states())

        def waiting(round_index: int, attempt: int) -> None:
            ros.wait_for(lambda: manager.phase == tp.PHASE_AWAITING_CONFIRM and
                         manager.trial.get("round") == round_index and manager.trial.get("attempt") == attempt,
                         timeout=60, what=f"round {round_index} attempt {attempt} waiting for its table")

        def confirmed(round_index: int, attempt: int) -> None:
            waiting(round_index, attempt)
            assert ros.call_trigger(confirm, "confirm_reset").success

        confirmed(1, 1)
        waiting(2, 1)  # round 1 is recorded; round 2 waits for its table
        round_1 = next(t["id"] for t in states() if t.get("round") == 1)
        mark.publish(String(data=json.dumps({"verdict": "success", "note": "first try"})))
        ros.wait_for(lambda: "operator_mark" in (manager.records.entry(manager._last_key) or {}),
                     what="the mark on the recorded round 1")
        reply = ros.call_trigger(redo, "redo between trials")
        assert reply.success and f"recorded trial {round_1} runs again now" in reply.message, reply.message
        confirmed(1, 2)  # round 1 again, before round 2
        assert any(t.get("id") == f"{round_1}_attempt2" for t in states())
        confirmed(2, 1)  # round 2 comes back as it was
        ros.wait_for(lambda: reached(tp.PHASE_RUNNING, 2, 1), timeout=60, what="round 2 running")
        ok, why = manager.redo("L0_no_such_trial_r1_s1")
        assert not ok and why.startswith("trial 'L0_no_such_trial_r1_s1' is not a recorded trial of this run")
        redo_trial.publish(String(data=f"{round_1}_attempt2"))  # names round 1 by one of its attempts
        ros.wait_for(lambda: len(manager._redos) == 1, what="round 1 queued after round 2")
        confirmed(1, 3)
        ros.wait_for(manager.finished.is_set, timeout=60, what="the run's end")
        assert manager.exit_code == EXIT_OK
        order = [(t["round"], t["attempt"]) for t in states() if t["phase"] == tp.PHASE_RUNNING]
        assert order == [(1, 1), (1, 2), (2, 1), (1, 3)], order

    first, second = json.loads((run / "results.json").read_text())
    assert (first["round"], first["attempt"], second["round"]) == (1, 3, 2) and "attempt" not in second
    assert "fault" not in first and first["policy_steps"] == 2 and "operator_mark" not in first
    one, two = first["superseded_attempts"]
    assert (one["attempt"], one["trial_id"], two["attempt"], two["trial_id"]) == (
        1, round_1, 2, f"{round_1}_attempt2")
    assert one["superseded_by_redo"] and two["superseded_by_redo"] and "fault" not in one and "fault" not in two
    assert one["operator_mark"] == {"verdict": "success", "note": "first try"}  # kept with its attempt
    assert "superseded_attempts" not in one and "superseded_attempts" not in two  # flat: one list per trial
    summary = json.loads((run / "summary.json").read_text())
    (group,) = summary["groups"].values()
    assert group["episodes"] == 2, summary
    with sqlite3.connect(run / "results.sqlite") as db:
        rows = db.execute("SELECT trial_index, result_json FROM trials ORDER BY trial_index").fetchall()
        stages = db.execute("SELECT COUNT(*) FROM stage_scores WHERE trial_index = ?", (rows[0][0],)).fetchone()[0]
    assert len(rows) == 2 and json.loads(rows[0][1])["attempt"] == 3
    assert stages == len(first["phases"])  # the replaced attempt's stage scores went with it
