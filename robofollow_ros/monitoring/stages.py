"""The live score as messages Foxglove panels can read: numbers to plot and a few enumerated states.

``/robofollow/score`` is JSON in a ``std_msgs/String`` (the graph's contract), which Foxglove's Plot
and State Transitions panels cannot look into. So the monitor derives two standard messages:

- ``/robofollow/score/stages`` (``std_msgs/Float64MultiArray``): ``STAGE_VALUES`` — the totals and
  the current task's stages 1..3 (whatever their names), so one plot of 8 fixed series shows any task;
- ``/robofollow/status`` (``diagnostic_msgs/DiagnosticArray``): ``STATUS_NAMES`` in that order, each
  with a ``message`` from a small enumerated set (``TRIAL_PHASES``, ``STAGE_STATES``,
  ``COMPLETION_STATES``) and the details (stage name, reasons, instruction) as key/values; on the rig a
  last entry ``perception`` (``PERCEPTION_STATES``) carries perception's status: the objects it doubts (below
  ``contract.MIN_POSE_CONFIDENCE``, where the stage monitor holds its verdict) and why, the depth age, the
  camera and processing rates and the frames dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from robofollow_ros.contract import MIN_POSE_CONFIDENCE, TRIAL_ID_KEY
from robofollow_ros.monitoring import rosmsg

#: A task has at most three stages (stage1_*, stage2_*, stage3_*; tested over every task).
STAGE_SLOTS: Final = 3
#: Labels of ``/robofollow/score/stages.data[i]``.
STAGE_VALUES: Final = ("IS total", "ES total", *(f"stage {k} {kind}" for k in range(1, STAGE_SLOTS + 1)
                                                  for kind in ("IS", "ES")))
#: ``/robofollow/status.status[i].name``.
STATUS_NAMES: Final = ("trial", *(f"stage {k}" for k in range(1, STAGE_SLOTS + 1)), "completion")
#: ``/robofollow/status`` entry of perception's status (after ``STATUS_NAMES``; only when perception runs).
PERCEPTION_NAME: Final = "perception"
PERCEPTION_STATES: Final = ("ok", "doubtful", "dropping frames")
#: The trial manager's phases (nodes/trial_protocol.py), plus ``unknown`` for anything else.
TRIAL_PHASES: Final = ("idle", "resetting", "awaiting_confirm", "verifying_reset", "checking", "starting", "running",
                       "stopping", "scoring", "done",
                       "finished", "unknown")
#: pending: nothing scored yet; intent: the intent is met, execution not yet; done: executed; missed:
#: the trial ended without executing it.
STAGE_STATES: Final = ("pending", "intent", "done", "missed")
COMPLETION_STATES: Final = ("pending", "complete", "incomplete")
_STAGE_LEVEL = {"pending": "STALE", "intent": "WARN", "done": "OK", "missed": "ERROR"}
_COMPLETION_LEVEL = {"pending": "STALE", "complete": "OK", "incomplete": "ERROR"}


def _stages(live: Mapping[str, Any] | None) -> list[tuple[str, Mapping[str, Any]]]:
    stages = (live or {}).get("stages") or {}
    return list(stages.items())[:STAGE_SLOTS] if isinstance(stages, Mapping) else []


def stage_values(live: Mapping[str, Any]) -> list[float]:
    """``[IS, ES, stage 1 IS, stage 1 ES, ...]``; a task with fewer stages has zeros in the rest."""
    values = [float(live.get("intent", 0.0)), float(live.get("exec", 0.0))]
    for _name, stage in _stages(live):
        values += [float(stage.get("intent", 0.0)), float(stage.get("exec", 0.0))]
    return values + [0.0] * (len(STAGE_VALUES) - len(values))


def stage_state(stage: Mapping[str, Any], final: bool) -> str:
    if float(stage.get("exec", 0.0)) > 0 and float(stage.get("exec", 0.0)) >= float(stage.get("exec_max", 0.0)):
        return "done"
    if final:
        return "missed"
    if float(stage.get("intent", 0.0)) > 0 and float(stage.get("intent", 0.0)) >= float(stage.get("intent_max", 0.0)):
        return "intent"
    return "pending"


def _perception_state(report: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Perception's state (:data:`PERCEPTION_STATES`) and the objects it doubts (low confidence, or a reason)."""
    objects = report.get("objects") or {}
    doubtful = sorted(n for n, o in objects.items() if float(o.get("confidence", 1.0)) < MIN_POSE_CONFIDENCE)
    doubts = report.get("doubts") or {}
    frames = report.get("frames") or {}
    state = "doubtful" if doubtful or doubts else ("dropping frames" if frames.get("dropped") else "ok")
    return state, doubtful


def perception_summary(report: Mapping[str, Any]) -> str:
    """One line for the top of the status (the trial entry's ``perception`` value), where the operator sees it
    without scrolling to perception's own entry: ``doubtful: a, b``, ``dropping frames: 41 dropped`` or ``ok``."""
    state, doubtful = _perception_state(report)
    if state == "doubtful":
        return "doubtful: " + ", ".join(sorted({*doubtful, *(report.get("doubts") or {})}))
    if state == "dropping frames":
        return f"dropping frames: {(report.get('frames') or {}).get('dropped')} dropped"
    return state


def doubt_change(previous: str, report: Mapping[str, Any]) -> tuple[str, str | None]:
    """What perception's doubt now is (a key to pass back next time) and, when it changed since ``previous``,
    the line to log for the operator's log panel (``None`` otherwise). Frame drops are not a change here:
    perception logs those on their own."""
    summary = perception_summary(report)
    key = summary if summary.startswith("doubtful") else "sure"
    if key == previous:
        return key, None
    if key == "sure":
        return key, "perception: sure of every object again" if previous else None
    doubts = report.get("doubts") or {}
    reasons = "; ".join(f"{name}: {why}" for name, why in sorted(doubts.items()))
    return key, f"perception {summary}" + (f" ({reasons})" if reasons else "")


def perception_status(report: Mapping[str, Any]) -> Any:
    """The ``perception`` entry from ``/robofollow/perception/status`` JSON (``nodes.perception_node``)."""
    state, doubtful = _perception_state(report)
    frames = report.get("frames") or {}
    doubts = report.get("doubts") or {}
    values = {"doubtful": ", ".join(doubtful), "doubts": "; ".join(f"{n}: {why}" for n, why in sorted(doubts.items())),
              "depth_age_s": str(report.get("depth_age_s")), "camera_hz": str(frames.get("camera_hz")),
              "processed_hz": str(frames.get("processed_hz")), "frames_dropped": str(frames.get("dropped", 0)),
              "missing": ", ".join(report.get("missing") or [])}
    level = "WARN" if state != "ok" else "OK"
    return rosmsg.diagnostic_status(level, PERCEPTION_NAME, state, str(report.get("layout", "")), values)


def status(time_ns: int, trial: Mapping[str, Any] | None, live: Mapping[str, Any] | None,
           perception: Mapping[str, Any] | None = None) -> Any:
    """The DiagnosticArray of ``/robofollow/status`` for the latest trial state and live score (and perception's
    status, when one came)."""
    trial = trial or {}
    phase = str(trial.get("phase", "idle"))
    phase = phase if phase in TRIAL_PHASES else "unknown"
    details = {k: str(trial[k]) for k in (TRIAL_ID_KEY, "task", "level", "instruction", "seed") if trial.get(k)
               is not None}
    if perception is not None:
        details["perception"] = perception_summary(perception)
    out = [rosmsg.diagnostic_status("OK", STATUS_NAMES[0], phase, str(trial.get(TRIAL_ID_KEY) or ""), details)]
    final = bool((live or {}).get("final"))
    stages = _stages(live)
    for k in range(STAGE_SLOTS):
        if k < len(stages):
            name, stage = stages[k]
            state = stage_state(stage, final)
            values = {"stage": name, **{key: str(stage.get(key, "")) for key in (
                "intent", "exec", "intent_max", "intent_reason", "exec_reason")}}
        else:
            name, state, values = "", "pending", {}
        out.append(rosmsg.diagnostic_status(_STAGE_LEVEL[state], STATUS_NAMES[1 + k], state, name, values))
    completion = ("complete" if (live or {}).get("complete") else "incomplete") if final else "pending"
    totals = {k: str((live or {}).get(k, 0.0)) for k in ("intent", "exec")}
    out.append(rosmsg.diagnostic_status(_COMPLETION_LEVEL[completion], STATUS_NAMES[-1], completion,
                                        str((live or {}).get("task", "")), totals))
    if perception is not None:
        out.append(perception_status(perception))
    return rosmsg.diagnostic_array(time_ns, out)
