"""Mirage baselines: ``memorizer`` (language → remembered plan, blind to the scene) and ``blind``
(scene → its habitual behaviour, deaf to language).

What each one sees:

- ``memorizer`` reads the instruction text and the robot's own joints (``joint_action.vector``). It
  never reads images or ``obs["privileged"]``. It picks the training instruction nearest in words
  and replays that training task's expert plan as if the objects stood at the training layout's
  nominal positions (no jitter, no swaps). Strong at L0, where the scene is the training scene up to
  a few centimetres; wrong whenever an L1–L3 layout moves the object or the words name another one.
- ``blind`` ignores the instruction. It reads the joints and ``obs["privileged"]``: the object
  *names* only to tell which training scene group it is in, and the object *poses* to execute. It
  always performs the most frequent training behaviour of that group (most frequent action, then
  source, arm and target among those tasks), closed loop like the oracle.
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher

import numpy as np

from robofollow_ros.benchmark import Layout, TrainingTask
from robofollow_ros.policy.expert.dense import DEFAULT_MAX_STEP_RAD
from robofollow_ros.policy.expert.meaning import meaning_of_training_task
from robofollow_ros.policy.expert.oracle import PlannerPolicy, current_vector
from robofollow_ros.policy.expert.planner import ExpertPlanner
from robofollow_ros.policy.expert.poses import PoseSnapshot, nominal_poses, poses_from_observation
from robofollow_ros.policy.interface import Observation, PolicyError, RtcHint

SCENES = ("scene1", "scene2", "scene3", "scene4")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def text_similarity(a: str, b: str) -> float:
    """Word-sequence similarity in [0, 1] (difflib's ratio over word lists): cheap, deterministic, order-aware."""
    return SequenceMatcher(None, words(a), words(b), autojunk=False).ratio()


class _PlannedBaseline(PlannerPolicy):
    """The planner plumbing plus the training tasks a baseline chooses its behaviour from."""

    def __init__(self, chunk_size: int = 50, dense_hz: int | None = None,
                 max_step_rad: float = DEFAULT_MAX_STEP_RAD, settle: bool = False) -> None:
        super().__init__(chunk_size, dense_hz, max_step_rad, settle)
        self.training: list[TrainingTask] = [t for s in SCENES for t in self.registry.training_tasks(s)]

    def training_layout(self, task: TrainingTask) -> Layout:
        return self.registry.layout(task.scene, task.layout)

    def make_planner(self, task: TrainingTask, closed_loop: bool) -> ExpertPlanner:
        return ExpertPlanner(self.kin, meaning_of_training_task(task), self.training_layout(task),
                             dict(self.registry.slot_xy), closed_loop=closed_loop)

    def close(self) -> None:
        self.planner = None


class MemorizerPolicy(_PlannedBaseline):
    """Instruction → nearest training instruction → that task's plan at nominal positions (never looks).

    It declares no ``needs_privileged``: it reads neither the scene nor the task id, so it is handed
    the observation contract alone (its numbers then show what words and joints alone achieve)."""

    def __init__(self, chunk_size: int = 50, dense_hz: int | None = None,
                 max_step_rad: float = DEFAULT_MAX_STEP_RAD, settle: bool = False) -> None:
        super().__init__(chunk_size, dense_hz, max_step_rad, settle)
        self.remembered: TrainingTask | None = None
        self.matched_instruction: str | None = None

    def nearest(self, text: str) -> tuple[TrainingTask, str]:
        """The training task (and its variant) whose instruction reads most like ``text``; ties: registry order."""
        best: tuple[float, TrainingTask, str] | None = None
        for task in self.training:
            for variant in task.instructions:
                score = text_similarity(text, variant)
                if best is None or score > best[0]:
                    best = (score, task, variant)
        assert best is not None
        return best[1], best[2]

    def set_instruction(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise PolicyError(f"instruction: the memorizer needs words, got {text!r}")
        self.remembered, self.matched_instruction = self.nearest(text)
        self.planner = None

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> np.ndarray:
        if self.remembered is None:
            raise PolicyError("memorizer: predict before set_instruction; no instruction to recall")
        if self.planner is None:
            self.planner = self.make_planner(self.remembered, closed_loop=False)
            self._poses = nominal_poses(self.training_layout(self.remembered))
        return self.plan_rows(current_vector(obs), self._poses, rtc)


class BlindPolicy(_PlannedBaseline):
    """Scene group → its most frequent training behaviour, whatever the instruction says."""

    #: It finds its scene group from the object names and acts on the true poses (``interface.declares_privileged``).
    needs_privileged = True

    def __init__(self, chunk_size: int = 50, dense_hz: int | None = None,
                 max_step_rad: float = DEFAULT_MAX_STEP_RAD, settle: bool = False) -> None:
        super().__init__(chunk_size, dense_hz, max_step_rad, settle)
        groups: dict[str, list[TrainingTask]] = {}
        for task in self.training:
            groups.setdefault(f"{task.scene}/{task.layout}", []).append(task)
        self.groups = groups
        self.habit = {group: most_frequent_behaviour(tasks) for group, tasks in groups.items()}
        self.group_names = {group: frozenset(self.training_layout(tasks[0]).names) for group, tasks in groups.items()}
        self.group: str | None = None

    def set_instruction(self, text: str) -> None:
        """Blind by design: the words change nothing."""

    def group_of(self, poses: PoseSnapshot) -> str:
        """The training scene group whose object names overlap the observed ones most (Jaccard; ties: order)."""
        seen = frozenset(poses.names())
        if not seen:
            raise PolicyError("observation: privileged.objects is empty; blind needs object names to find its scene")
        return max(self.group_names, key=lambda g: len(seen & self.group_names[g]) / len(seen | self.group_names[g]))

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> np.ndarray:
        poses = poses_from_observation(obs)
        if self.planner is None:
            self.group = self.group_of(poses)
            self.planner = self.make_planner(self.habit[self.group], closed_loop=True)
        return self.plan_rows(current_vector(obs), poses, rtc)


def most_frequent_behaviour(tasks: list[TrainingTask]) -> TrainingTask:
    """Most frequent action, then among those the most frequent (source, arm), then target; first in order on ties."""
    def pick(pool: list[TrainingTask], key: object) -> list[TrainingTask]:
        counts = Counter(key(t) for t in pool)  # type: ignore[operator]
        top = max(counts.values())
        first = next(key(t) for t in pool if counts[key(t)] == top)  # type: ignore[operator]
        return [t for t in pool if key(t) == first]  # type: ignore[operator]

    pool = pick(tasks, lambda t: t.action)
    pool = pick(pool, lambda t: (t.source, t.arm))
    pool = pick(pool, lambda t: t.target)
    return pool[0]

