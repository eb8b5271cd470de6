"""ROS-free forward and inverse kinematics of the rig, from the same URDF the simulator loads.

Used by the oracle expert (IK to grasp poses), the ROS stage monitor and arm bridge (FK from
``/joint_states``), the robot state publisher (TF of every link) and the world (scorer EE points).
It needs NumPy only (``robot.urdf_model``), so every node runs on a rig without the simulator;
``test_sim_kinematics`` checks it against SAPIEN's Pinocchio model of the same URDF.

TCP frame: +x along the approach (wrist → fingertips), +y along finger opening; so RoboTwin's
top-down grasp quaternion (w,x,y,z) = (−0.5, 0.5, −0.5, −0.5) means "approach straight down,
fingers opening along world x" here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robofollow_ros.contract import ARM_SLICE, ARMS, TABLE_TOP_Z
from robofollow_ros.robot.ik_seed import ArmGeometry
from robofollow_ros.robot.joint_map import JointMap
from robofollow_ros.robot.rig_config import RigConfig, load_rig_config
from robofollow_ros.robot.transforms import matrix_to_quat, quat_to_matrix, rotation_error
from robofollow_ros.robot.urdf_model import UrdfModel

#: RoboTwin's top-down grasp orientation (w, x, y, z); identical in this rig's TCP frame.
TOP_DOWN_QUAT_WXYZ = (-0.5, 0.5, -0.5, -0.5)
#: Scene 1's fingertip proxy: TCP + this offset along the TCP's local +x (spec section d).
SCENE1_FINGERTIP_OFFSET = 0.04
#: Grasp heights for this rig's fingers: the pads span TCP −0.04 … +0.01 along the approach and
#: the palm's face is at the TCP, so a top-down grasp puts the TCP just above the object's top,
#: but never lets the fingertips come closer than 5 mm to the table.
FINGERTIP_CLEARANCE = 0.005
PALM_CLEARANCE = 0.003


def top_down_grasp_tcp_z(object_top_z: float, table_z: float = TABLE_TOP_Z) -> float:
    """TCP height for a top-down grasp of an object whose top is at ``object_top_z``."""
    return max(table_z + SCENE1_FINGERTIP_OFFSET + FINGERTIP_CLEARANCE, object_top_z + PALM_CLEARANCE)


@dataclass(frozen=True)
class TcpPose:
    position: np.ndarray  # (3,) world frame
    quat_wxyz: np.ndarray  # (4,)

    @property
    def rotation(self) -> np.ndarray:
        return quat_to_matrix(self.quat_wxyz)


@dataclass(frozen=True)
class IkResult:
    joints: np.ndarray  # (6,) arm joints, within limits
    success: bool
    position_error: float  # metres
    rotation_error: float  # radians


class RigKinematics:
    """FK of the 14-vector and per-arm IK on the URDF's kinematic tree (``qpos`` in URDF joint order)."""

    def __init__(self, rig: RigConfig | None = None) -> None:
        self.rig = rig or load_rig_config()
        self.model = UrdfModel.from_file(self.rig.urdf_path)
        lower, upper = self.model.limits()
        self.joint_map = JointMap.from_names(self.model.moving_joints, lower, upper, self.rig)
        for arm in ARMS:
            if self.rig.tcp_links[arm] not in self.model.links:
                raise ValueError(f"rig config: tcp_links.{arm} names no link of {self.rig.urdf_path}")
        self._geometry = {arm: self._measure_arm(arm) for arm in ARMS}

    def _measure_arm(self, arm: str) -> ArmGeometry | None:
        """Link lengths by FK at the zero pose, for the closed-form IK seed (the origins of joints 2, 3 and 5)."""
        joints = [self.model.joints[j.name] for j in self.rig.arm_joints[arm]]
        if any(j.kind == "prismatic" for j in joints):
            return None
        qpos = np.zeros(self.joint_map.dof)
        base_r, base_p = self.model.link_pose(qpos, joints[0].parent)
        at = {key: self.model.link_pose(qpos, joints[k].child)[1] for key, k in
              (("shoulder", 1), ("elbow", 2), ("wrist", 4))}
        tcp = self.model.link_pose(qpos, self.rig.tcp_links[arm])[1]
        return ArmGeometry(
            base_rotation=base_r, base_position=base_p,
            shoulder=base_r.T @ (at["shoulder"] - base_p),
            upper_arm=float(np.linalg.norm(at["elbow"] - at["shoulder"])),
            forearm=float(np.linalg.norm(at["wrist"] - at["elbow"])),
            tool=float(np.linalg.norm(tcp - at["wrist"])),
        )

    def home_vector(self) -> np.ndarray:
        return self.rig.home_vector()

    def arm_limits(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        return self.joint_map.arm_limits(arm)

    def _pose_of(self, qpos: np.ndarray, link: str) -> TcpPose:
        rotation, position = self.model.link_pose(qpos, link)
        return TcpPose(position, matrix_to_quat(rotation))

    def qpos(self, vector: np.ndarray) -> np.ndarray:
        """The model's joint positions (URDF order) for a checked 14-vector."""
        return self.joint_map.to_qpos(self.joint_map.check_vector(vector, "vector"))

    def tcp_poses(self, vector: np.ndarray) -> dict[str, TcpPose]:
        """Both TCP poses in the world frame for a 14-vector."""
        qpos = self.qpos(vector)
        return {arm: self._pose_of(qpos, self.rig.tcp_links[arm]) for arm in ARMS}

    def link_pose(self, vector: np.ndarray, link: str) -> TcpPose:
        """World pose of any URDF link (e.g. a camera link) for a 14-vector."""
        if link not in self.model.links:
            raise ValueError(f"link: unknown link {link!r}")
        return self._pose_of(self.qpos(vector), link)

    def link_poses(self, vector: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every link's (rotation, position) in the world frame for a 14-vector (one pass over the tree)."""
        return self.model.all_link_poses(self.qpos(vector))

    def parent_link(self, link: str) -> str | None:
        """Name of a link's parent link in the URDF tree (None for the root)."""
        if link not in self.model.links:
            raise ValueError(f"link: unknown link {link!r}")
        return self.model.parent_link(link)

    def ee_points(self, vector: np.ndarray, scene: str) -> dict[str, np.ndarray]:
        """The scorer's EE points: TCP positions, or for Scene 1 the fingertip proxy (TCP + 0.04 m along +x)."""
        poses = self.tcp_poses(vector)
        offset = SCENE1_FINGERTIP_OFFSET if scene == "scene1" else 0.0
        return {arm: p.position + offset * p.rotation[:, 0] for arm, p in poses.items()}

    def ik(self, arm: str, position: np.ndarray, quat_wxyz: np.ndarray, seed: np.ndarray | None = None,
           max_iterations: int = 200, position_tolerance: float = 1e-4,
           rotation_tolerance: float = 1e-3) -> IkResult:
        """Arm joints putting ``arm``'s TCP at the pose, within joint limits (damped least squares).

        Works in the rig's own joint units and returns contract values. Starts from ``seed`` (6 joints; default
        home), then from closed-form guesses and home; returns the best attempt with ``success`` False when no
        attempt met the tolerances.
        """
        if arm not in ARMS:
            raise ValueError(f"arm: expected one of {ARMS}, got {arm!r}")
        target_p = np.asarray(position, dtype=np.float64).reshape(3)
        target_r = quat_to_matrix(np.asarray(quat_wxyz, dtype=np.float64).reshape(4))
        home = self.joint_map.arm_to_qpos(arm, np.asarray(self.rig.home[arm], dtype=np.float64))
        seeds = [home] if seed is None else [
            self.joint_map.arm_to_qpos(arm, np.asarray(seed, dtype=np.float64).reshape(6)), home]
        geometry = self._geometry[arm]
        if geometry is not None:  # closed-form guesses, in the rig's own joint units
            seeds[1:1] = geometry.seeds(target_p, np.asarray(quat_wxyz, dtype=np.float64).reshape(4))
        best: IkResult | None = None
        for start in seeds:
            result = self._solve(arm, target_p, target_r, start, max_iterations, position_tolerance,
                                 rotation_tolerance)
            if result.success:
                return result
            if best is None or result.position_error + 0.1 * result.rotation_error < (
                    best.position_error + 0.1 * best.rotation_error):
                best = result
        assert best is not None
        return best

    def _solve(self, arm: str, target_p: np.ndarray, target_r: np.ndarray, start: np.ndarray, max_iterations: int,
               position_tolerance: float, rotation_tolerance: float) -> IkResult:
        vector = self.home_vector()
        qpos = self.joint_map.to_qpos(vector)
        columns = self.joint_map.arm_qpos_index[arm]
        lower, upper = self.joint_map.lower[columns], self.joint_map.upper[columns]
        qpos[columns] = np.clip(start, lower, upper)
        link = self.rig.tcp_links[arm]
        damping = 1e-3
        pos_err = rot_err = np.inf
        for _ in range(max_iterations):
            rot, p, jac = self.model.jacobian(qpos, link, columns)
            e_p = target_p - p
            e_r = rotation_error(target_r, rot)
            pos_err, rot_err = float(np.linalg.norm(e_p)), float(np.linalg.norm(e_r))
            if pos_err < position_tolerance and rot_err < rotation_tolerance:
                break
            error = np.concatenate([e_p, 0.3 * e_r])
            jac[3:] *= 0.3
            step = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), error)
            qpos[columns] = np.clip(qpos[columns] + step, lower, upper)
        ok = pos_err < position_tolerance and rot_err < rotation_tolerance
        return IkResult(self.joint_map.arm_from_qpos(arm, qpos[columns]), bool(ok), pos_err, rot_err)

    def arm_vector(self, vector: np.ndarray, arm: str, joints: np.ndarray) -> np.ndarray:
        """A copy of ``vector`` with ``arm``'s six joints replaced (a convenience for building action rows)."""
        out = np.array(vector, dtype=np.float64)
        out[ARM_SLICE[arm]] = joints
        return out
