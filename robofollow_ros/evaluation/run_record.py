"""What ``run.json`` says of a run: the record a new run starts with, what one resume appends, and what a resume
must share with the run it continues (:func:`run_identity`). ``RunWriter`` (``evaluation.results``) writes it.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation import provenance
from robofollow_ros.evaluation.execution_mode import LOCKSTEP_RECORD
from robofollow_ros.evaluation.provenance import (
    CODE_FIELDS,
    OFFICIAL_STEPPER,
    REFERENCE,
    RUN_SCHEMA_VERSION,
    RunSettings,
)
from robofollow_ros.rundir import Identity
from robofollow_ros.rundir.identity import ABSENT, lookup
from robofollow_ros.rundir.layout import (
    RUN_FILE,
)

#: What makes a run the run it is: ``--resume`` refuses another value of any of these (dotted: a path
#: into run.json). The code that ran is not among them (see the module docstring).
IDENTITY_FIELDS = ("schema_version", "selected_tasks", "expected_trials", "stepper", "policy.spec", "policy.kwargs",
                   "max_steps", "actions_per_step", "render", "seeds", "privileged", "execution",
                   # recordings at two rates, or for only some trials, would not describe one run either
                   "arguments.record", "arguments.record_hz",
                   # another rig is another robot: its trials are not this run's. Its files are not compared
                   # (a recalibrated camera, a retuned gain): config_sha256 records them and a resume warns.
                   "rig.name",
                   # instruction controls (evaluation.controls) are trials of the run: another set is another plan
                   "arguments.controls")
#: run.json's ``execution`` of a lock-step run, also what a run.json written before the field existed is read as.
LOCKSTEP_EXECUTION = LOCKSTEP_RECORD


def utc_now() -> str:
    """The time as the official evaluator writes it (evaluate.py:115: ``datetime.now(timezone.utc).isoformat()``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


def run_identity(run: Mapping[str, Any]) -> Identity:
    """What ``--resume`` must share with the run it continues, read from a run.json object (new or recorded).

    Results of two selections, policies or budgets in one run would describe a run that never happened."""
    fields = {name: value for name in IDENTITY_FIELDS if (value := lookup(run, name)) is not ABSENT
              # privileged before the policy is built is not known (its declaration): left to the later check
              and not (name == "privileged" and value is None)}
    return _RunIdentity(fields, record=RUN_FILE, partial=True)


class _RunIdentity(Identity):
    """eval's identity: a run.json written before ``execution`` existed ran lock-step, one written before
    ``rig`` existed ran on the built-in rig (there was no other), and one written before ``controls`` existed ran
    none; each reads as such."""

    def recorded(self, run_dir: Path) -> dict[str, Any] | None:
        data = super().recorded(run_dir)
        if data is not None and "execution" not in data:
            data = {**data, "execution": dict(LOCKSTEP_EXECUTION)}
        if data is not None and "rig" not in data:
            from robofollow_ros.robot.rig_description import BUILT_IN_RIG

            data = {**data, "rig": {"name": BUILT_IN_RIG}}
        if data is not None and "privileged_source" not in data and not data.get("privileged"):
            data = {**data, "privileged": _builtin_privileged(data)}
        args = data.get("arguments") if data is not None else None
        if data is not None and isinstance(args, dict) and "controls" not in args:
            data = {**data, "arguments": {**args, "controls": []}}  # written before controls existed: none
        return data


def _builtin_privileged(run: Mapping[str, Any]) -> bool:
    """A run.json written before ``privileged`` said what the policy received: ``privileged`` was the flag alone,
    so an in-process built-in that declares it (``spec.PRIVILEGED_BUILTINS``) read false; it was privileged."""
    from robofollow_ros.policy.spec import PRIVILEGED_BUILTINS

    policy = run.get("policy")
    return bool(run.get("privileged")) or (isinstance(policy, Mapping) and policy.get("spec") in PRIVILEGED_BUILTINS)


def new_run_record(*, arguments: Mapping[str, Any], selected_tasks: Sequence[tuple[str, str]],
                   expected_trials: int, stepper: str, settings: RunSettings | None = None,
                   metadata_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``run.json`` object a new run starts with: the official manifest's fields (evaluate.py:115-122
    with runinfo.metadata()), then ours. Without ``settings`` (the ROS trial manager) the step budget and
    the policy come from ``arguments`` where it has them, and what is not known is null."""
    env = provenance.environment()
    args = dict(arguments)
    evaluator = settings is not None
    if settings is None:
        spec = args.get("policy")
        # The graph's pacing, as the trial manager recorded it from policy_node and sim_node (bringup's
        # ``_record_execution``): ``{"mode": "lockstep"}`` or ``{"mode": "rate", "execution": ...}``.
        pacing = args.get("execution")
        kwargs = args.get("kwargs")  # the graph's: policy_node's kwargs as given (the official key is a JSON string)
        # privileged: policy_node's flag, or the policy's own declaration (a built-in's class, read unbuilt)
        from robofollow_ros.policy.spec import spec_declares_privileged

        flag = bool(args.get("privileged", False))
        declared = not flag and bool(spec) and spec_declares_privileged(str(spec))
        settings = RunSettings(policy=str(spec) if spec else "", max_steps=args.get("max_steps"),
                               policy_kwargs=dict(kwargs) if isinstance(kwargs, Mapping) else {},
                               actions_per_step=args.get("actions_per_step"), render=args.get("render"),
                               privileged=flag or declared,
                               privileged_source="--privileged" if flag else ("policy" if declared else None),
                               execution=pacing if isinstance(pacing, Mapping) and pacing.get("mode") else None)
    run: dict[str, Any] = {
        # -- the official manifest (evaluate.py:115-122), names and values --
        "status": "running",
        "started_utc": utc_now(),
        "metric_version": "strict",
        "gate_mode": "strict",
        "runtime": "fixed",
        "completion_metric_version": "legacy-final-layout-v1",
        "completion_aggregation": "task-macro",
        "stepper": OFFICIAL_STEPPER.get(stepper, stepper),
        "arguments": provenance.run_arguments(args, stepper),
        "selected_tasks": [{"scene": s, "task": t} for s, t in selected_tasks],
        "expected_trials": int(expected_trials),
        **{key: env[key] for key in ("upstream_commit", "code_sha256", "versions", "curobo_source_sha256",
                                     "config_sha256", "asset_overrides")},
        # -- ours --
        "schema_version": RUN_SCHEMA_VERSION,
        "run_id": str(uuid.uuid4()),
        "policy": provenance.policy_record(settings, evaluator) if settings.policy else None,
        # whether the policy was handed privileged state, and by what (``privileged_source``: the flag, or the
        # policy's own declaration: an in-process oracle needs no flag and is privileged all the same)
        "privileged": None if settings.privileged is None else bool(settings.privileged),
        "privileged_source": settings.privileged_source if settings.privileged else None,
        "execution": jsonable_execution(settings.execution),
        **step_budget_record(settings),
        "max_steps": settings.max_steps,
        "actions_per_step": settings.actions_per_step,
        "render": None if settings.render is None else provenance.render_settings(settings.render),
        "seeds": provenance.seed_settings(settings.base_seed),
        # the active rig (``--rig`` / ``ROBOFOLLOW_RIG``): name, YAML, every file with its SHA-256
        "rig": provenance.rig_record(),
        "reference": dict(REFERENCE),
        **{key: env[key] for key in ("package", "git", "python", "platform")},
        "resumes": [],
        "official_rerun": official_rerun(args.get("tasks"), selected_tasks),
        **dict(metadata_extra or {}),
    }
    return run


def step_budget_record(settings: RunSettings) -> dict[str, Any]:
    """``{"step_budget": ...}`` for an eval run: the budget's ``unit`` (``calls``: the official ``max_steps``;
    ``rows``: executed rows, ``--budget rows``; ``ticks``: realtime), its ``limit`` and whether it is the
    official one; the run's totals go in ``budget_used`` (``calls``, ``rows``) when it finishes (``RunWriter``).
    Nothing for a writer that was not told the budget (the ROS trial manager)."""
    execution = jsonable_execution(settings.execution)
    if settings.max_steps is None or settings.actions_per_step is None or execution.get("mode") not in (
            "lockstep", "realtime"):
        return {}
    mode = execution["mode"]
    unit = "ticks" if mode == "realtime" else str(execution.get("budget", "calls"))
    limit = settings.max_steps if unit == "calls" else settings.max_steps * settings.actions_per_step
    return {"step_budget": {"unit": unit, "limit": limit, "official": unit == "calls"}}


def official_rerun(tasks: Any, selected_tasks: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """run.json's ``official_rerun``: whether the official ``evaluate.py`` can rerun this selection from
    ``arguments``. A ``--tasks`` list spanning scenes cannot be: evaluate.py reads the list against one scene's
    tasks and refuses it, while this package runs it (a superset: smoke runs and tests are made so)."""
    scenes = sorted({scene for scene, _ in selected_tasks})
    if tasks and len(scenes) > 1:
        return {"reproducible": False,
                "why": f"--tasks spans {len(scenes)} scenes ({', '.join(scenes)}); the official evaluate.py refuses "
                       "such a list: rerun it one scene at a time (selected_tasks lists each task's scene)"}
    return {"reproducible": True, "why": None}


def jsonable_execution(execution: Mapping[str, Any] | None) -> dict[str, Any]:
    """run.json's ``execution``: lock-step when not told."""
    return dict(LOCKSTEP_EXECUTION) if execution is None else provenance.jsonable(dict(execution))


def resume_record(run: Mapping[str, Any], arguments: Mapping[str, Any], trials_before: int,
                  settings: RunSettings | None) -> dict[str, Any]:
    """What one resume appends to ``run.json``'s ``resumes``: when, with which arguments, on which code
    (the official metadata fields and ours), and which of those differ from the run's start (``changed``)."""
    env = provenance.environment()
    entry: dict[str, Any] = {"resumed_utc": utc_now(), "arguments": provenance.run_arguments(arguments),
                             "trials_before": trials_before,
                             **{key: env[key] for key in (*CODE_FIELDS, "curobo_source_sha256", "platform")}}
    if settings is not None:
        entry["server_metadata"] = provenance.server_metadata(settings.server_metadata)
    entry["changed"] = {key: {"run": run.get(key), "now": env[key]} for key in CODE_FIELDS
                        if key in run and run.get(key) != env[key]}
    return entry
