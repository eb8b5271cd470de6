"""Instruction controls on the graph (``bringup --controls``), blinded: what the trial manager runs, tells and records.

The plan's trials and each one's controls (``evaluation.controls.with_controls``: the same task, layout and
seed, another instruction) run in one seeded random order (``order_seed``), so neither their place nor their
neighbours tell a true trial from a control. Blinded (the default; ``--unblind`` turns it off for debugging,
and run.json records which), the operator sees each trial only by a label (``blind-007``) on the terminal,
on ``/robofollow/trial`` (the trial id every node and the live view know it by) and in the live view, which
``monitoring.blind`` strips of the instruction and anything naming the scored task. The policy still gets the
instruction (``/robofollow/trial``'s ``instruction`` and the latched ``/robofollow/instruction``, which the
bag records). The trial manager tells which instruction each label got once the run has ended: by then every
verdict is recorded and no mark is taken any more. ROS-free.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from robofollow_ros.benchmark import Registry
from robofollow_ros.evaluation.controls import ControlPlan, controls_record, plan_control, with_controls
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.nodes.trial_plan import TrialPlan

BLIND_PREFIX = "blind-"


@dataclass(frozen=True)
class Given:
    """What one trial is given on the graph: the instruction, and the scoring fields of ``/robofollow/trial``
    (a swap: ``scored_task``, and ``also_scored`` for its true task's verdict)."""

    instruction: str
    scoring: dict[str, str]
    control: ControlPlan | None = None


@dataclass(frozen=True)
class ControlledPlan:
    plan: TrialPlan
    controls: tuple[str, ...] = ()
    blind: bool = False
    order_seed: int = 0
    registry: Registry | None = None
    skipped: tuple[dict[str, str], ...] = ()
    #: Blinded: the label of every trial (its place in the run order).
    labels: dict[TrialKey, str] = field(default_factory=dict)

    @classmethod
    def build(cls, registry: Registry, plan: TrialPlan, controls: Sequence[str], *, blind: bool = True,
              order_seed: int = 0) -> ControlledPlan:
        """``plan`` with its controls in a seeded random order; without controls, ``plan`` as it is."""
        if not controls:
            return cls(plan, registry=registry)
        keys, skipped = with_controls(registry, list(plan.keys), controls)
        random.Random(f"bringup-controls-order:{order_seed}").shuffle(keys)
        labels = {k: f"{BLIND_PREFIX}{i + 1:03d}" for i, k in enumerate(keys)} if blind else {}
        return cls(TrialPlan(tuple(keys), plan.selected_tasks), tuple(controls), blind, order_seed, registry,
                   tuple(skipped), labels)

    # -- run.json ---------------------------------------------------------------------------------
    def arguments(self) -> dict[str, Any]:
        """run.json's ``arguments`` for controls (the run's identity: a resume refuses another set)."""
        if not self.controls:
            return {}
        return {"controls": list(self.controls), "unblind": not self.blind, "order_seed": self.order_seed}

    def run_record(self) -> dict[str, Any]:
        """run.json's ``controls``: eval's record, and the order and labels of the graph's run."""
        if not self.controls:
            return {}
        record = controls_record(self.controls, self.skipped)
        record.update(blind=self.blind, order_seed=self.order_seed, order=[k.trial_id for k in self.plan.keys])
        if self.blind:
            record["labels"] = {label: k.trial_id for k, label in self.labels.items()}
        return {"controls": record}

    # -- one trial --------------------------------------------------------------------------------
    def graph_id(self, key: TrialKey, attempt: int) -> str:
        """The trial's id on the graph (``/robofollow/trial``, the recordings' names): its label when blinded."""
        base = self.labels.get(key, key.trial_id)
        return base + (f"_attempt{attempt}" if attempt > 1 else "")

    def given(self, key: TrialKey) -> Given:
        assert self.registry is not None or not key.control
        if not key.control or self.registry is None:
            task = self.registry.eval_task(key.task_id) if self.registry is not None else None
            return Given(task.instruction if task is not None else "", {})
        task = self.registry.eval_task(key.task_id)
        plan = plan_control(self.registry, task, key.control, key.seed)
        if plan is None:  # with_controls planned only controls that have a candidate
            raise ValueError(f"control {key.control!r} has no candidate for task {key.task_id!r}")
        scoring = {"scored_task": plan.scored_task, "also_scored": task.task_id} if plan.scored_task else {}
        return Given(plan.instruction, scoring, plan)

    def told(self, key: TrialKey, given: Given) -> str:
        """The terminal's word on a starting trial: blinded, nothing of its instruction."""
        if self.blind:
            return "instruction blinded (told when the run ends)"
        return f"{given.instruction!r}" + (f" (control {key.control} of {key.partner_id})" if key.control else "")

    def result_fields(self, key: TrialKey) -> dict[str, Any]:
        """A trial's results entry fields beyond its score: a control's as eval records them
        (``trial_worker.control_trial``), and its blind label."""
        out: dict[str, Any] = {}
        if key in self.labels:
            out["blind_label"] = self.labels[key]
        if not key.control:
            return out
        given = self.given(key)
        assert given.control is not None
        out.update(task=key.task_id, instruction=given.instruction, control=key.control, partner=key.partner_id,
                   control_source_task=given.control.source_task)
        if given.control.scored_task:
            out["scored_task"] = given.control.scored_task
        return out

    def unblinding(self, recorded: Iterable[TrialKey]) -> list[str]:
        """The lines that tell, once the run has ended, which instruction each label got."""
        if not self.blind:
            return []
        lines = ["unblinded (every verdict and mark is recorded):"]
        for key in recorded:
            given = self.given(key)
            what = f"control {key.control} of {key.partner_id}" if key.control else "true instruction"
            lines.append(f"  {self.labels.get(key, key.trial_id)} = {key.trial_id}: {what}, {given.instruction!r}")
        return lines


__all__ = ["BLIND_PREFIX", "ControlledPlan", "Given"]
