"""One name for a trial's real-time counters (issue 38 item 3): ``execution`` in eval's results and the ROS
graph's alike (the trial manager writes ``counters_record`` of policy_node's counters); a ROS run written
before, with ``realtime``, still reads."""

from __future__ import annotations

import pytest

from robofollow_ros.evaluation.execution_mode import counters_record, trial_execution


def test_counters_are_recorded_as_eval_records_them() -> None:
    record = counters_record({"requests": 5, "chunks": 4, "latencies_s": [0.1, 0.3, 0.2], "chunk_ticks": [0, 9]})
    assert record["mode"] == "realtime" and record["requests"] == 5 and record["chunk_ticks"] == [0, 9]
    assert "latencies_s" not in record
    assert record["latency_s"]["n"] == 3 and record["latency_s"]["max"] == 0.3
    assert record["latency_s"]["mean"] == pytest.approx(0.2) and record["latency_s"]["p50"] == pytest.approx(0.2)
    assert counters_record({"requests": 0})["latency_s"] is None


def test_an_old_ros_result_reads_under_the_shared_name() -> None:
    old = {"task": "t", "realtime": {"requests": 2, "latencies_s": [0.5], "hold_tick_list": [3]}}
    assert trial_execution(old) == {"mode": "realtime", "requests": 2, "hold_tick_list": [3],
                                    "latency_s": {"n": 1, "mean": 0.5, "p50": 0.5, "p90": 0.5, "max": 0.5}}
    new = {"task": "t", "execution": {"mode": "realtime", "requests": 7}, "realtime": {"requests": 1}}
    assert trial_execution(new) == {"mode": "realtime", "requests": 7}  # the new name wins
    assert trial_execution({"task": "t"}) is None  # lock-step
