"""Loading the rig URDF into a SAPIEN scene and mapping the contract's 14-vector onto its joints.

The same loader serves the world (with or without visuals) and the kinematics helper, so the
simulation, the oracle's IK and the ROS stage monitor all read one URDF.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sapien

from robofollow_ros.contract import ARM_SLICE, ARMS, GRIPPER_INDEX, JOINT_NAMES
from robofollow_ros.sim.rig_config import RigConfig, RigConfigError


def load_rig_articulation(scene: sapien.Scene, rig: RigConfig, visuals: bool) -> sapien.physx.PhysxArticulation:
    """Build the rig in ``scene``; ``visuals=False`` drops every visual shape so no render system is needed."""
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actor_builders, _cameras = loader.parse(str(rig.urdf_path))
    if len(builders) != 1 or actor_builders:
        raise RigConfigError(f"{rig.urdf_path}: expected one articulation, got {len(builders)} and "
                             f"{len(actor_builders)} loose links")
    if not visuals:
        for link_builder in builders[0].link_builders:
            link_builder.visual_records = []
    robot = builders[0].build()
    robot.set_name("robofollow_rig")
    return robot


@dataclass(frozen=True)
class Frame:
    """A massless URDF leaf link (TCP, camera mount) kept as a fixed offset from its parent link."""

    parent: str
    offset: sapien.Pose


def load_rig_for_simulation(scene: sapien.Scene, rig: RigConfig,
                            visuals: bool) -> tuple[sapien.physx.PhysxArticulation, dict[str, Frame]]:
    """Build the rig without its massless leaf frames, returned as offsets instead.

    Every articulation link costs solver time each physics step; TCP and camera links carry no
    collision shape, so they are folded into their parents (about a fifth fewer links).
    """
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actor_builders, _cameras = loader.parse(str(rig.urdf_path))
    if len(builders) != 1 or actor_builders:
        raise RigConfigError(f"{rig.urdf_path}: expected one articulation, got {len(builders)} and "
                             f"{len(actor_builders)} loose links")
    link_builders = builders[0].link_builders
    parents = {id(b.parent) for b in link_builders if b.parent is not None}
    frames: dict[str, Frame] = {}
    kept = []
    for builder in link_builders:
        record = builder.joint_record
        is_frame = (builder.parent is not None and id(builder) not in parents and record.joint_type == "fixed"
                    and not builder.collision_records and not builder.visual_records)
        if is_frame:
            frames[builder.name] = Frame(builder.parent.name, record.pose_in_parent * record.pose_in_child.inv())
        else:
            kept.append(builder)
    for index, builder in enumerate(kept):
        builder.index = index
        if not visuals:
            builder.visual_records = []
    builders[0].link_builders = kept
    robot = builders[0].build()
    robot.set_name("robofollow_rig")
    return robot, frames


@dataclass(frozen=True)
class JointMap:
    """Where each value of the 14-vector goes in the articulation's ``qpos``."""

    dof: int
    arm_qpos_index: dict[str, np.ndarray]  # arm -> 6 qpos indices (joints 1-6)
    gripper_qpos_index: dict[str, np.ndarray]  # arm -> qpos indices of that arm's finger joints
    gripper_travel: float
    lower: np.ndarray  # qpos lower limits
    upper: np.ndarray

    @classmethod
    def of(cls, robot: sapien.physx.PhysxArticulation, rig: RigConfig) -> JointMap:
        names = [j.name for j in robot.active_joints]
        missing = [n for n in JOINT_NAMES if n.endswith(tuple(f"joint{i}" for i in range(1, 7))) and n not in names]
        if missing:
            raise RigConfigError(f"{rig.urdf_path}: URDF lacks joints {missing}")
        arm_index = {arm: np.array([names.index(n) for n in JOINT_NAMES[ARM_SLICE[arm]]]) for arm in ARMS}
        grip_index = {}
        for arm in ARMS:
            absent = [j for j in rig.gripper_joints[arm] if j not in names]
            if absent:
                raise RigConfigError(f"rig config: gripper_joints.{arm} names joints not in the URDF: {absent}")
            grip_index[arm] = np.array([names.index(j) for j in rig.gripper_joints[arm]])
        limits = np.asarray(robot.qlimit, dtype=np.float64).reshape(-1, 2)
        return cls(robot.dof, arm_index, grip_index, rig.gripper_travel, limits[:, 0].copy(), limits[:, 1].copy())

    def to_qpos(self, vector: np.ndarray) -> np.ndarray:
        """A 14-vector (grippers normalised) as an articulation ``qpos``."""
        qpos = np.zeros(self.dof)
        for arm in ARMS:
            qpos[self.arm_qpos_index[arm]] = vector[ARM_SLICE[arm]]
            opening = float(np.clip(vector[GRIPPER_INDEX[arm]], 0.0, 1.0))
            qpos[self.gripper_qpos_index[arm]] = opening * self.gripper_travel
        return qpos

    def arm_limits(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        index = self.arm_qpos_index[arm]
        return self.lower[index].copy(), self.upper[index].copy()

    def check_vector(self, vector: object, field: str = "action") -> np.ndarray:
        """A finite 14-vector, or a ValueError naming the field and the bad value."""
        array = np.asarray(vector, dtype=np.float64)
        if array.shape != (len(JOINT_NAMES),):
            raise ValueError(f"{field}: expected {len(JOINT_NAMES)} values, got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{field}: values must be finite, got {array.tolist()}")
        return array
