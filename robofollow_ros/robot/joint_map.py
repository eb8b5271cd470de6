"""Where each value of the contract's 14-vector goes in a joint-position vector (``qpos``).

Kept free of any simulator: the SAPIEN world builds one from its articulation's joint order
(``JointMap.of``), the NumPy kinematics from the URDF's (``robot.kinematics``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.contract import ARM_SLICE, ARMS, GRIPPER_INDEX, JOINT_NAMES
from robofollow_ros.robot.rig_config import RigConfig, RigConfigError


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
    def from_names(cls, names: Sequence[str], lower: np.ndarray, upper: np.ndarray, rig: RigConfig) -> JointMap:
        """From the moving joints' names in ``qpos`` order and their limits."""
        names = list(names)
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
        return cls(len(names), arm_index, grip_index, rig.gripper_travel,
                   np.asarray(lower, dtype=np.float64).copy(), np.asarray(upper, dtype=np.float64).copy())

    @classmethod
    def of(cls, robot: Any, rig: RigConfig) -> JointMap:
        """From a SAPIEN articulation (its active joints' order and ``qlimit``); duck-typed, so this
        module needs no simulator."""
        limits = np.asarray(robot.qlimit, dtype=np.float64).reshape(-1, 2)
        return cls.from_names([j.name for j in robot.active_joints], limits[:, 0], limits[:, 1], rig)

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
