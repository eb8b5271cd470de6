"""A reader that matches only after a trial's start state went out still gets that state.

Under load, discovery between processes is slow, and a node being seen on /robofollow/trial says nothing
about its other endpoints: the stage monitor's /tf or /joint_states reader may match after sim_node
published the start state, and the trial manager waits for the scorer to hold that state before any row
runs (phase ``starting``). So sim_node sends the start state again to a reader that matches before the
first row, and arm_bridge_node its last /joint_states. The late reader here lives in its own context
(its own DDS participant, as another process's node would) and joins after the reset."""

from __future__ import annotations

import json

from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import objects_from_markers, objects_from_transforms, stamp_ns
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
ONLY_THE_DRIVERS_AND_BRIDGE = ("foxglove_node", "policy_node", "stage_monitor_node", "trial_manager_node",
                               "robot_state_node")


def test_a_reader_matched_after_the_reset_gets_the_start_state(registry):
    with RosHarness() as ros, RosHarness() as late_ros:
        start_profile_graph(ros, "sim", {"sim_node": {"render": False}}, leave_out=ONLY_THE_DRIVERS_AND_BRIDGE)
        probe = ros.node("probe")
        status: list[String] = []
        probe.create_subscription(String, tp.TOPIC_SIM_STATUS, ros.collector(status), tp.LATCHED)
        trial = probe.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        trial.publish(String(data=tp.encode({"id": "t1", "phase": tp.PHASE_RESETTING, "task": TASK,
                                             "seed": registry.eval_task(TASK).seed(1)})))
        ros.wait_for(lambda: status and json.loads(status[-1].data)["state"] == "ready", timeout=120,
                     what="the sim's start state")
        start = json.loads(status[-1].data)["stamp_ns"]

        got: dict[str, list] = {"tf": [], "joints": [], "objects": []}
        late = late_ros.node("late_reader")  # created after the start state was published
        late.create_subscription(TFMessage, "/tf", late_ros.collector(got["tf"]), tp.STATE_STREAM)
        late.create_subscription(JointState, "/joint_states", late_ros.collector(got["joints"]), tp.STATE_STREAM)
        late.create_subscription(MarkerArray, "/robofollow/objects", late_ros.collector(got["objects"]),
                                 tp.STATE_STREAM)

        def object_stamps() -> set[int]:
            return {s for msg in got["tf"] for s in objects_from_transforms(msg.transforms)}

        late_ros.wait_for(lambda: start in object_stamps() and got["objects"]
                          and any(stamp_ns(m.header.stamp) == start for m in got["joints"]),
                          timeout=60, what="the start state on /tf, /robofollow/objects and /joint_states")
        # The very state of the reset (the layout's objects, through the arm bridge's mapping), not a new one.
        assert object_stamps() == {start}
        assert {stamp_ns(m.header.stamp) for m in got["joints"]} == {start}
        stamp, positions, _ = objects_from_markers(got["objects"][-1])
        layout = registry.layout_of(registry.eval_task(TASK))
        assert stamp == start and set(positions) == {o.name for o in layout.objects}
