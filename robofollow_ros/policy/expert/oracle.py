"""``oracle``: the privileged expert, speaking the ordinary Policy interface.

It knows the task by ``obs["privileged"]["task_id"]`` (looked up in the registry: the record's
resolved action, source, target, arm, scored route and yaw) and sees object poses only through
:func:`~robofollow_ros.policy.expert.poses.poses_from_observation`, so it works in process, behind
``robofollow serve`` and, on the rig, fed by the perception node. Each ``predict`` plans the next
phase from the current joints and poses (closed loop: a grasp that did not lift is retried).
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.expert.meaning import meaning_of_eval_task
from robofollow_ros.policy.expert.planner import ExpertPlanner
from robofollow_ros.policy.expert.poses import poses_from_observation, task_id_from_observation
from robofollow_ros.policy.interface import Observation, PolicyError


def current_vector(obs: Observation) -> np.ndarray:
    try:
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float64).reshape(-1)
    except (KeyError, TypeError) as exc:
        raise PolicyError("observation: joint_action.vector is missing") from exc
    if vector.shape != (ACTION_DIM,) or not np.isfinite(vector).all():
        raise PolicyError(f"observation: joint_action.vector must be {ACTION_DIM} finite values, got {vector.shape}")
    return vector


class PlannerPolicy:
    """Shared plumbing of the policies that act through the expert planner (oracle, baselines):
    the registry, the rig's kinematics and one planner per episode, dropped by ``reset``."""

    def __init__(self, chunk_size: int = 50) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size: expected an integer >= 1, got {chunk_size!r}")
        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.kinematics import RigKinematics

        self.chunk_size = chunk_size
        self.registry = default_registry()
        self.kin = RigKinematics()
        self.planner: ExpertPlanner | None = None

    def reset(self) -> None:
        self.planner = None


class OraclePolicy(PlannerPolicy):
    """Privileged expert; one planner per episode, created at the first ``predict`` after ``reset``."""

    #: It plans from the task id and the true poses: handed ``obs["privileged"]`` in process
    #: (``interface.declares_privileged``); over a wire only when the run has ``--privileged``.
    needs_privileged = True

    def __init__(self, chunk_size: int = 50) -> None:
        super().__init__(chunk_size)
        self.task_id: str | None = None

    def reset(self) -> None:
        super().reset()
        self.task_id = None

    def set_instruction(self, text: str) -> None:
        """The oracle reads the task from the registry, not from the words."""

    def predict(self, obs: Observation) -> np.ndarray:
        task_id = task_id_from_observation(obs)
        if self.planner is None or task_id != self.task_id:
            try:
                task = self.registry.eval_task(task_id)
            except (KeyError, ValueError) as exc:
                raise PolicyError(f"observation: privileged.task_id {task_id!r} is not an evaluation task") from exc
            self.planner = ExpertPlanner(self.kin, meaning_of_eval_task(task), self.registry.layout_of(task),
                                         dict(self.registry.slot_xy))
            self.task_id = task_id
        return self.planner.step(current_vector(obs), poses_from_observation(obs), self.chunk_size)

    def close(self) -> None:
        self.planner = None
