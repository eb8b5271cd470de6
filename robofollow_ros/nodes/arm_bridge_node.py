"""arm_bridge_node: ``/robofollow/joint_command`` → the rig's arm drivers, through the safety filter.

It is the only node that moves a real arm, so it trusts nothing: every command is checked for finite
values, URDF joint limits, a per-step clamp and (optionally) a workspace box on the tool points; an
e-stop topic and a watchdog make it hold the measured position. It also republishes the drivers'
joint states as the contract's ``/joint_states`` (14 names, normalised grippers).
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robofollow_ros.contract import (
    ACTION_DIM,
    ARM_SLICE,
    ARMS,
    GRIPPER_INDEX,
    JOINT_NAMES,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
)
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet, length, positive
from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import ArmDriver, load_driver_config
from robofollow_ros.rig.safety import SafetyConfig, SafetyDecision, SafetyFilter
from robofollow_ros.rig.urdf_limits import read_joint_limits

TOPIC_ESTOP = "/robofollow/estop"
TOPIC_BRIDGE_STATUS = "/robofollow/arm_bridge/status"


class ArmBridgeNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("arm_bridge_node", **kwargs)
        params = ParameterSet(self)
        driver_file = params.declare(
            "driver_config",
            str(share_path("config", "rig", "arm_drivers.yaml")),
            "YAML mapping of each arm onto its driver topics, joint names and gripper units",
        )
        urdf = params.declare(
            "urdf", str(share_path("urdf", "robofollow_rig.urdf")), "URDF whose joint limits bound every command"
        )
        max_step = params.declare("max_step_rad", 0.05, "largest joint change per command, rad", positive)
        max_grip = params.declare("max_gripper_step", 0.2, "largest normalised gripper change per command", positive)
        timeout = params.declare("watchdog_timeout_s", 0.1, "hold when no command arrived for this long, s", positive)
        period = params.declare("watchdog_period_s", 0.02, "how often the watchdog checks, s", positive)
        ws_min = params.declare(
            "workspace_min", [-0.6, -0.6, 0.745], "workspace box lower corner (world, m)", length(3)
        )
        ws_max = params.declare("workspace_max", [0.6, 0.4, 1.4], "workspace box upper corner (world, m)", length(3))
        ws_check = params.declare("workspace_check", True, "check both TCPs stay in the box (forward kinematics)")

        self.drivers = load_driver_config(driver_file).arms
        config = SafetyConfig(
            joint_limits=read_joint_limits(urdf),
            max_step_rad=max_step,
            max_gripper_step=max_grip,
            watchdog_timeout_s=timeout,
            workspace_min=tuple(ws_min),
            workspace_max=tuple(ws_max),
        )
        tool_points = None
        if ws_check:
            from robofollow_ros.sim.kinematics import RigKinematics

            kinematics = RigKinematics()

            def tool_points(arm: str, q: np.ndarray) -> np.ndarray:
                return np.asarray(kinematics.tcp_poses(q)[arm].position)

        self.safety = SafetyFilter(config, tool_points)
        self._measured = {arm: np.full(7, np.nan) for arm in ARMS}
        self._driver_pubs = {arm: self._make_publisher(d) for arm, d in self.drivers.items()}
        for arm, driver in self.drivers.items():
            self.create_subscription(JointState, driver.state_topic, lambda m, a=arm: self._on_driver_state(a, m), 10)
        self.create_subscription(JointState, TOPIC_JOINT_COMMAND, self._on_command, 10)
        self.create_subscription(Bool, TOPIC_ESTOP, self._on_estop, 10)
        self.joint_states = self.create_publisher(JointState, TOPIC_JOINT_STATES, 10)
        self.status = self.create_publisher(String, TOPIC_BRIDGE_STATUS, 10)
        self.create_timer(period, self._on_watchdog)

    # -- driver side -----------------------------------------------------------------------------
    def _make_publisher(self, driver: ArmDriver) -> Any:
        kind = {"joint_trajectory": JointTrajectory, "forward_command": Float64MultiArray, "joint_state": JointState}[
            driver.kind
        ]
        return self.create_publisher(kind, driver.command_topic, 10)

    def _on_driver_state(self, arm: str, msg: JointState) -> None:
        driver = self.drivers[arm]
        index = {name: i for i, name in enumerate(msg.name)}
        try:
            joints = [msg.position[index[j]] for j in driver.joints]
            gripper = driver.gripper.to_normalised(msg.position[index[driver.gripper.joint]])
        except (KeyError, IndexError):
            self.get_logger().warning(
                f"{arm} driver state on {driver.state_topic} lacks joints {driver.joints}", throttle_duration_sec=5.0
            )
            return
        self._measured[arm] = np.array([*joints, gripper])
        vector = np.concatenate([self._measured["left"], self._measured["right"]])
        if np.all(np.isfinite(vector)):
            self.safety.update_measured(vector)
            out = JointState(name=list(JOINT_NAMES), position=vector.tolist())
            out.header.stamp = self.get_clock().now().to_msg()
            self.joint_states.publish(out)

    def _send(self, decision: SafetyDecision | None) -> None:
        if decision is None:
            return
        q = decision.command
        for arm, driver in self.drivers.items():
            joints = q[ARM_SLICE[arm]].tolist()
            gripper = driver.gripper.to_driver(float(q[GRIPPER_INDEX[arm]]))
            names = [*driver.joints, driver.gripper.joint]
            if driver.kind == "joint_trajectory":
                secs = driver.time_from_start
                point = JointTrajectoryPoint(
                    positions=[*joints, gripper], time_from_start=Duration(sec=int(secs), nanosec=int(secs % 1 * 1e9))
                )
                msg: Any = JointTrajectory(joint_names=names, points=[point])
            elif driver.kind == "forward_command":
                msg = Float64MultiArray(data=[*joints, gripper])
            else:
                msg = JointState(name=names, position=[*joints, gripper])
                msg.header.stamp = self.get_clock().now().to_msg()
            self._driver_pubs[arm].publish(msg)
        if decision.reasons:
            self.status.publish(
                String(
                    data=json.dumps({"hold": decision.hold, "clamped": decision.clamped, "reasons": decision.reasons})
                )
            )
            log = self.get_logger().warning if decision.hold else self.get_logger().info
            log("; ".join(decision.reasons), throttle_duration_sec=1.0)

    # -- command side ----------------------------------------------------------------------------
    def _on_command(self, msg: JointState) -> None:
        q = _contract_vector(msg)
        self._send(self.safety.filter(q, time.monotonic()))

    def _on_estop(self, msg: Bool) -> None:
        self.safety.set_estop(bool(msg.data))
        if msg.data:
            self._send(self.safety.hold("e-stop engaged"))

    def _on_watchdog(self) -> None:
        self._send(self.safety.watchdog(time.monotonic()))


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
