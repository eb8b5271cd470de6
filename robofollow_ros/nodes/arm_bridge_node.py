"""arm_bridge_node: ``/robofollow/joint_command`` → the rig's arm drivers, through the safety filter.

It is the only node that moves a real arm, so it trusts nothing: every command is checked for finite values,
URDF joint limits, a per-step clamp and (optionally) a workspace box on the tool points (the rig YAML's
``workspace`` unless ``workspace_min``/``workspace_max`` are given); an e-stop topic and a watchdog make it
hold the measured position. It also republishes the drivers' joint states as the contract's ``/joint_states``
(14 names, normalised grippers): one message once every arm has reported since the last one, stamped with the
newest driver stamp (the drivers measured then; ``now`` only for a driver that leaves its stamps at zero). A
reader of ``/joint_states`` that matches late is sent the last one again at once: in the sim the trial waits
for the stage monitor to hold the start state, which may have gone out before that reader matched.

The drivers: ros2_control controllers, a JointState command topic, or an Interbotix xs_sdk per arm (Trossen's
ALOHA: a ``JointGroupCommand`` for the six joints, then a ``JointSingleCommand`` for the gripper servo); the map
(``rig/driver_config.py``) says which, and every one gets the same filtered command.

In the ``sim`` and ``mock`` profiles the same node sits in front of drivers played by ``sim_node``
and ``mock_hardware_node``, so a dry run goes through exactly this filter and mapping. Time is the
node's ROS clock: wall time on the rig, the simulator's ``/clock`` under ``use_sim_time`` (where sim
time stands still between commands, so the watchdog only measures how long a row really takes).

What leaves it (the rules live in ``rig/safety.py``, whose docstring gives the reasons; this node only
carries messages and clocks to and from them):

* every target lies within the URDF's joint limits, holds included, and a gripper's driver value within
  the URDF's finger range (``driver_config.check_gripper_ranges`` refuses a map that could leave it; a
  servo-angle gripper, ``measures: motor``, within its servo's turn instead);
* an arm measured beyond a limit (by more than ``limit_tolerance_rad``) makes the bridge hold: at the
  measured position clipped into the limits when that is within one step, else that arm is sent
  nothing; each such hold is reported on the status topic (``outside_limits``: joint, value, limits) and
  logged as an error naming them;
* after a watchdog hold a command stamped no later than the newest state published when the hold began
  is refused (``rig/safety.py``): the backlog a reliable link delivers when a lost host comes back; so is an
  unstamped one, until a command stamped after the hold executes (``policy_node`` stamps every command with
  the state it was computed from; a command refused for any other reason does not lift the rule). A
  takeover lifts it: the teleoperation source's messages from before it were dropped, and a source that
  goes silent past the watchdog during a takeover must stamp its commands, or be taken over again;
* after an e-stop release only commands *received* after the release message (the middleware's
  reception time, ``MessageInfo.received_timestamp``) and, when stamped, *stamped* after the release
  (``header.stamp`` against this node's clock) execute: the thousands a flood leaves in the
  subscription's queue are refused (holds), not replayed.

Takeover: ``/robofollow/teleop/take_over`` (Trigger) hands the arms to a teleoperation source on
``/robofollow/teleop/joint_command`` until ``/robofollow/teleop/hand_back``. The switch cannot jump: every
command, the teleop's first included, passes the same filter, so it lies within one step of the measured
position (until the first teleop command arrives the watchdog holds the arms where they are). While
teleoperation holds, the policy's ``/robofollow/joint_command`` is refused (counted, reported on the status
topic); teleop commands outside a takeover are ignored. ``teleop_max_step_rad`` may clamp a teleop command
tighter than ``max_step_rad`` (the sim's step clamp spans a whole planned row; a leader arm's command is one
control tick). At the hand-back the arms are commanded to hold where they are measured until the policy's
next command (in the sim's lock-step that row also answers the policy's command refused meanwhile). Every
``/joint_states`` frame is followed by ``/robofollow/intervention`` (``std_msgs/Bool``): true while
teleoperation holds.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from robofollow_ros.contract import (
    ACTION_DIM,
    ARM_SLICE,
    ARMS,
    GRIPPER_INDEX,
    JOINT_NAMES,
    SERVICE_TELEOP_HAND_BACK,
    SERVICE_TELEOP_TAKE_OVER,
    TOPIC_BRIDGE_STATUS,
    TOPIC_ESTOP,
    TOPIC_INTERVENTION,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_TELEOP_COMMAND,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet, length, non_negative, one_of, positive
from robofollow_ros.nodes.conversions import MessageError, stamp_ns, time_msg
from robofollow_ros.nodes.driver_messages import (
    arm_from_state,
    command_channels,
    command_messages,
    group_by_topic,
)
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.nodes.health_watch import TOPIC_BRIDGE_HALT
from robofollow_ros.nodes.rclpy_compat import (
    MessageInfo,
    QoSPublisherMatchedInfo,
    publisher_matched_callbacks,
    with_message_info,
)
from robofollow_ros.rig.driver_config import ArmDriver, load_driver_config, rig_driver_config
from robofollow_ros.rig.safety import SafetyConfig, SafetyDecision, SafetyFilter
from robofollow_ros.robot.rig_config import load_rig_config
from robofollow_ros.robot.urdf_limits import read_joint_limits, rig_joint_limits


def rig_workspace(end: str) -> list[float]:
    """The active rig's workspace box corner (``min`` or ``max``): the parameters' default, a module function so
    that the parameter schema (``parameter_schema``) reads the same default without starting the node."""
    rig = load_rig_config()
    return [float(v) for v in (rig.workspace_min if end == "min" else rig.workspace_max)]


class ArmBridgeNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("arm_bridge_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        driver_file = params.declare(
            "driver_config",
            "",
            "YAML mapping of each arm onto its driver topics, joint names and gripper units (a path, or a preset "
            "under config/rig/ by name: piper_ros2, aloha, ...; empty: the rig's driver map)",
        ) or rig_driver_config()
        urdf = params.declare(
            "urdf", "", "URDF whose joint limits (under the contract's names) bound every command; empty: the "
            "active rig's (--rig), its YAML's joint map applied")
        max_step = params.declare("max_step_rad", 0.05, "largest joint change per command, rad", positive)
        teleop_step = params.declare("teleop_max_step_rad", 0.0, "largest joint change per teleoperation command, "
                                     "rad, within max_step_rad (0: max_step_rad; the sim's max_step_rad spans a "
                                     "whole planned row, a leader arm's command must not)",
                                     lambda v: None if isinstance(v, int | float) and v >= 0 else "must be >= 0")
        self.teleop_step = min(teleop_step, max_step) if teleop_step > 0 else max_step
        max_grip = params.declare("max_gripper_step", 0.2, "largest normalised gripper change per command", positive)
        timeout = params.declare("watchdog_timeout_s", 0.1, "hold when no command arrived for this long, s", positive)
        period = params.declare("watchdog_period_s", 0.02, "how often the watchdog checks, s", positive)
        rig = load_rig_config()  # the active rig (--rig): its joint map, its workspace box, its kinematics
        ws_min = params.declare("workspace_min", rig_workspace("min"), "workspace box lower corner (world, m); "
                                "default: the rig's (its YAML's workspace.min)", length(3))
        ws_max = params.declare("workspace_max", rig_workspace("max"), "workspace box upper corner (world, m); "
                                "default: the rig's (its YAML's workspace.max)", length(3))
        ws_check = params.declare("workspace_check", True, "check both TCPs stay in the box (forward kinematics)")
        tolerance = params.declare(
            "limit_tolerance_rad", 0.01, "a joint measured beyond its limit by more than this holds the arms, rad",
            non_negative)
        driver_states = params.declare(
            "driver_states", "latest", "latest: read the drivers' newest state only (best effort, depth 1; the step "
            "clamp is taken around it, never around a backlog); every: each state, reliably (lock-step sim, where "
            "each state answers one command and a lost one would stall the trial)", one_of("latest", "every"))

        limits = read_joint_limits(urdf) if urdf else rig_joint_limits(rig)
        self.drivers = load_driver_config(driver_file, limits).arms  # gripper ranges checked against the URDF
        config = SafetyConfig(
            joint_limits=limits,
            max_step_rad=max_step,
            max_gripper_step=max_grip,
            watchdog_timeout_s=timeout,
            workspace_min=tuple(ws_min),
            workspace_max=tuple(ws_max),
            limit_tolerance_rad=tolerance,
        )
        tool_points = None
        if ws_check:
            from robofollow_ros.robot.kinematics import RigKinematics

            kinematics = RigKinematics(rig)

            def tool_points(arm: str, q: np.ndarray) -> np.ndarray:
                return np.asarray(kinematics.tcp_poses(q)[arm].position)

        self.safety = SafetyFilter(config, tool_points)
        self._measured = {arm: np.full(7, np.nan) for arm in ARMS}
        self._reported: dict[str, int | None] = {arm: None for arm in ARMS}  # driver stamp since last publish
        self._driver_pubs = {arm: self._make_publishers(d) for arm, d in self.drivers.items()}
        for topic, drivers in group_by_topic(self.drivers.values(), "state_topic").items():
            # The newest driver state only: the step clamp is taken around it, and a queue of old ones
            # (a loaded machine) would clamp against where the arm was seconds ago (tp.LATEST_STATE).
            self.create_subscription(JointState, topic, functools.partial(self._on_driver_state, drivers),
                                     tp.LATEST_STATE if driver_states == "latest" else tp.STATE_STREAM)
        # The e-stop first: when both have messages waiting, the executor serves subscriptions in this order.
        self.create_subscription(Bool, TOPIC_ESTOP, with_message_info(self._on_estop), 10)
        # The trial manager's halt (a failed health check) holds the arms as the e-stop does, from its own input.
        self._estop_input = False
        self._halt_reason: str | None = None
        self.create_subscription(String, TOPIC_BRIDGE_HALT, with_message_info(self._on_halt), tp.LATCHED)
        self.create_subscription(JointState, TOPIC_JOINT_COMMAND, with_message_info(self._on_command), tp.STATE_STREAM)
        #: Teleoperation holds the arms (take_over .. hand_back); the policy's commands refused meanwhile.
        self.teleop = False
        self.refused_policy_commands = 0
        self.create_subscription(JointState, TOPIC_TELEOP_COMMAND, with_message_info(self._on_teleop), tp.STATE_STREAM)
        self.create_service(Trigger, SERVICE_TELEOP_TAKE_OVER, self._srv_take_over)
        self.create_service(Trigger, SERVICE_TELEOP_HAND_BACK, self._srv_hand_back)
        self.intervention = self.create_publisher(Bool, TOPIC_INTERVENTION, tp.STATE_STREAM)
        self._last_state: JointState | None = None
        self.joint_states = self.create_publisher(JointState, TOPIC_JOINT_STATES, tp.STATE_STREAM,
                                                  event_callbacks=publisher_matched_callbacks(self._on_matched))
        self.status = self.create_publisher(String, TOPIC_BRIDGE_STATUS, 10)
        self.create_timer(period, self._on_watchdog)  # on the node's clock: sim time under use_sim_time

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds / 1e9

    # -- driver side -----------------------------------------------------------------------------
    def _make_publishers(self, driver: ArmDriver) -> list[Any]:
        """One per command channel: an xs_sdk takes the joints and the gripper on two topics, in that order."""
        return [self.create_publisher(kind, topic, tp.STATE_STREAM) for topic, kind in command_channels(driver)]

    def _on_driver_state(self, drivers: list[ArmDriver], msg: JointState) -> None:
        for driver in drivers:
            try:
                joints, gripper = arm_from_state(driver, msg)
            except MessageError as exc:
                self.get_logger().warning(str(exc), throttle_duration_sec=5.0)
                return
            self._measured[driver.arm] = np.array([*joints, gripper])
            self._reported[driver.arm] = stamp_ns(msg.header.stamp)
        stamps = [self._reported[arm] for arm in ARMS]
        if any(s is None for s in stamps):
            return  # one message per round: every arm has reported since the last one
        vector = np.concatenate([self._measured["left"], self._measured["right"]])
        self.safety.update_measured(vector)
        newest = max(s for s in stamps if s is not None)
        out = JointState(name=list(JOINT_NAMES), position=vector.tolist())
        out.header.stamp = time_msg(newest) if newest > 0 else self.get_clock().now().to_msg()
        self._reported = {arm: None for arm in ARMS}
        self._last_state = out
        self.joint_states.publish(out)
        self.intervention.publish(Bool(data=self.teleop))  # this frame's source: teleoperation or the policy

    def _on_matched(self, info: QoSPublisherMatchedInfo) -> None:
        if info.current_count_change > 0 and self._last_state is not None:
            self.joint_states.publish(self._last_state)  # the measured state, as the newcomer missed it

    def _send(self, decision: SafetyDecision | None) -> None:
        if decision is None:
            return
        q = decision.command
        now = self.get_clock().now().to_msg()
        for arm in decision.arms:  # an arm measured too far outside its limits is sent nothing
            messages = command_messages(self.drivers[arm], q[ARM_SLICE[arm]], float(q[GRIPPER_INDEX[arm]]), now)
            for publisher, message in zip(self._driver_pubs[arm], messages, strict=True):
                publisher.publish(message)
        if decision.reasons:
            # One call site per severity: rclpy keys a throttled log by its call site and refuses a second
            # severity there.
            if decision.outside_limits:
                self.get_logger().error("; ".join(o.describe() for o in decision.outside_limits),
                                        throttle_duration_sec=1.0)
            elif decision.hold:
                self.get_logger().warning("; ".join(decision.reasons), throttle_duration_sec=1.0)
            else:
                self.get_logger().info("; ".join(decision.reasons), throttle_duration_sec=1.0)
            self._report({"hold": decision.hold, "clamped": decision.clamped, "reasons": decision.reasons,
                          "arms": list(decision.arms),
                          "outside_limits": [o.as_dict() for o in decision.outside_limits]})

    def _report(self, status: dict[str, Any]) -> None:
        self.status.publish(String(data=json.dumps({**status, "estop": self._estop_input,
                                                    "halt": self._halt_reason is not None})))

    # -- command side ----------------------------------------------------------------------------
    def _on_command(self, msg: JointState, info: MessageInfo) -> None:
        if self.teleop:
            self.refused_policy_commands += 1
            if self.refused_policy_commands % 50 == 1:  # the policy sends at its control rate: say it now and then
                self._report({"hold": False, "clamped": False, "arms": [], "outside_limits": [], "reasons": [
                    f"policy command refused: teleoperation holds the arms ({self.refused_policy_commands} so far)"]})
            return
        self._filtered(msg, info)

    def _on_teleop(self, msg: JointState, info: MessageInfo) -> None:
        if not self.teleop:  # a leader arm publishes all the time: only a takeover lets it through
            return
        command, measured = _contract_vector(msg), self.safety.measured
        if measured is not None:  # an arm joint within teleop_max_step_rad first, then the filter as for any command
            joints = np.ones(len(JOINT_NAMES), dtype=bool)
            joints[[GRIPPER_INDEX[arm] for arm in ARMS]] = False
            command[joints] = np.clip(command[joints], measured[joints] - self.teleop_step,
                                      measured[joints] + self.teleop_step)
        self._filtered(msg, info, command)

    def _srv_take_over(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self.teleop = True
        self.safety.lift_watchdog_rule()  # the operator's act; the source's earlier messages were dropped
        self.get_logger().warning(f"teleoperation takes over: {TOPIC_TELEOP_COMMAND} drives the arms (each command "
                                  f"within one step of the measured position); policy commands refused until "
                                  f"{SERVICE_TELEOP_HAND_BACK}")
        res.success, res.message = True, f"teleoperation holds the arms ({TOPIC_TELEOP_COMMAND})"
        return res

    def _srv_hand_back(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        was, self.teleop = self.teleop, False
        if was:
            self.get_logger().info("teleoperation hands back: the policy's commands drive the arms again")
            measured = self.safety.measured
            if measured is not None:
                # Hold where teleoperation left the arms until the policy's next command. In the sim's lock-step
                # this row also answers the policy's last command, refused meanwhile: without a new state
                # policy_node would wait for one that never comes.
                self._send(self.safety.filter(measured, self._now_s()))
        res.success, res.message = was, ("the policy drives the arms again" if was else "no takeover to end")
        return res

    def _filtered(self, msg: JointState, info: MessageInfo, command: np.ndarray | None = None) -> None:
        stamp = stamp_ns(msg.header.stamp)
        vector = _contract_vector(msg) if command is None else command
        self._send(self.safety.filter(vector, self._now_s(), stamp=stamp / 1e9 if stamp else None,
                                      received=_received(info)))

    def _on_estop(self, msg: Bool, info: MessageInfo) -> None:
        self._estop_input = bool(msg.data)
        self._engage(_received(info))

    def _on_halt(self, msg: String, info: MessageInfo) -> None:
        halt = tp.decode_or_log(msg.data, TOPIC_BRIDGE_HALT, self.get_logger())
        if halt is None:
            return
        self._halt_reason = f"halted by the trial manager: {halt.get('reason', '')}" if halt.get("halt") else None
        self._engage(_received(info))

    def _engage(self, received: int | None) -> None:
        """The e-stop input or the trial manager's halt: hold while either is on; resume when both are off."""
        was = self.safety.estop
        now = self._now_s()
        engaged = self._estop_input or self._halt_reason is not None
        reason = "e-stop engaged" if self._estop_input else (self._halt_reason or "")
        self.safety.set_estop(engaged, now, received, reason)
        if engaged:
            self._send(self.safety.hold(reason))
        elif was:
            text = (f"e-stop released at {now:.3f} s: motion resumes with a command received after the release "
                    "and, when stamped, stamped after it")
            self._report({"hold": False, "clamped": False, "reasons": [text], "arms": [], "outside_limits": []})
            self.get_logger().info(text)

    def _on_watchdog(self) -> None:
        newest = stamp_ns(self._last_state.header.stamp) if self._last_state is not None else 0
        self._send(self.safety.watchdog(self._now_s(), state_stamp=newest / 1e9 if newest else None))


def _received(info: MessageInfo) -> int | None:
    """The middleware's reception time (ns, system clock); ``None`` where the middleware gives none."""
    received = info.get("received_timestamp") or 0
    return int(received) if received > 0 else None


def _contract_vector(msg: JointState) -> np.ndarray:
    """The 14-vector of a command: by name when names are given, else in contract order."""
    if not msg.name:
        return np.asarray(msg.position, dtype=float)
    if len(msg.name) != len(msg.position):
        return np.full(ACTION_DIM, np.nan)
    index = dict(zip(msg.name, msg.position, strict=True))
    return np.array([index.get(name, np.nan) for name in JOINT_NAMES], dtype=float)


def main(args: list[str] | None = None) -> None:
    run_node(ArmBridgeNode, args)


if __name__ == "__main__":
    main()
