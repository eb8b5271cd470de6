"""One trial end to end over DDS, watched from outside as a user (or Foxglove) would see it:
latched trial state, live and final scores, joint states, TF with ground-truth objects, /clock,
and the trial services (stop ends the trial as an operator-stop fault and pauses, next goes on)."""

from __future__ import annotations

import json

import pytest
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.nodes import trial_protocol as tp
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"


@pytest.fixture
def graph(tmp_path):  # type: ignore[no-untyped-def]
    def start(max_steps: int, trials: str = f"tasks={TASK} rounds=2"):  # type: ignore[no-untyped-def]
        ros = RosHarness()
        got: dict[str, list] = {k: [] for k in ("trial", "score", "joints", "tf", "static", "clock", "objects",
                                                "left_driver", "right_driver", "description")}
        watcher = ros.node("watcher")
        watcher.create_subscription(String, "/robofollow/trial",
                                    ros.collector(got["trial"]), tp.LATCHED)
        watcher.create_subscription(String, "/robofollow/score", ros.collector(got["score"]), 100)
        watcher.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), 100)
        watcher.create_subscription(TFMessage, "/tf", ros.collector(got["tf"]), 100)
        watcher.create_subscription(TFMessage, "/tf_static", ros.collector(got["static"]), tp.LATCHED)
        watcher.create_subscription(Clock, "/clock", ros.collector(got["clock"]), 100)
        watcher.create_subscription(MarkerArray, "/robofollow/objects", ros.collector(got["objects"]), 100)
        # the rig's own driver topics (config/rig/arm_drivers.yaml): the arm bridge commands them, the sim obeys
        for arm in ("left", "right"):
            watcher.create_subscription(JointTrajectory, f"/{arm}_arm_controller/joint_trajectory",
                                        ros.collector(got[f"{arm}_driver"]), 100)
        watcher.create_subscription(String, "/robot_description", ros.collector(got["description"]), tp.LATCHED)
        nodes = start_profile_graph(ros, "sim", {
            "sim_node": {"render": False}, "policy_node": {"request_images": False},
            "trial_manager_node": {"trials": trials, "max_steps": max_steps, "output": str(tmp_path / "run"),
                                   "wait_for_nodes": ["sim_node", "arm_bridge_node", "policy_node",
                                                      "stage_monitor_node", "watcher"]}})
        manager = nodes["trial_manager_node"]
        started.append(ros)
        return ros, manager, got, watcher

    started: list[RosHarness] = []
    yield start
    for ros in started:
        ros.close()


def _phases(got, trial_id=None):  # type: ignore[no-untyped-def]
    out = []
    for msg in got["trial"]:
        trial = json.loads(msg.data)
        if trial_id is None or trial.get("id") == trial_id:
            out.append(trial["phase"])
    return out


def test_one_trial_end_to_end_over_dds(graph):
    ros, manager, got, _ = graph(max_steps=3, trials=f"tasks={TASK} rounds=1")
    ros.wait_for(manager.finished.is_set, timeout=60, what="the trial")
    # the finished phase reaches this test's subscription after the manager set its flag
    ros.wait_for(lambda: got["trial"] and json.loads(got["trial"][-1].data)["phase"] == tp.PHASE_FINISHED,
                 what="the finished phase")
    trial_id = json.loads(got["trial"][-1].data)["id"]
    phases = [p for p in _phases(got, trial_id) if p not in (tp.PHASE_IDLE,)]
    assert phases == [tp.PHASE_RESETTING, tp.PHASE_STARTING, tp.PHASE_RUNNING, tp.PHASE_SCORING, tp.PHASE_DONE,
                      tp.PHASE_FINISHED]

    ros.wait_for(lambda: any(json.loads(m.data)["final"] for m in got["score"]), what="final score")
    scores = [json.loads(m.data) for m in got["score"]]
    final = [s for s in scores if s["final"]]
    assert len(final) == 1 and final[0]["frames"] == 3 * 5 + 1 and final[0]["result"]["task"] == TASK
    live = [s for s in scores if not s["final"]]
    frames = [s["frame"] for s in live]
    assert frames == sorted(set(frames)) and frames[-1] == 15  # live updates in frame order, up to the last
    assert set(final[0]) >= {"task", "scene", "level", "intent", "exec", "complete", "stages", "trial_id"}

    # the watcher's copies may still be in flight when the manager finishes: wait for them, then look
    ros.wait_for(lambda: len(got["joints"]) >= 16 and got["clock"] and got["tf"] and got["objects"],
                 what="every joint state, clock, TF and object message")
    ros.wait_for(lambda: got["clock"][-1].clock == got["joints"][-1].header.stamp, what="the last /clock")
    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in got["joints"]]
    assert len(stamps) == 16 and stamps == sorted(set(stamps))  # frame 0 + 15 rows, strictly later each
    assert list(got["joints"][0].name) == list(JOINT_NAMES)
    clock = [m.clock.sec * 10**9 + m.clock.nanosec for m in got["clock"]]
    assert clock == sorted(set(clock)) and set(clock) <= set(stamps) and clock[-1] == stamps[-1]
    frames = {t.child_frame_id for m in got["tf"] for t in m.transforms}
    # every moving link of the URDF, from the measured joint states (robot_state_node), and the objects (sim)
    assert {f"{arm}_link{i}" for arm in ("left", "right") for i in range(1, 7)} <= frames
    assert {"left_finger_a", "right_finger_b", "object/large_red_cylinder"} <= frames
    link_stamps = {m.transforms[0].header.stamp.sec * 10**9 + m.transforms[0].header.stamp.nanosec
                   for m in got["tf"] if m.transforms[0].child_frame_id == "left_link1"}
    assert link_stamps == set(stamps)  # one TF update per measured state, stamped with it
    ros.wait_for(lambda: got["static"] and got["description"], what="/tf_static and /robot_description")
    static = {t.child_frame_id for m in got["static"] for t in m.transforms}
    assert {"left_base", "right_base", "left_tcp", "right_wrist_camera", "head_camera", "head_camera_optical",
            "left_wrist_camera_optical"} <= static
    assert '<robot name="robofollow_rig">' in got["description"][-1].data
    assert {m.ns for m in got["objects"][-1].markers} >= {"large_red_cylinder"}
    # sim time everywhere: every node's clock follows the sim's /clock (stamps and clocks agree)
    nodes = [n for n in ros.nodes if n.get_name() != "watcher"]
    assert all(n.get_parameter("use_sim_time").value for n in nodes)
    ros.wait_for(lambda: all(n.get_clock().now().nanoseconds == clock[-1] for n in nodes),
                 what="every node's clock at the last /clock")
    # the dry run drove the rig's command path: every row reached both arms' driver topics, in driver names
    ros.wait_for(lambda: len(got["left_driver"]) >= 15 and len(got["right_driver"]) >= 15, what="driver commands")
    assert len(got["left_driver"]) == len(got["right_driver"]) == 15
    assert list(got["left_driver"][0].joint_names) == [f"fl_joint{i}" for i in range(1, 8)]


def test_stop_ends_the_trial_as_the_operators_and_pauses_then_next_goes_on(graph):
    ros, manager, got, watcher = graph(max_steps=100000)
    ros.wait_for(lambda: tp.PHASE_RUNNING in _phases(got) and len(got["joints"]) > 5, timeout=60, what="running")
    stop = watcher.create_client(Trigger, "/robofollow/trial/stop")
    next_ = watcher.create_client(Trigger, "/robofollow/trial/next")
    assert stop.wait_for_service(timeout_sec=10)
    future = stop.call_async(Trigger.Request())
    ros.wait_for(future.done, what="stop reply")
    assert future.result().success
    ros.wait_for(lambda: _phases(got)[-1] == tp.PHASE_DONE, timeout=60, what="the stopped trial recorded")
    first = json.loads((manager.run_dir / "results.json").read_text())
    assert len(first) == 1 and first[0]["round"] == 1 and 0 < first[0]["policy_steps"] < 100000
    assert first[0]["frames"] >= 6  # the rows executed so far were scored ...
    assert first[0]["fault"] == "operator-stop" and "partial_result" in first[0]  # ... but are not the policy's result
    assert first[0]["intent_score"] == 0.0 and "policy_error" not in first[0]
    assert not manager.finished.is_set()  # paused: round 2 does not start by itself
    count = len(got["trial"])
    future = next_.call_async(Trigger.Request())
    ros.wait_for(future.done, what="next reply")
    ros.wait_for(lambda: any(json.loads(m.data).get("round") == 2 for m in got["trial"][count:]), what="round 2")
