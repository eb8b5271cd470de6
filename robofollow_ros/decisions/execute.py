"""Execute a decision: instruction -> decision -> primitive actions -> SAPIEN -> check the final state.

An object-centric decision becomes one ``lift`` per selected object (pick it up, verify it left the
table, set it back down); an action-sequence decision is already a list of primitives. Running the
primitives needs the oracle's motion planner (``robofollow_ros.policy.expert``); where that planner
cannot run a primitive, execution raises ``ExecutionUnavailable`` instead of pretending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.decisions.anchors import Anchor, CandidateAction
from robofollow_ros.decisions.deciders import ReferenceDecider
from robofollow_ros.decisions.errors import OwdaError

#: An object whose centre rose this much above its start counts as lifted (the oracle's own threshold).
LIFTED_M = 0.04


class ExecutionUnavailable(OwdaError):
    """The primitive cannot be executed with the planners present in this checkout."""


@dataclass(frozen=True)
class Primitive:
    verb: str
    obj: str
    target: str | None = None

    @property
    def label(self) -> str:
        return f"{self.verb}:{self.obj}" + (f"->{self.target}" if self.target else "")


def decide(anchor: Anchor, instruction: str) -> tuple[str, ...]:
    answer = ReferenceDecider().decide(anchor, instruction)
    if answer.decision is None:
        raise OwdaError(f"instruction: {answer.raw.removeprefix('error: ')}")
    return answer.decision


def primitives_for(anchor: Anchor, decision: tuple[str, ...]) -> list[Primitive]:
    if anchor.kind == "object_centric":  # an object on top of another is picked before the one under it
        def height(name: str) -> int:
            below = anchor.object(name).on_top_of
            return 0 if below is None else 1 + height(below)

        ordered = sorted(decision, key=lambda n: -height(n))
        return [Primitive("lift", name) for name in ordered]
    actions: list[CandidateAction] = [anchor.action(a) for a in decision]
    return [Primitive(a.verb, a.obj, a.target) for a in actions]


def execute_in_sim(anchor: Anchor, instruction: str) -> dict[str, Any]:
    """Decide, then run the decision in SAPIEN and check the final state satisfies it."""
    report = execute_decision(anchor, decide(anchor, instruction))
    return {"anchor": anchor.anchor_id, "instruction": instruction, **report}


def execute_decision(anchor: Anchor, decision: tuple[str, ...],
                     expected: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Run ``decision``'s primitives and judge the outcome against ``expected`` (default: the decision).

    Satisfied means every primitive ran and met its postcondition, in order, and the final state
    matches the expected decision: exactly its objects were lifted (object-centric), or no object
    outside its actions was lifted (action-sequence).
    """
    from robofollow_ros.decisions.sim_primitives import PrimitiveRunner

    expected = decision if expected is None else expected
    steps = primitives_for(anchor, decision)
    layout, seed = layout_of(anchor)
    runner = PrimitiveRunner(layout, seed)
    try:
        results = []
        for step in steps:
            results.append(runner.run(step))
            if not results[-1].ok:  # later steps assume this one happened: stop here
                break
        rises = runner.max_rise()
    finally:
        runner.close()
    lifted = sorted(name for name, rise in rises.items() if rise >= LIFTED_M)
    if anchor.kind == "object_centric":
        # an object resting on a lifted one rises with it: carried, not picked
        carried = {o.name for o in anchor.objects if o.on_top_of in expected and o.name not in expected}
        decision_ok = set(lifted) - carried == set(expected)
        detail = f"lifted {lifted}, decision {sorted(expected)}"
    else:
        allowed = {n for step in primitives_for(anchor, expected) for n in (step.obj, step.target) if n}
        stray = [n for n in lifted if n not in allowed]
        decision_ok = not stray and decision == expected
        detail = f"objects lifted outside the decision: {stray}" if stray else (
            "no object outside the decision moved up" + ("" if decision == expected else "; other actions ran"))
    return {
        "decision": list(decision),
        "steps": [{"action": r.label, "ok": r.ok, "detail": r.detail} for r in results],
        "steps_not_run": [s.label for s in steps[len(results):]],
        "lifted": lifted,
        "final_check": detail,
        "satisfied": len(results) == len(steps) and all(r.ok for r in results) and decision_ok,
    }


def layout_of(anchor: Anchor) -> tuple[Layout, int]:
    """The registry layout and seed an anchor was authored or captured from (its provenance)."""
    from robofollow_ros.benchmark import default_registry

    prov = anchor.provenance
    in_sim = prov.get("source") in ("sim_layout", "sim_ground_truth") or prov.get("image_source") == "sim"
    if not in_sim or "layout" not in prov or "seed" not in prov:
        raise ExecutionUnavailable(f"anchor {anchor.anchor_id}: provenance {prov} names no sim layout and seed "
                                   "(a rig capture executes on the rig, not in SAPIEN)")
    try:
        return default_registry().layout(anchor.scene, str(prov["layout"])), int(prov["seed"])
    except (KeyError, ValueError) as exc:
        raise ExecutionUnavailable(f"anchor {anchor.anchor_id}: unknown layout in provenance ({exc})") from None
