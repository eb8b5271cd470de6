"""The rig profile's trial flow without a sim: the operator is shown the layout (picture + list) and
confirms through the service; the policy runs at the control rate; the stage monitor scores from
``/robofollow/objects``. A stand-in publishes what the arm bridge and perception would."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, joint_vector, object_markers_msg
from robofollow_ros.nodes.policy_node import PolicyNode
from robofollow_ros.nodes.stage_monitor_node import StageMonitorNode
from robofollow_ros.nodes.trial_manager_node import TrialManagerNode
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"


def _run_rig_trial(tmp_path, policy_params: list[Parameter]):  # type: ignore[no-untyped-def]
    registry = default_registry()
    task = registry.eval_task(TASK)
    layout = registry.layout_of(task)
    xy = layout.jittered_xy(task.seed(1))
    poses = {o.name: ([*xy[o.name], TABLE_TOP_Z + o.half_height], [1.0, 0.0, 0.0, 0.0]) for o in layout.objects}
    with RosHarness() as ros:
        rig = ros.node("fake_rig")
        measured = [np.full(14, 0.1)]
        measured[0][[6, 13]] = 1.0
        joints = rig.create_publisher(JointState, "/joint_states", 10)
        objects = rig.create_publisher(MarkerArray, "/robofollow/objects", 10)
        got: dict[str, list] = {"trial": [], "commands": []}

        def on_command(msg: JointState) -> None:
            measured[0] = joint_vector(msg)
            got["commands"].append(msg)

        def tick() -> None:  # the arm drivers and the perception at their own rates
            now = rig.get_clock().now().nanoseconds
            objects.publish(object_markers_msg(poses, now))
            joints.publish(joint_state_msg(measured[0], now))

        rig.create_timer(0.01, tick)
        rig.create_subscription(JointState, "/robofollow/joint_command", on_command, 10)
        rig.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        confirm = rig.create_client(Trigger, tp.SERVICE_CONFIRM_RESET)

        ros.add(PolicyNode(context=ros.context, parameter_overrides=[
            Parameter("mode", value="rate"), Parameter("control_hz", value=200.0), Parameter("stale_s", value=5.0),
            Parameter("policy_stale_s", value=10.0),
            *policy_params]))
        ros.add(StageMonitorNode(context=ros.context, parameter_overrides=[
            Parameter("object_source", value="objects"), Parameter("frame_sync", value="latest")]))
        manager = ros.add(TrialManagerNode(context=ros.context, parameter_overrides=[
            Parameter("mode", value="rig"), Parameter("trials", value=f"tasks={TASK}"),
            Parameter("max_steps", value=2), Parameter("output", value=str(tmp_path / "run")),
            Parameter("wait_for_nodes", value=["policy_node", "stage_monitor_node", "fake_rig"])]))

        def phase() -> str:
            return json.loads(got["trial"][-1].data)["phase"] if got["trial"] else ""

        ros.wait_for(lambda: phase() == tp.PHASE_AWAITING_CONFIRM, timeout=60, what="operator prompt")
        picture = json.loads(got["trial"][-1].data)["layout_picture"]
        assert Path(picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not got["commands"]  # nothing moves before the operator confirms
        assert confirm.wait_for_service(timeout_sec=10)
        reply = confirm.call_async(Trigger.Request())
        ros.wait_for(reply.done, what="confirm reply")
        assert reply.result().success
        ros.wait_for(manager.finished.is_set, timeout=60, what="the rig trial")
        late = confirm.call_async(Trigger.Request())
        ros.wait_for(late.done, what="late confirm reply")
        assert not late.result().success  # nothing left to confirm

    return json.loads((tmp_path / "run" / "results.json").read_text()), got["commands"]


def test_rig_trial_waits_for_the_operator_then_runs_and_records(tmp_path):
    results, commands = _run_rig_trial(tmp_path, [Parameter("privileged", value=False)])
    assert len(results) == 1 and results[0]["task"] == TASK and results[0]["policy_steps"] == 2
    assert results[0]["frames"] >= 2 and "policy_error" not in results[0]
    assert len(commands) == 10  # hold: 2 calls x 5 rows at the control rate


def test_the_oracle_runs_on_the_rig_from_perceived_objects(tmp_path):
    results, commands = _run_rig_trial(tmp_path, [Parameter("policy", value="oracle")])
    assert "policy_error" not in results[0], results[0].get("policy_error")
    assert results[0]["policy_steps"] == 2
    first, last = joint_vector(commands[0]), joint_vector(commands[-1])
    assert np.abs(last - first).max() > 0.05  # it planned from the perceived poses and moved the arm
