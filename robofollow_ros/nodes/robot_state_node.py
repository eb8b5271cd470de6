"""robot_state_node: the rig as data on the graph — what ``robot_state_publisher`` does, in-process.

``/robot_description`` (the URDF text, latched; meshes by ``file://`` URL as RViz reads them, which
foxglove_node's live view names by ``package://`` and serves: ``monitoring.rig_assets``), ``/tf_static``
(every fixed joint of the URDF and each camera's optical frame) and, for every measured ``/joint_states``,
``/tf`` with every moving joint's child link in its parent link, stamped with the joint state's stamp. Frame ids are the
URDF's link names, so Foxglove's 3D panel and RViz show the arms move from the same file the
simulator and the kinematics read. The grippers' normalised value drives every finger joint the
rig config lists (``gripper_joints``), as the simulator does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from robofollow_ros.contract import (
    TOPIC_JOINT_STATES,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_TF,
    TOPIC_TF_STATIC,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet
from robofollow_ros.nodes.conversions import MessageError, joint_vector, stamp_ns, transform_msg
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.robot.transforms import matrix_to_quat

#: robot_state_publisher's QoS for the description: reliable, transient local, depth 1.
DESCRIPTION_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
#: tf2's static broadcaster QoS: one latched message with every static transform.
TF_STATIC_QOS = DESCRIPTION_QOS


class RobotStateNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("robot_state_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        rig_file = params.declare("rig_config", "", "rig name or YAML (empty: $ROBOFOLLOW_RIG, else built-in)")

        from robofollow_ros.robot.kinematics import RigKinematics
        from robofollow_ros.robot.rig_config import load_rig_config

        self.kinematics = RigKinematics(load_rig_config(rig_file) if rig_file else load_rig_config())
        self.model = self.kinematics.model
        self._moving = [self.model.joints[name] for name in self.model.moving_joints]
        self._last_stamp = -1
        self.description = self.create_publisher(String, TOPIC_ROBOT_DESCRIPTION, DESCRIPTION_QOS)
        self.tf = self.create_publisher(TFMessage, TOPIC_TF, tp.STATE_STREAM)
        self.tf_static = self.create_publisher(TFMessage, TOPIC_TF_STATIC, TF_STATIC_QOS)
        self.create_subscription(JointState, TOPIC_JOINT_STATES, self._on_joints, tp.STATE_STREAM)
        self.description.publish(String(data=self.kinematics.rig.robot_description()))
        self.tf_static.publish(TFMessage(transforms=self._static_transforms()))

    def _static_transforms(self) -> list[Any]:
        from robofollow_ros.robot.cameras import optical_mounts

        out = []
        for joint in self.model.joints.values():
            if not joint.moving:
                out.append(transform_msg(joint.parent, joint.child, joint.origin_position,
                                         matrix_to_quat(joint.origin_rotation), 0))
        for parent, child, position, quat in optical_mounts(self.kinematics.rig.camera_links):
            out.append(transform_msg(parent, child, position, quat, 0))
        return out

    def _on_joints(self, msg: JointState) -> None:
        try:
            q = self.kinematics.qpos(joint_vector(msg))
        except (MessageError, ValueError) as exc:
            self.get_logger().error(f"{TOPIC_JOINT_STATES}: {exc}", throttle_duration_sec=5.0)
            return
        stamp = stamp_ns(msg.header.stamp)
        if stamp == self._last_stamp:
            return  # the same state again (a second publisher): its transforms are already out
        self._last_stamp = stamp
        transforms = []
        for joint in self._moving:
            rotation, position = self.model.joint_motion(joint, float(q[self.model.index[joint.name]]))
            transforms.append(transform_msg(joint.parent, joint.child, np.asarray(position), matrix_to_quat(rotation),
                                            stamp))
        self.tf.publish(TFMessage(transforms=transforms))


def main(args: list[str] | None = None) -> None:
    run_node(RobotStateNode, args)


if __name__ == "__main__":
    main()
