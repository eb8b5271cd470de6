"""A task → a queue of phases; one phase is planned per ``predict`` call from the poses seen then.

Phases that emit no rows (checks) run in the same call as the next phase. A failed grasp (object not
lifted) inserts a retry (at most two). Once every phase is done the expert holds still
with one row per call, which keeps the trajectory short (frames count in the scorer's windows).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from robofollow_ros.benchmark import Layout
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.policy.expert import skills
from robofollow_ros.policy.expert.meaning import TaskMeaning
from robofollow_ros.policy.expert.motion import MotionBuilder, wrap_half_turn
from robofollow_ros.policy.expert.placement import relation_spot
from robofollow_ros.policy.expert.poses import ObjectPoses, yaw_of
from robofollow_ros.policy.interface import PolicyError
from robofollow_ros.robot.kinematics import RigKinematics

Phase = Callable[[skills.SkillContext, MotionBuilder], None]
#: Lifted at least this much above its frame-0 height counts as "in hand" (Scene 2 pickup needs 0.03).
LIFTED_M = 0.04
MAX_RETRIES = 2
SLOT_DROP = 0.006


class ExpertPlanner:
    """Plans and replays one task; create a new one per episode."""

    def __init__(self, kin: RigKinematics, meaning: TaskMeaning, layout: Layout,
                 slot_xy: dict[int, tuple[float, float]], closed_loop: bool = True,
                 release: skills.Release = skills.open_and_retreat) -> None:
        """``release``: how placements let go (the oracle's own by default; OWDA execution waits for the
        object to settle, see ``decisions.sim_primitives``)."""
        self.kin, self.meaning, self.layout, self.slot_xy = kin, meaning, layout, slot_xy
        self.closed_loop = closed_loop
        self.release = release
        self.calls = 0
        self.retries = 0
        self.pending: deque[np.ndarray] = deque()
        self.phases: deque[Phase] = deque(self._phases())
        self.ctx: skills.SkillContext | None = None
        self.start_z: dict[str, float] = {}
        self.first_poses: ObjectPoses | None = None
        self.last_chunk: list[np.ndarray] = []

    # -------------------------------------------------------------------------------- public
    def step(self, vector: np.ndarray, poses: ObjectPoses, chunk: int = 50) -> np.ndarray:
        """Rows for this ``predict`` call (at most ``chunk``); never empty.

        The evaluator may execute only a prefix of a chunk (``--actions-per-step`` below the chunk size);
        the rows it skipped are recognised from the current joints and sent again.
        """
        self.calls += 1
        vector = np.asarray(vector, dtype=np.float64)
        self._requeue_unexecuted(vector)
        if self.ctx is None:
            self.ctx = skills.SkillContext(self.kin, self.layout, poses, vector.copy(), closed_loop=self.closed_loop)
            self.first_poses = poses
            self.start_z = {name: float(poses.position(name)[2]) for name in poses.names()}
        elif self.closed_loop:
            self.ctx.poses = poses
        while not self.pending and self.phases:
            mb = MotionBuilder(self.kin, vector)
            self.phases.popleft()(self.ctx, mb)
            self.pending.extend(mb.rows)
        if not self.pending:
            self.last_chunk = [vector.copy()]
            return vector[None, :].astype(np.float32)
        self.last_chunk = [self.pending.popleft() for _ in range(min(chunk, len(self.pending)))]
        return np.asarray(self.last_chunk, dtype=np.float32)

    def _requeue_unexecuted(self, vector: np.ndarray) -> None:
        """The last executed row is the one the robot now stands at (grippers are reported as commanded)."""
        if len(self.last_chunk) < 2:
            return
        distances = [float(np.abs(row - vector).max()) for row in self.last_chunk]
        best = min(distances)
        executed = max(i for i, d in enumerate(distances) if d <= best + 1e-4) + 1
        self.pending.extendleft(reversed(self.last_chunk[executed:]))
        self.last_chunk = []

    @property
    def done(self) -> bool:
        return not self.pending and not self.phases

    # -------------------------------------------------------------------------------- phases
    def _phases(self) -> list[Phase]:
        m = self.meaning
        act = m.action
        if m.scene == "scene2" and act == "push":
            return [self._push_phase, self._home_phase(m.arm)]
        phases: list[Phase] = [self._grasp_phase(m.arm, m.source), self._verify_phase(m.arm, m.source)]
        if act == "sequence_pickups":
            if m.second_source is None or m.second_arm is None:
                raise PolicyError(f"task: sequence_pickups needs second_source and second_arm, got {m}")
            return [*phases, self._home_phase(m.arm), self._grasp_phase(m.second_arm, m.second_source),
                    self._verify_phase(m.second_arm, m.second_source), self._home_phase(m.second_arm)]
        if act == "pickup":
            return [*phases, self._home_phase(m.arm)]
        if act == "place_on_label_route":
            return [*phases, self._route_phase, self._place_phase(self._label_centre, self._label_yaw)]
        if act.startswith("place_") and m.scene == "scene1":
            return [*phases, self._place_phase(self._relation_centre), self._home_phase(m.arm)]
        if act in ("stack", "stack_on_target"):
            return [*phases, self._place_phase(self._stack_centre), self._home_phase(m.arm)]
        if act == "place_bowl":
            return [*phases, self._place_phase(self._bowl_centre), self._home_phase(m.arm)]
        if act == "unstack_to_slot":
            return [*phases, self._place_phase(self._slot_centre), self._home_phase(m.arm)]
        raise PolicyError(f"task: the expert has no plan for action {act!r} in {m.scene}")

    def _grasp_phase(self, arm: str, name: str) -> Phase:
        def phase(ctx: skills.SkillContext, mb: MotionBuilder) -> None:
            skills.grasp(ctx, mb, arm, name)
        return phase

    def _verify_phase(self, arm: str, name: str) -> Phase:
        def phase(ctx: skills.SkillContext, mb: MotionBuilder) -> None:
            if not self.closed_loop or self.retries >= MAX_RETRIES:
                return
            lifted = ctx.poses.position(name)[2] - self.start_z[name]
            if lifted >= LIFTED_M:
                return
            self.retries += 1
            mb.grip(arm, skills.open_width(ctx.spec(name), ctx.kin.rig.finger_half_gap))
            self.phases.extendleft([self._verify_phase(arm, name), self._grasp_phase(arm, name)])
        return phase

    def _home_phase(self, arm: str) -> Phase:
        def phase(ctx: skills.SkillContext, mb: MotionBuilder) -> None:
            skills.go_home(ctx, mb, arm)
        return phase

    def _push_phase(self, ctx: skills.SkillContext, mb: MotionBuilder) -> None:
        m = self.meaning
        assert m.target is not None
        source0 = self._frame0(m.source)
        target0 = self._frame0(m.target)
        u = target0[:2] - source0[:2]
        gap = float(np.linalg.norm(u))
        distance = float(np.clip(gap - 0.05, 0.05, 0.07))
        skills.push(ctx, mb, m.arm, m.source, u, distance)

    def _frame0(self, name: str) -> np.ndarray:
        assert self.first_poses is not None
        return self.first_poses.position(name)

    def _route_phase(self, ctx: skills.SkillContext, mb: MotionBuilder) -> None:
        m = self.meaning
        if m.route_over is None:
            raise PolicyError(f"task: a route task needs the object to pass over, got {m}")
        skills.carry(ctx, mb, m.arm, m.source, ctx.poses.position(m.route_over)[:2])
        mb.hold()

    def _place_phase(self, centre: Callable[[skills.SkillContext], np.ndarray],
                     yaw: Callable[[skills.SkillContext, MotionBuilder], float | None] | None = None) -> Phase:
        def phase(ctx: skills.SkillContext, mb: MotionBuilder) -> None:
            arm = self.meaning.arm
            skills.place(ctx, mb, arm, self.meaning.source, centre(ctx), None if yaw is None else yaw(ctx, mb),
                         self.release)
        return phase

    # ---------------------------------------------------------------------------- targets
    def _half(self, name: str) -> float:
        return self.layout.object(name).half_height

    def _relation_centre(self, ctx: skills.SkillContext) -> np.ndarray:
        m = self.meaning
        assert m.target is not None
        xy = relation_spot(ctx, m.arm, m.source, m.target, m.action)
        return np.array([xy[0], xy[1], TABLE_TOP_Z + self._half(m.source) + 0.008])

    def _stack_centre(self, ctx: skills.SkillContext) -> np.ndarray:
        m = self.meaning
        assert m.target is not None
        t = ctx.poses.position(m.target)
        return np.array([t[0], t[1], t[2] + self._half(m.target) + self._half(m.source) + 0.008])

    def _bowl_centre(self, ctx: skills.SkillContext) -> np.ndarray:
        m = self.meaning
        assert m.target is not None
        bowl = ctx.poses.position(m.target)
        rim = bowl[2] - 0.02 + 0.05 * self.layout.object(m.target).scale
        return np.array([bowl[0], bowl[1], rim + 0.012 + self._half(m.source)])

    def _slot_centre(self, ctx: skills.SkillContext) -> np.ndarray:
        m = self.meaning
        if m.place_slot is None or m.place_slot not in self.slot_xy:
            raise PolicyError(f"task: unstack_to_slot needs a slot in {sorted(self.slot_xy)}, got {m.place_slot!r}")
        x, y = self.slot_xy[m.place_slot]
        return np.array([x, y, TABLE_TOP_Z + self._half(m.source) + 0.001 + SLOT_DROP])

    def _label_centre(self, ctx: skills.SkillContext) -> np.ndarray:
        m = self.meaning
        assert m.target is not None
        label = ctx.poses.position(m.target)
        return np.array([label[0], label[1], label[2] + 0.001 + self._half(m.source) + 0.006])

    def _label_yaw(self, ctx: skills.SkillContext, mb: MotionBuilder) -> float | None:
        """Gripper yaw that turns the held bar to the target yaw (mod π), by the shorter way."""
        m = self.meaning
        if m.target_yaw is None:
            return None
        current = yaw_of(ctx.poses, m.source) if self.closed_loop else mb.yaw[m.arm]
        return mb.yaw[m.arm] + wrap_half_turn(m.target_yaw - current)
