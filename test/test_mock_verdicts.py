"""One task and seed gives one verdict on mock hardware, however fast the graph answers (issue 30).

The same oracle trial runs through the mock profile's graph (real nodes over DDS) twice, once on a
snappy arm whose drivers report at 100 Hz and once on a sluggish one that reports at 20 Hz: the arm
reaches the grasp pose in very different numbers of rows, yet both trials score the same — the gripper
closes at the source (stage-1 intent full), and since the mock's objects never move it lifts nothing
(IS 0.8, ES 0.0). Before the fix the oracle's lock-step waypoints went out one per control tick, each
clamped to a step around the measured position (which the bridge, reading a backlog, had seconds late), so
where the gripper closed, if at all, followed the timing: the same command scored IS 0.0 and 0.8 on a
loaded machine, and this test's snappy arm never closed it (docs/ros.md, *One verdict per task and seed*).

``rate_kwargs``: only a rate-mode ``policy_node`` changes what the planner built-ins are given.

The headless evaluator's verdict for this task is not the expected one here: it runs physics, so its
oracle lifts the object, which mock hardware cannot do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from profile_graph import start_profile_graph
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
#: (state_hz, time_constant_s) of the mock's drivers: a snappy arm, and a sluggish one with slow reports.
TIMINGS = ((100.0, 0.02), (20.0, 0.12))
pytestmark = pytest.mark.timeout(300)


def _trial(tmp_path: Any, state_hz: float, time_constant_s: float) -> dict[str, Any]:
    run = tmp_path / f"run-{state_hz:g}hz"
    with RosHarness() as ros:
        nodes = start_profile_graph(ros, "mock", {
            "mock_hardware_node": {"state_hz": state_hz, "time_constant_s": time_constant_s},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 12, "output": str(run),
                                   "health_checks": ""},
            # one process for the whole graph here: its states come late at times, which is not under test
            "policy_node": {"policy": "oracle", "stale_s": 5.0}})
        ros.wait_for(nodes["trial_manager_node"].finished.is_set, timeout=200, what=f"the trial at {state_hz} Hz")
    (result,) = json.loads((run / "results.json").read_text())
    return result


def test_the_oracle_scores_the_same_on_a_snappy_and_a_sluggish_mock_arm(tmp_path):
    results = [_trial(tmp_path, hz, tau) for hz, tau in TIMINGS]
    for r in results:
        assert "fault" not in r and "policy_error" not in r, r
        stage1 = r["phases"][0]
        assert stage1["phase"] == "stage1_source_select" and stage1["intent_reason"] == "ok", stage1
    verdicts = [(r["intent_score"], r["exec_score"], r["completion_ok"]) for r in results]
    assert verdicts[0] == verdicts[1] == (0.8, 0.0, False), verdicts
    # the timings really differed: the sluggish arm needed more of the trial to get there
    assert results[0]["frames"] != results[1]["frames"]


def test_only_rate_mode_gives_the_planner_built_ins_dense_rows_that_settle():
    from robofollow_ros.nodes.policy_node import rate_kwargs

    assert rate_kwargs("oracle", {}, "rate", 50.0) == {"dense_hz": 50, "settle": True}
    assert rate_kwargs("memorizer", {"chunk_size": 20}, "rate", 25.0) == {"chunk_size": 20, "dense_hz": 25,
                                                                          "settle": True}
    assert rate_kwargs("oracle", {}, "lockstep", 50.0) == {}  # lock-step's waypoints: scoring parity
    assert rate_kwargs("oracle", {"dense_hz": 10}, "rate", 50.0) == {"dense_hz": 10}  # given: left as it is
    assert rate_kwargs("hold", {}, "rate", 50.0) == {}
    assert rate_kwargs("latency:200:oracle", {}, "rate", 50.0) == {}
