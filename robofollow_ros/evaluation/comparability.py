"""Whether runs may be set side by side: what every cross-run view (``--rank``, ``--compare-runs``,
``--sim-real``) checks before it prints, from each run's run.json and trials.

Why: a number beside another invites a comparison, so a run that is not comparable must say so where the
number is, not in a file the reader never opens. A run whose policy saw privileged state (object poses,
the task id) is not an instruction-following result at all; a run on another rig, with another step
budget (calls, rows per call, stepper, the unit the budget counts) or a subset of the protocol measures
something else. Views *mark* these (a ``[privileged]`` / ``[subset]`` tag on the row, a ``warning:`` line
each); ``--sim-real``, which compares one policy on two embodiments, *refuses* two policies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.report import is_privileged, protocol_differences

#: run.json fields that set the step budget (``budget_unit``/``calls``/``rows`` where a run records them).
BUDGET_FIELDS = ("max_steps", "actions_per_step", "stepper", "budget_unit")


@dataclass(frozen=True)
class RunTraits:
    """What makes a run comparable with another: read from run.json (None where it has none)."""

    name: str
    policy: str | None
    privileged: bool
    rig: str | None
    budget: dict[str, Any]
    subset: str | None  # protocol_differences' "a subset ..." phrase, or None for the whole protocol

    @property
    def tags(self) -> list[str]:
        return [t for t, on in (("privileged", self.privileged), ("subset", self.subset is not None)) if on]


def read_run_json(run_dir: Path) -> dict[str, Any] | None:
    try:
        run = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) else None


def traits(name: str, run: Mapping[str, Any] | None, trials: Sequence[Mapping[str, Any]]) -> RunTraits:
    policy = (run or {}).get("policy")
    rig = (run or {}).get("rig")
    subset = next((d for d in protocol_differences(run, trials) if d.startswith("a subset")), None)
    return RunTraits(name=name, policy=policy.get("spec") if isinstance(policy, Mapping) else None,
                     privileged=is_privileged(run), rig=rig.get("name") if isinstance(rig, Mapping) else None,
                     budget={k: (run or {}).get(k) for k in BUDGET_FIELDS if (run or {}).get(k) is not None},
                     subset=subset)


def _differ(runs: Sequence[RunTraits], what: str, value: Any) -> str | None:
    seen = {r.name: value(r) for r in runs if value(r) is not None}
    if len({json.dumps(v, sort_keys=True) for v in seen.values()}) > 1:
        return f"{what} differ: " + ", ".join(f"{name} {v}" for name, v in seen.items())
    return None


def warnings(runs: Sequence[RunTraits], *, policies: bool = False, rigs: bool = True) -> list[str]:
    """One line per reason the runs are not comparable (privileged, subset, rigs, budgets; policies when
    asked); [] when they are."""
    out = [f"{r.name} is privileged: its policy was given object poses and the task id; not an "
           "instruction-following result, not comparable with published or plain runs" for r in runs if r.privileged]
    out += [f"{r.name} is {r.subset}" for r in runs if r.subset]
    checks = [("budgets", lambda r: r.budget or None)]
    if rigs:
        checks.append(("rigs", lambda r: r.rig))
    if policies:
        checks.append(("policies", lambda r: r.policy))
    out += [line for what, value in checks if (line := _differ(runs, what, value))]
    return out


def other_policies(runs: Sequence[RunTraits]) -> str | None:
    """The line ``--sim-real`` refuses with when the runs name different policy SPECs; None otherwise."""
    return _differ(runs, "policies", lambda r: r.policy)
