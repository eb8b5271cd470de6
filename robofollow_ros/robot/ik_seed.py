"""Closed-form starting guesses for the numeric IK of a "yaw-pitch-pitch + roll-pitch-roll" arm.

Damped least squares from a fixed home pose gets stuck in local minima for targets near the base
or far across the table. Arms of this family (joint1 yaw, joints 2-3 pitch, a spherical wrist of
roll-pitch-roll, zero pose = upper arm up, forearm and tool forward) have a closed-form solution;
it is used only as a seed, and the numeric solver still checks the result against the URDF, so a
rig of another family merely loses the seed, not correctness. Lengths are read from the URDF by FK.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robofollow_ros.robot.transforms import quat_to_matrix


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rot_y(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


@dataclass(frozen=True)
class ArmGeometry:
    """An arm's figures, measured by FK at the zero pose (all in the arm's base frame)."""

    base_rotation: np.ndarray  # world <- base
    base_position: np.ndarray
    shoulder: np.ndarray  # joint2 origin
    upper_arm: float  # joint2 -> joint3
    forearm: float  # joint3 -> joint5 (wrist centre)
    tool: float  # wrist centre -> TCP

    def seeds(self, position: np.ndarray, quat_wxyz: np.ndarray) -> list[np.ndarray]:
        """Candidate joint vectors (elbow up first), possibly outside limits; the solver clamps and refines."""
        target_r = self.base_rotation.T @ quat_to_matrix(quat_wxyz)
        target_p = self.base_rotation.T @ (np.asarray(position) - self.base_position)
        wrist = target_p - self.tool * target_r[:, 0]
        j1 = float(np.arctan2(wrist[1], wrist[0]))
        radial = float(np.hypot(wrist[0], wrist[1])) - float(np.hypot(self.shoulder[0], self.shoulder[1]))
        height = float(wrist[2] - self.shoulder[2])
        reach2 = radial * radial + height * height
        sin_j3 = (self.upper_arm**2 + self.forearm**2 - reach2) / (2 * self.upper_arm * self.forearm)
        sin_j3 = float(np.clip(sin_j3, -1.0, 1.0))
        out = []
        for j3 in (float(np.arcsin(sin_j3)), float(np.pi - np.arcsin(sin_j3))):
            a = self.upper_arm - self.forearm * np.sin(j3)
            b = self.forearm * np.cos(j3)
            j2 = float(np.arctan2(radial, height) - np.arctan2(b, a))
            forearm_r = _rot_z(j1) @ _rot_y(j2 + j3)
            m = forearm_r.T @ target_r
            j5 = float(np.arccos(np.clip(m[0, 0], -1.0, 1.0)))
            j4 = float(np.arctan2(m[1, 0], -m[2, 0]))
            j6 = float(np.arctan2(m[0, 1], m[0, 2]))
            out.append(np.array([j1, _wrap(j2), _wrap(j3), _wrap(j4), j5, _wrap(j6)]))
            out.append(np.array([j1, _wrap(j2), _wrap(j3), _wrap(j4 + np.pi), -j5, _wrap(j6 + np.pi)]))
        return out
