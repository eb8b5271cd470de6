"""Instruction controls: the same trial (task, layout, seed) run again with another instruction.

RoboFollow's question is whether a policy *uses* the instruction. A control changes only the instruction
string the policy receives (the observation contract is otherwise untouched: the privileged task id, for a
built-in that receives it, stays the true task's), on the true trial's seed, so each control trial pairs
with its true trial:

* ``blank``: the empty instruction; scored against the true task.
* ``shuffled``: the instruction of another task of the same scene (another behaviour), drawn by seed;
  scored against the true task.
* ``swap``: the instruction of another task of the same scene *and layout* (another behaviour), drawn by
  seed; scored against *that* task's rules, and against the true task's too (``original_verdict``).
* ``paraphrase``: another wording of the same task: a training instruction variant of the same training
  task in the same layout, else an evaluation task with the same layout and behaviour and other words;
  scored against the true task.

A control with no candidate for a task (a layout no other task uses, a task with one wording) is not run
for that task: the pair is skipped and run.json's ``controls.skipped`` names it (refusing the whole run
would make ``--controls swap`` unusable on the full protocol, where a few layouts hold one task).
Draws are ``random.Random`` seeded with a string (SHA-512: the same on every machine and process).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from robofollow_ros.benchmark import EvalTask, Registry
from robofollow_ros.evaluation.selection import TrialKey

#: The controls, in the order a task's control trials follow its true trial.
CONTROLS = ("blank", "shuffled", "swap", "paraphrase")
#: The fields that decide what a task asks the robot to do (and how it is scored).
_BEHAVIOUR = ("action", "source", "target", "arm", "via", "route_mode", "place_mode", "scored_pass_over_object",
              "scored_avoid_object", "target_yaw_rad", "place_slot", "second_source", "second_arm",
              "expected_branch")


@dataclass(frozen=True)
class ControlPlan:
    """What one control trial is given: the instruction, where it came from, and the task it is scored against."""

    control: str
    instruction: str
    #: The task the instruction belongs to (shuffled, swap, paraphrase from an evaluation task); None otherwise.
    source_task: str | None
    #: swap: the task whose rules score the trial; None: the true task's.
    scored_task: str | None = None


def parse_controls(value: str | None) -> tuple[str, ...]:
    """``--controls blank,swap``: known names, each once, in :data:`CONTROLS` order; empty for none."""
    if not value:
        return ()
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in CONTROLS]
    if bad or not names:
        raise ValueError(f"--controls: {bad[0] if bad else value!r} is not one of {', '.join(CONTROLS)}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--controls: {twice[0]} given twice")
    return tuple(c for c in CONTROLS if c in names)


def behaviour(task: EvalTask) -> tuple[object, ...]:
    return tuple(getattr(task, name) for name in _BEHAVIOUR)


def _draw(options: Sequence[str], control: str, task: EvalTask, seed: int) -> str:
    return random.Random(f"{control}:{task.task_id}:{seed}").choice(list(options))


def candidates(registry: Registry, task: EvalTask, control: str) -> list[tuple[str, str | None]]:
    """(instruction, source task) a control may give ``task``, in registry order; empty: none exists."""
    mine = behaviour(task)
    if control == "blank":
        return [("", None)]
    if control == "shuffled":
        return [(t.instruction, t.task_id) for t in registry.eval_tasks(task.scene)
                if behaviour(t) != mine and t.instruction.strip() != task.instruction.strip()]
    same_layout = [t for t in registry.eval_tasks(task.scene) if t.layout == task.layout and t.task_id != task.task_id]
    if control == "swap":
        return [(t.instruction, t.task_id) for t in same_layout
                if behaviour(t) != mine and t.instruction.strip() != task.instruction.strip()]
    if control == "paraphrase":
        own = task.instruction.strip().lower()
        found: dict[str, str | None] = {}
        for trained in registry.training_tasks(task.scene):
            if trained.task_id == task.base_task_type and trained.layout == task.layout:
                for words in trained.instructions:
                    found.setdefault(words, None)
        if not found:
            for t in same_layout:
                if behaviour(t) == mine:
                    found.setdefault(t.instruction, t.task_id)
        return [(words, src) for words, src in found.items() if words.strip().lower() != own]
    raise ValueError(f"--controls: {control!r} is not one of {', '.join(CONTROLS)}")


def plan_control(registry: Registry, task: EvalTask, control: str, seed: int) -> ControlPlan | None:
    """The control trial of (``task``, ``seed``); None when the control has no candidate for the task."""
    options = candidates(registry, task, control)
    if not options:
        return None
    by_words = dict(options)
    words = _draw(list(by_words), control, task, seed)
    source = by_words[words]
    return ControlPlan(control, words, source, scored_task=source if control == "swap" else None)


def skip_reason(control: str) -> str:
    return {"shuffled": "no other task of the scene", "swap": "no other task in this layout",
            "paraphrase": "no other wording of this task in this layout"}.get(control, "no candidate")



def with_controls(registry: Registry, keys: Sequence[TrialKey], controls: Sequence[str]
                  ) -> tuple[list[TrialKey], list[dict[str, str]]]:
    """Every trial of ``keys`` followed by its control trials (same task, round and seed), and the pairs skipped
    for want of a candidate (``{"trial", "control", "reason"}``: run.json's ``controls.skipped``)."""
    out: list[TrialKey] = []
    skipped: list[dict[str, str]] = []
    for key in keys:
        out.append(key)
        task = registry.eval_task(key.task_id)
        for control in controls:
            if plan_control(registry, task, control, key.seed) is None:
                skipped.append({"trial": key.trial_id, "control": control, "reason": skip_reason(control)})
            else:
                out.append(TrialKey(key.task_id, key.round, key.seed, control))
    return out, skipped


def controls_record(controls: Sequence[str], skipped: Sequence[dict[str, str]]) -> dict[str, object]:
    """run.json's ``controls``: what was asked for, and the pairs not run."""
    return {"asked": list(controls), "skipped": list(skipped),
            "note": "a control trial runs the true trial's task, layout and seed with another instruction; "
                    "summary.json counts true trials only (robofollow report --controls)"}


__all__ = ["CONTROLS", "ControlPlan", "behaviour", "candidates", "controls_record", "parse_controls", "plan_control",
           "skip_reason", "with_controls"]
