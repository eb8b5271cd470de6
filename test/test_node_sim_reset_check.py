"""The reset check in the sim profile's graph (real SAPIEN, physics only), with an object displaced on purpose.

``sim_node``'s ``displace_object`` moves the large red cylinder's body 4 cm to the right after the
layout settled. The trial waits in ``verifying_reset``: the verdict names the object, the way back and
the distance, ``/robofollow/reset_check`` draws its place where the layout puts it, and no row runs. The
operator's move back goes through the same parameter service (a parameter client over DDS); then the check
passes and the trial starts — from the state with the object back, not from the reset's (the scorer's
frame 0 must be the table the check passed). A bad value is refused in one line naming the parameter.
"""

from __future__ import annotations

import json

import numpy as np
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.benchmark import default_registry
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import stamp_ns
from robofollow_ros.nodes.reset_watch import TOPIC_RESET_CHECK
from robofollow_ros.rig.layout_poses import layout_rest_poses
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
MOVED = "large_red_cylinder"


def _set(ros: RosHarness, client: AsyncParameterClient, value: str):  # type: ignore[no-untyped-def]
    assert client.wait_for_services(timeout_sec=10), "sim_node's parameter services"
    future = client.set_parameters([Parameter("displace_object", value=value)])
    ros.wait_for(future.done, what="the parameter service's reply")
    (result,) = future.result().results
    return result


def test_a_displaced_sim_object_blocks_the_trial_until_moved_back(tmp_path):
    registry = default_registry()
    task = registry.eval_task(TASK)
    target = layout_rest_poses(registry.layout_of(task), task.seed(1))[MOVED].position
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "view": [], "objects": [], "sim": [], "commands": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(MarkerArray, TOPIC_RESET_CHECK, ros.collector(got["view"]), tp.LATCHED)
        operator.create_subscription(MarkerArray, "/robofollow/objects", ros.collector(got["objects"]),
                                     tp.STATE_STREAM)
        operator.create_subscription(String, tp.TOPIC_SIM_STATUS, ros.collector(got["sim"]), tp.LATCHED)
        operator.create_subscription(JointState, "/robofollow/joint_command", ros.collector(got["commands"]),
                                     tp.STATE_STREAM)
        sim = AsyncParameterClient(operator, "sim_node")
        manager = start_profile_graph(ros, "sim", {
            "sim_node": {"render": False, "displace_object": json.dumps({"object": MOVED, "dx": 0.04})},
            "policy_node": {"request_images": False},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 2, "actions_per_step": 5,
                                   "reset_check": True, "output": str(tmp_path / "run"),
                                   "wait_for_nodes": ["sim_node", "arm_bridge_node", "policy_node",
                                                      "stage_monitor_node", "operator"]}})["trial_manager_node"]

        def states() -> list[dict]:  # type: ignore[type-arg]
            return [json.loads(m.data) for m in got["trial"]]

        def told() -> dict | None:  # type: ignore[type-arg]
            said = [t["reset_check"] for t in states() if t.get("reset_check")]
            return said[-1] if said else None

        ros.wait_for(lambda: told() is not None, timeout=120, what="the trial blocked by the displaced cylinder")
        verdict = told()
        assert verdict["misplaced"] == [MOVED] and not verdict["missing"] and not verdict["extra"], verdict
        (line,) = verdict["lines"]
        assert line.startswith(f"{MOVED}: 4.0 cm off; move it 4.0 cm left (-x) to x {target[0]:+.3f}"), line

        def drawn() -> list[Marker]:
            return [m for msg in got["view"] for m in msg.markers if m.ns == f"reset/{MOVED}"]

        ros.wait_for(lambda: any(m.text.startswith(f"MOVE {MOVED}") for m in drawn()), what="the view names it")
        ghost = next(m for m in drawn() if m.id == 0 and m.type == Marker.CYLINDER)
        assert np.allclose([ghost.pose.position.x, ghost.pose.position.y], target[:2], atol=1e-4)  # where to
        assert (ghost.color.r, ghost.color.g) == (np.float32(0.95), np.float32(0.1))  # red: not there
        arrow = next(m for m in drawn() if m.type == Marker.ARROW)
        assert abs(arrow.points[0].x - arrow.points[1].x - 0.04) < 1e-3 and abs(arrow.points[1].x - target[0]) < 1e-4

        bad = _set(ros, sim, '{"object": 3}')
        assert not bad.successful and bad.reason.startswith("displace_object = ") and "\n" not in bad.reason
        assert not [t for t in states() if t["phase"] == tp.PHASE_RUNNING] and not got["commands"]
        assert manager.phase == tp.PHASE_VERIFYING_RESET

        assert _set(ros, sim, "").successful  # the operator puts it back
        ros.wait_for(lambda: any(t["phase"] == tp.PHASE_RUNNING for t in states()), timeout=30,
                     what="the trial running once the cylinder is back")
        ros.wait_for(manager.finished.is_set, timeout=120, what="the trial's end")
        ready = next(json.loads(m.data) for m in got["sim"] if json.loads(m.data).get("state") == "ready")
        start = next(t["start_stamp_ns"] for t in states() if t["phase"] == tp.PHASE_RUNNING)

        def cylinder_at(stamp: int) -> np.ndarray:
            msg = next(m for m in got["objects"] if stamp_ns(m.markers[0].header.stamp) == stamp)
            pose = next(m.pose.position for m in msg.markers if m.ns == MOVED)
            return np.array([pose.x, pose.y, pose.z])

        assert cylinder_at(ready["stamp_ns"])[0] - target[0] > 0.039  # the reset's state: displaced
        assert start > ready["stamp_ns"]  # the trial starts from the state the check passed on
        assert np.linalg.norm(cylinder_at(start) - target) < 1e-3
    (entry,) = json.loads((tmp_path / "run" / "results.json").read_text())
    check = entry["reset_check"]
    assert check["verified"] and not check["overridden"] and check["misplaced"] == [] and check["waited_s"] > 0
    assert "fault" not in entry and entry["policy_steps"] == 2
