"""Where each value of the contract's 14-vector goes in a joint-position vector (``qpos``), and back.

The contract's arm joints are the rig's own joints, with the sign and offset its YAML gives where the lab's
zero or direction differs (``lab = offset + sign · contract``); each normalised gripper drives every finger
joint the YAML lists between its closed and open positions. Kept free of any simulator: the SAPIEN world
builds one from its articulation's joint order (``JointMap.of``), the NumPy kinematics from the URDF's.
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
    arm_sign: dict[str, np.ndarray]  # arm -> 6 signs (±1)
    arm_offset: dict[str, np.ndarray]  # arm -> 6 offsets (lab units)
    gripper_qpos_index: dict[str, np.ndarray]  # arm -> qpos indices of that arm's finger joints
    finger_closed: dict[str, np.ndarray]  # arm -> closed position of each finger joint
    finger_open: dict[str, np.ndarray]
    lower: np.ndarray  # qpos lower limits
    upper: np.ndarray

    @classmethod
    def from_names(cls, names: Sequence[str], lower: np.ndarray, upper: np.ndarray, rig: RigConfig) -> JointMap:
        """From the moving joints' names in ``qpos`` order and their limits."""
        names = list(names)
        missing = [j.name for arm in ARMS for j in rig.arm_joints[arm] if j.name not in names]
        if missing:
            raise RigConfigError(f"{rig.urdf_path}: URDF lacks joints {missing} (named by {rig.source})")
        absent = [f.name for arm in ARMS for f in rig.fingers[arm] if f.name not in names]
        if absent:
            raise RigConfigError(f"{rig.source}: grippers name joints not in the URDF: {absent}")
        return cls(
            len(names),
            {arm: np.array([names.index(j.name) for j in rig.arm_joints[arm]]) for arm in ARMS},
            {arm: np.array([j.sign for j in rig.arm_joints[arm]], dtype=np.float64) for arm in ARMS},
            {arm: np.array([j.offset for j in rig.arm_joints[arm]], dtype=np.float64) for arm in ARMS},
            {arm: np.array([names.index(f.name) for f in rig.fingers[arm]]) for arm in ARMS},
            {arm: np.array([f.closed for f in rig.fingers[arm]], dtype=np.float64) for arm in ARMS},
            {arm: np.array([f.open for f in rig.fingers[arm]], dtype=np.float64) for arm in ARMS},
            np.asarray(lower, dtype=np.float64).copy(), np.asarray(upper, dtype=np.float64).copy(),
        )

    @classmethod
    def of(cls, robot: Any, rig: RigConfig) -> JointMap:
        """From a SAPIEN articulation (its active joints' order and ``qlimit``); duck-typed, so this
        module needs no simulator."""
        limits = np.asarray(robot.qlimit, dtype=np.float64).reshape(-1, 2)
        return cls.from_names([j.name for j in robot.active_joints], limits[:, 0], limits[:, 1], rig)

    def arm_to_qpos(self, arm: str, values: np.ndarray) -> np.ndarray:
        """Six contract joint values of ``arm`` in the rig's own units (``offset + sign · value``)."""
        return self.arm_offset[arm] + self.arm_sign[arm] * np.asarray(values, dtype=np.float64)

    def arm_from_qpos(self, arm: str, values: np.ndarray) -> np.ndarray:
        """Six of the rig's joint positions as contract values (the inverse of :meth:`arm_to_qpos`)."""
        return (np.asarray(values, dtype=np.float64) - self.arm_offset[arm]) * self.arm_sign[arm]

    def fingers_at(self, arm: str, normalised: float) -> np.ndarray:
        """The finger joints' positions for a normalised gripper value (clipped to [0, 1])."""
        return self.fingers_along(arm, np.asarray([normalised], dtype=np.float64))[0]

    def fingers_along(self, arm: str, normalised: np.ndarray) -> np.ndarray:
        """:meth:`fingers_at` for a series of gripper values at once: shape (n, fingers)."""
        g = np.clip(np.asarray(normalised, dtype=np.float64), 0.0, 1.0)[:, None]
        return self.finger_closed[arm] + g * (self.finger_open[arm] - self.finger_closed[arm])

    def to_qpos(self, vector: np.ndarray) -> np.ndarray:
        """A 14-vector (grippers normalised) as an articulation ``qpos``."""
        qpos = np.zeros(self.dof)
        for arm in ARMS:
            qpos[self.arm_qpos_index[arm]] = self.arm_to_qpos(arm, vector[ARM_SLICE[arm]])
            qpos[self.gripper_qpos_index[arm]] = self.fingers_at(arm, float(vector[GRIPPER_INDEX[arm]]))
        return qpos

    def arm_limits(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        """``arm``'s joint limits in contract units (a negative sign swaps lower and upper)."""
        index = self.arm_qpos_index[arm]
        a, b = self.arm_from_qpos(arm, self.lower[index]), self.arm_from_qpos(arm, self.upper[index])
        return np.minimum(a, b), np.maximum(a, b)

    def check_vector(self, vector: object, field: str = "action") -> np.ndarray:
        """A finite 14-vector, or a ValueError naming the field and the bad value."""
        array = np.asarray(vector, dtype=np.float64)
        if array.shape != (len(JOINT_NAMES),):
            raise ValueError(f"{field}: expected {len(JOINT_NAMES)} values, got shape {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{field}: values must be finite, got {array.tolist()}")
        return array
