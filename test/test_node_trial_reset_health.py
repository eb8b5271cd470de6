"""Reset verification and health checks over DDS, in the mock profile's graph (one process here).

A displaced object (the mock's ``displace_object``, as a person would leave it) blocks the trial in
``verifying_reset``, is named on ``/robofollow/reset_check`` and in the trial state with the way back,
and the trial starts once it is back (or the operator overrides, which its results entry records). A
joint driven beyond its URDF limit fails the health check before the trial: the trial is a ``health``
fault of class ``halt``, the run pauses, the arm bridge holds the arms (a command sent meanwhile is
refused with the halt's reason), and ``start`` resumes once the joint is back.
"""

from __future__ import annotations

import json

from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.exit_status import EXIT_OK, EXIT_TRIALS_FAILED
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import joint_state_msg, joint_vector
from robofollow_ros.nodes.driver_messages import COMMAND_TYPES, command_message
from robofollow_ros.nodes.reset_watch import TOPIC_RESET_CHECK
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import load_driver_config
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.urdf_limits import read_joint_limits
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
MOVED = "large_red_cylinder"  # the first object of this task's layout
DISPLACED = json.dumps({"object": MOVED, "dx": 0.04})


def _states(got: dict[str, list], round_index: int) -> list[dict]:  # type: ignore[type-arg]
    return [t for t in (json.loads(m.data) for m in got["trial"]) if t.get("round") == round_index]


def test_a_displaced_object_blocks_the_trial_until_moved_back_or_overridden(tmp_path):
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "view": [], "commands": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(MarkerArray, TOPIC_RESET_CHECK, ros.collector(got["view"]), tp.LATCHED)
        operator.create_subscription(JointState, "/robofollow/joint_command", ros.collector(got["commands"]),
                                     tp.STATE_STREAM)
        override = operator.create_client(Trigger, tp.SERVICE_OVERRIDE_RESET)
        nodes = start_profile_graph(ros, "mock", {
            "mock_hardware_node": {"displace_object": DISPLACED},
            "policy_node": {"stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 2, "actions_per_step": 10,
                                   "output": str(tmp_path / "run")}})
        manager, mock = nodes["trial_manager_node"], nodes["mock_hardware_node"]

        def blocked(round_index: int) -> dict | None:  # type: ignore[type-arg]
            told = [t["reset_check"] for t in _states(got, round_index) if t.get("reset_check")]
            return told[-1] if told else None

        ros.wait_for(lambda: blocked(1) is not None, timeout=60, what="round 1 blocked by the moved object")
        told = blocked(1)
        assert told["misplaced"] == [MOVED] and not told["missing"] and not told["extra"], told
        (line,) = told["lines"]
        assert line.startswith(f"{MOVED}: 4.0 cm off; move it 4.0 cm left (-x)"), line

        def labelled() -> list[Marker]:
            return [m for msg in got["view"] for m in msg.markers if m.ns == f"reset/{MOVED}"]

        ros.wait_for(lambda: any(m.text.startswith(f"MOVE {MOVED}") for m in labelled()), what="the view names it")
        arrow = next(m for m in labelled() if m.type == Marker.ARROW)
        assert arrow.points[0].x - arrow.points[1].x > 0.039  # from where it is to where it must go (-x)
        assert not [t for t in _states(got, 1) if t["phase"] == tp.PHASE_RUNNING] and not got["commands"]

        mock.set_parameters([Parameter("displace_object", value="")])  # the operator puts it back
        ros.wait_for(lambda: any(t["phase"] == tp.PHASE_RUNNING for t in _states(got, 1)), timeout=30,
                     what="round 1 running once the object is back")
        mock.set_parameters([Parameter("displace_object", value=DISPLACED)])  # and moves it again for round 2
        ros.wait_for(lambda: blocked(2) is not None, timeout=60, what="round 2 blocked")
        reply = ros.call_trigger(override, "override_reset")
        assert reply.success and "without a verified reset" in reply.message
        ros.wait_for(manager.finished.is_set, timeout=60, what="both trials")
        assert manager.exit_code == EXIT_OK
        late = ros.call_trigger(override, "a late override_reset")
        assert not late.success  # nothing to override
    first, second = json.loads((tmp_path / "run" / "results.json").read_text())
    assert first["reset_check"]["verified"] and not first["reset_check"]["overridden"]
    assert first["reset_check"]["waited_s"] > 0 and "fault" not in first and first["policy_steps"] == 2
    assert not second["reset_check"]["verified"] and second["reset_check"]["overridden"]
    assert second["reset_check"]["misplaced"] == [MOVED] and "fault" not in second
    moved = next(o for o in second["reset_check"]["objects"] if o["name"] == MOVED)
    assert abs(moved["distance_m"] - 0.04) < 1e-3


def test_a_joint_beyond_its_limit_halts_the_run_with_the_arms_holding_until_start(tmp_path):
    limits = read_joint_limits(share_path("urdf", "robofollow_rig.urdf"))
    left = load_driver_config(share_path("config", "rig", "arm_drivers.yaml")).arms["left"]
    home = RigKinematics().home_vector()
    bent = home.copy()
    joint = JOINT_NAMES.index("left_joint2")
    bent[joint] = limits["left_joint2"].upper + 0.3
    with RosHarness() as ros:
        operator = ros.node("operator")
        got: dict[str, list] = {"trial": [], "joints": [], "bridge": []}
        operator.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        operator.create_subscription(JointState, "/joint_states", ros.collector(got["joints"]), tp.STATE_STREAM)
        operator.create_subscription(String, "/robofollow/arm_bridge/status", ros.collector(got["bridge"]), 10)
        driver = operator.create_publisher(COMMAND_TYPES[left.kind], left.command_topic, tp.STATE_STREAM)
        policy_command = operator.create_publisher(JointState, "/robofollow/joint_command", tp.STATE_STREAM)
        start = operator.create_client(Trigger, "/robofollow/trial/start")
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"stale_s": 5.0},
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=2", "max_steps": 2, "actions_per_step": 10,
                                   "auto_start": False, "health_timeout_s": 1.0,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]

        def drive(vector) -> None:  # type: ignore[no-untyped-def]  # straight to the left arm's driver: a bump
            driver.publish(command_message(left, vector[:6], float(vector[6]), operator.get_clock().now().to_msg()))

        def left_joint2() -> float:
            return float(joint_vector(got["joints"][-1])[joint]) if got["joints"] else 0.0

        ros.publish_until(lambda: drive(bent), lambda: left_joint2() > limits["left_joint2"].upper + 0.2,
                          timeout=30, what="left_joint2 beyond its limit")
        assert ros.call_trigger(start, "start").success
        ros.wait_for(lambda: any(t["phase"] == tp.PHASE_DONE for t in _states(got, 1)), timeout=60,
                     what="round 1 failed by the health check")
        ros.wait_for(lambda: json.loads(got["trial"][-1].data).get("paused_by") == "health", what="the halt")
        halted = json.loads(got["trial"][-1].data)
        assert halted["halt"]["check"] == "limits" and "left_joint2" in halted["halt"]["reason"]
        assert halted["halt"]["action"].endswith("then call /robofollow/trial/start")
        assert not _states(got, 2)  # the run waits for the operator

        def refused() -> bool:
            said = (json.loads(m.data) for m in got["bridge"])
            return any(s.get("hold") and s.get("halt") and str(s["reasons"][0]).startswith("halted by the trial")
                       for s in said)

        ros.publish_until(lambda: policy_command.publish(joint_state_msg(home, operator.get_clock().now().nanoseconds)),
                          refused, timeout=20, what="a command refused by the bridge's halt")
        ros.publish_until(lambda: drive(home), lambda: abs(left_joint2() - home[joint]) < 0.01, timeout=30,
                          what="left_joint2 back home")
        assert ros.call_trigger(start, "start again").success
        ros.wait_for(manager.finished.is_set, timeout=60, what="round 2 after the halt")
        assert manager.exit_code == EXIT_TRIALS_FAILED  # round 1 could not be executed
    first, second = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (first["fault"], first["failure_class"]) == ("health", "halt"), first
    assert "left_joint2" in first["fault_reason"] and first["health"]["before"][0]["class"] == "halt"
    assert "fault" not in second and second["health"] == {"before": [], "after": []}
    assert second["policy_steps"] == 2
