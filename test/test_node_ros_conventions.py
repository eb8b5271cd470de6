"""ROS conventions of the graph, on the mock profile over DDS (foxglove_node recording, as bringup runs it).

- Latched state keeps depth 1: a subscriber that joins while a trial runs gets the current trial state
  first (not ``idle`` from the writer's history); one that joins after the run gets the last state and
  the final score alone.
- Every trial bag holds its own trial's instruction, exactly once, whatever order the instruction and the
  trial state arrive in (three trials of three different instructions, one after the other).
- ``next`` on the last trial says there is no next trial; after the run it refuses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rclpy.parameter import Parameter
from std_msgs.msg import String
from std_srvs.srv import Trigger

from profile_graph import start_profile_graph
from robofollow_ros.contract import SERVICE_TRIAL_NEXT, TOPIC_INSTRUCTION, TOPIC_SCORE, TOPIC_TRIAL
from robofollow_ros.nodes import trial_protocol as tp
from ros_harness import RosHarness

#: Three tasks of three different instructions: a bag holding its neighbour's instruction shows.
TASKS = ("L0_pickup_yellow_block_1_left", "L0_pickup_yellow_block_2", "L0_pickup_yellow_block_3")
pytestmark = pytest.mark.timeout(300)


def _phase(msg: String) -> str:
    return str(json.loads(msg.data)["phase"])


def _call(ros: RosHarness, client: Any) -> Trigger.Response:
    assert client.wait_for_service(timeout_sec=30.0)
    future = client.call_async(Trigger.Request())
    ros.wait_for(future.done, timeout=30, what=f"an answer from {client.srv_name}")
    result = future.result()
    assert result is not None
    return result


def _late_reader(late: RosHarness, name: str) -> dict[str, list[String]]:
    """A new participant (as another process's ``ros2 topic echo`` would be), reading the trial state and the
    score the way the nodes do (transient local, a queue of 10)."""
    got: dict[str, list[String]] = {"trial": [], "score": []}
    node = late.node(name)
    node.create_subscription(String, TOPIC_TRIAL, late.collector(got["trial"]), tp.LATCHED)
    node.create_subscription(String, TOPIC_SCORE, late.collector(got["score"]), tp.LATCHED)
    return got


def _instructions(bag: Path) -> list[str]:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        wanted = [c for c in reader.connections if c.topic == TOPIC_INSTRUCTION]
        if not wanted:  # (rosbags reads every connection when given none)
            return []
        return [str(reader.deserialize(raw, c.msgtype).data)  # type: ignore[attr-defined]
                for c, _t, raw in reader.messages(connections=wanted)]


def test_latched_depth_one_next_on_the_last_trial_and_every_bag_holds_its_instruction(tmp_path, registry):
    run = tmp_path / "run"
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        seen: dict[str, list[String]] = {"trial": [], "score": []}
        watcher.create_subscription(String, TOPIC_TRIAL, ros.collector(seen["trial"]), tp.LATCHED)
        watcher.create_subscription(String, TOPIC_SCORE, ros.collector(seen["score"]), tp.LATCHED)
        next_trial = watcher.create_client(Trigger, SERVICE_TRIAL_NEXT)
        # Long trials (600 rows at 50 Hz): each is ended with `next` once it runs.
        nodes = start_profile_graph(ros, "mock", {
            "trial_manager_node": {"trials": f"tasks={','.join(TASKS)} rounds=1", "max_steps": 24,
                                   "actions_per_step": 25, "output": str(run), "health_checks": ""},
            "foxglove_node": {"serve": False}, "policy_node": {"stale_s": 2.0}}, leave_out=())
        manager = nodes["trial_manager_node"]

        answers = []
        for index, task in enumerate(TASKS):
            ros.wait_for(lambda t=task: seen["trial"] and _phase(seen["trial"][-1]) == tp.PHASE_RUNNING
                         and json.loads(seen["trial"][-1].data)["task"] == t, timeout=120,
                         what=f"trial {index + 1} running")
            if index == 0:  # a subscriber joining now gets the running state first, nothing older
                before = len(seen["trial"])
                with RosHarness() as late:
                    early = _late_reader(late, "late_reader")
                    late.wait_for(lambda: early["trial"], timeout=30,  # noqa: B023 (waited on here, in the loop)
                                  what="the latched trial state")
                    first = early["trial"][0]
                assert _phase(first) == tp.PHASE_RUNNING, [_phase(m) for m in early["trial"]]
                assert first.data in [m.data for m in seen["trial"][before - 1:]]  # the current one
            answers.append(_call(ros, next_trial))
        ros.wait_for(manager.finished.is_set, timeout=120, what="the run to finish")
        ros.wait_for(lambda: _phase(seen["trial"][-1]) == tp.PHASE_FINISHED and any(
            json.loads(m.data).get("final") for m in seen["score"][-1:]), timeout=30, what="the last state and score")
        after = _call(ros, next_trial)

        with RosHarness() as late:  # after the run: the last state and the final score, alone
            got = _late_reader(late, "late_reader_after")
            late.wait_for(lambda: got["trial"] and got["score"], timeout=30, what="the latched state and score")
            assert [m.data for m in got["trial"]] == [seen["trial"][-1].data]
            assert got["score"][0].data == seen["score"][-1].data and json.loads(got["score"][0].data)["final"]

    assert all(a.success for a in answers)
    assert "going on to the next trial" in answers[0].message and "no next trial" not in answers[1].message
    assert "last of 3" in answers[2].message and "no next trial" in answers[2].message
    assert not after.success and "no next trial" in after.message and "finished" in after.message

    results = json.loads((run / "results.json").read_text())
    assert [r["task"] for r in results] == list(TASKS)
    assert len(list((run / "mcap").glob("*.mcap"))) == len(TASKS)
    for task in TASKS:  # a bag is named after its trial: <task>_r<round>_s<seed>.mcap
        (bag,) = (run / "mcap").glob(f"{task}_r*.mcap")
        assert _instructions(bag) == [registry.eval_task(task).instruction], bag.name


def test_a_stall_of_the_joint_states_is_a_stale_state_fault_not_the_policys_verdict(tmp_path):
    run = tmp_path / "run"
    task = TASKS[0]
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        seen: list[String] = []
        watcher.create_subscription(String, TOPIC_TRIAL, ros.collector(seen), tp.LATCHED)
        nodes = start_profile_graph(ros, "mock", {
            "trial_manager_node": {"trials": f"tasks={task} rounds=2", "max_steps": 30, "actions_per_step": 25,
                                   "output": str(run), "health_checks": ""},
            "policy_node": {"stale_s": 2.0}})
        # 750 rows at 50 Hz (hold answers at once): several seconds of rows, the stall takes 4 s of them
        ros.wait_for(lambda: seen and _phase(seen[-1]) == tp.PHASE_RUNNING, timeout=120, what="trial 1 running")
        mock = nodes["mock_hardware_node"]  # the drivers fall silent for twice stale_s, from the next command on
        assert mock.set_parameters([Parameter("stall_states_s", value=4.0)])[0].successful
        ros.wait_for(nodes["trial_manager_node"].finished.is_set, timeout=120, what="both trials")
    stalled, clean = json.loads((run / "results.json").read_text())
    assert stalled["fault"] == "stale-state" and "stale" in stalled["fault_reason"]
    assert "policy_error" not in stalled and stalled["failure_class"] == "record_and_continue"
    assert "fault" not in clean and "policy_error" not in clean and clean["policy_steps"] == 30
