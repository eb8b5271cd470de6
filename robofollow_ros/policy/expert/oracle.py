"""``oracle``: the privileged expert, speaking the ordinary Policy interface.

It knows the task by ``obs["privileged"]["task_id"]`` (looked up in the registry: the record's
resolved action, source, target, arm, scored route and yaw) and sees object poses only through
:func:`~robofollow_ros.policy.expert.poses.poses_from_observation`, so it works in process, behind
``robofollow serve`` and, on the rig, fed by the perception node. Each ``predict`` plans the next
phase from the current joints and poses (closed loop: a grasp that did not lift is retried).

``dense_hz`` (kwarg; default off, so lock-step scoring is unchanged): emit dense chunks of ``chunk_size``
rows at that control rate for real-time execution instead of sparse waypoints (``expert.dense``).
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.expert.dense import DEFAULT_MAX_STEP_RAD, DenseChunker
from robofollow_ros.policy.expert.meaning import meaning_of_eval_task
from robofollow_ros.policy.expert.planner import ExpertPlanner
from robofollow_ros.policy.expert.poses import ObjectPoses, poses_from_observation, task_id_from_observation
from robofollow_ros.policy.interface import Observation, PolicyError, RtcHint

#: ``planner.step``'s chunk when the dense chunker asks for a whole phase.
WHOLE_PHASE = 1 << 30


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
    the registry, the rig's kinematics and one planner per episode, dropped by ``reset``.

    ``dense_hz``/``max_step_rad``: dense chunks (``expert.dense``); with them the policy accepts an
    :class:`RtcHint` (its queued rows tell where the new chunk continues). ``settle`` (dense only): grip
    and release only once the arm is measured at the pose (``expert.dense``; rate mode in the ROS graph)."""

    def __init__(self, chunk_size: int = 50, dense_hz: int | None = None,
                 max_step_rad: float = DEFAULT_MAX_STEP_RAD, settle: bool = False) -> None:
        if not isinstance(settle, bool):
            raise ValueError(f"settle: expected true or false, got {settle!r}")
        if settle and dense_hz is None:
            raise ValueError("settle: needs dense_hz (it waits for the arm between dense rows)")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size: expected an integer >= 1, got {chunk_size!r}")
        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.kinematics import RigKinematics

        self.chunk_size = chunk_size
        self.dense = None if dense_hz is None else DenseChunker(dense_hz, chunk_size, max_step_rad,
                                                               settle=settle)
        self.accepts_rtc = self.dense is not None
        self.registry = default_registry()
        self.kin = RigKinematics()
        if self.dense is not None:
            self.dense.max_acceleration = float(self.kin.rig.max_acceleration)
        self.planner: ExpertPlanner | None = None
        self._dense_of: ExpertPlanner | None = None

    def reset(self) -> None:
        self.planner = None

    def plan_rows(self, vector: np.ndarray, poses: ObjectPoses, rtc: RtcHint | None = None) -> np.ndarray:
        """The planner's next rows: its waypoints (at most ``chunk_size``), or a dense chunk with ``dense_hz``."""
        planner = self.planner
        assert planner is not None
        if self.dense is None:
            return planner.step(vector, poses, self.chunk_size)
        if self._dense_of is not planner:  # a new episode or task: a new track
            self.dense.reset()
            self.dense.lookahead = not planner.closed_loop
            self._dense_of = planner
        queued = None if rtc is None else np.asarray(rtc.queued_rows, dtype=np.float64).reshape(-1, ACTION_DIM)
        return self.dense.chunk(vector, lambda start: planner.step(start, poses, WHOLE_PHASE), queued)


class OraclePolicy(PlannerPolicy):
    """Privileged expert; one planner per episode, created at the first ``predict`` after ``reset``."""

    #: It plans from the task id and the true poses: handed ``obs["privileged"]`` in process
    #: (``interface.declares_privileged``); over a wire only when the run has ``--privileged``.
    needs_privileged = True

    def __init__(self, chunk_size: int = 50, dense_hz: int | None = None,
                 max_step_rad: float = DEFAULT_MAX_STEP_RAD, settle: bool = False) -> None:
        super().__init__(chunk_size, dense_hz, max_step_rad, settle)
        self.task_id: str | None = None

    def reset(self) -> None:
        super().reset()
        self.task_id = None

    def set_instruction(self, text: str) -> None:
        """The oracle reads the task from the registry, not from the words."""

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> np.ndarray:
        task_id = task_id_from_observation(obs)
        if self.planner is None or task_id != self.task_id:
            try:
                task = self.registry.eval_task(task_id)
            except (KeyError, ValueError) as exc:
                raise PolicyError(f"observation: privileged.task_id {task_id!r} is not an evaluation task") from exc
            self.planner = ExpertPlanner(self.kin, meaning_of_eval_task(task), self.registry.layout_of(task),
                                         dict(self.registry.slot_xy))
            self.task_id = task_id
        return self.plan_rows(current_vector(obs), poses_from_observation(obs), rtc)

    def close(self) -> None:
        self.planner = None
