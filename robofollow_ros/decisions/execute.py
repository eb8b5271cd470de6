"""Execute a decision: instruction -> decision -> primitive actions -> SAPIEN, checked against the world model.

The symbolic world (``world``) that proved the decision executable walks along with the simulator:
before each primitive its preconditions must hold in the symbolic state, and after it the simulator
must show that state: every object on what the model says it rests on, inside what it says it is in,
within a few centimetres of where it says it is. An object-centric decision becomes one ``lift`` per
selected object, top objects first; a top object whose base is selected too is set aside on a free spot
of the table (it is taken away), every other one is put back. Running the primitives needs the oracle's
motion planner (``robofollow_ros.policy.expert``); where that planner cannot run a primitive, execution
raises ``ExecutionUnavailable`` instead of pretending.
"""

from __future__ import annotations

import math
from typing import Any

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.deciders import ReferenceDecider
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.language import parse
from robofollow_ros.decisions.primitive import Primitive, StepResult
from robofollow_ros.decisions.solver import TaskSpec, forbidden_containers
from robofollow_ros.decisions.world import WorldState, pick_order

#: An object whose centre rose this much above its start counts as lifted (the oracle's own threshold).
LIFTED_M = 0.04
#: How far the simulator may put an object from where the world model says it is (a lift puts an object
#: back within 5 cm by its postcondition), and the extra for a pushed object (or one resting on it).
XY_TOLERANCE_M = 0.04
PUSHED_EXTRA_M = 0.02


class ExecutionUnavailable(OwdaError):
    """The primitive cannot be executed with the planners present in this checkout."""


def decide(anchor: Anchor, instruction: str) -> tuple[tuple[str, ...], TaskSpec]:
    answer = ReferenceDecider().decide(anchor, instruction)
    if answer.decision is None:
        raise OwdaError(f"instruction: {answer.raw.removeprefix('error: ')}")
    return answer.decision, parse(anchor, instruction)


def primitives_for(anchor: Anchor, decision: tuple[str, ...]) -> list[Primitive]:
    if anchor.kind == "object_centric":
        chosen = set(decision)
        return [Primitive("lift", n, set_aside=anchor.object(n).on_top_of in chosen)
                for n in pick_order(anchor, decision)]
    return [Primitive(a.verb, a.obj, a.target) for a in (anchor.action(i) for i in decision)]


def execute_in_sim(anchor: Anchor, instruction: str) -> dict[str, Any]:
    """Decide, then run the decision in SAPIEN and check every step against the world model."""
    decision, spec = decide(anchor, instruction)
    return {"anchor": anchor.anchor_id, "instruction": instruction, **execute_decision(anchor, decision, spec=spec)}


def _symbolic(anchor: Anchor, state: WorldState, step: Primitive,
              forbidden: tuple[str, ...]) -> tuple[list[str], WorldState]:
    """The step's broken preconditions in ``state`` and the state after it."""
    if anchor.kind == "object_centric":
        return state.pick_problems(step.obj, forbidden), state.take(step.obj)
    action = next(a for a in anchor.actions if (a.verb, a.obj, a.target) == (step.verb, step.obj, step.target))
    problems = state.broken(action)
    return problems, state if problems else state.after(action)


def mismatches(state: WorldState, sim: dict[str, tuple[float, float, float]],
               start: dict[str, tuple[float, float, float]], pushed: set[str]) -> list[str]:
    """Where the simulator disagrees with the symbolic state (objects taken away are not looked at)."""
    out = []
    for name in state.present():
        p, (x, y, z) = state.places[name], sim[name]
        tol = XY_TOLERANCE_M + (PUSHED_EXTRA_M if {name, p.on} & pushed else 0.0)
        off = math.dist((x, y), p.xy)
        if off > tol:
            out.append(f"{name} is {off:.3f} m from where the world model has it")
        if p.on is not None and (math.dist((x, y), sim[p.on][:2]) > XY_TOLERANCE_M or z <= sim[p.on][2] + 0.01):
            out.append(f"{name} is not on {p.on}")
        elif p.inside is not None and math.dist((x, y), sim[p.inside][:2]) > 0.05:
            out.append(f"{name} is not inside {p.inside}")
        elif p.on is None and p.inside is None and state.anchor.object(name).on_top_of is None \
                and state.anchor.object(name).in_container is None and abs(z - start[name][2]) > 0.02:
            out.append(f"{name} is not resting on the table (z {z - start[name][2]:+.3f} m)")
    return out


def execute_decision(anchor: Anchor, decision: tuple[str, ...], expected: tuple[str, ...] | None = None,
                     spec: TaskSpec | None = None) -> dict[str, Any]:
    """Run ``decision``'s primitives and judge the outcome against ``expected`` (default: the decision).

    Satisfied means every primitive's preconditions held in the symbolic state, it ran and met its
    postcondition, the simulator then showed the symbolic state, in order, and the final state matches
    the expected decision: exactly its objects were lifted (object-centric), or no object outside its
    actions was lifted (action-sequence). A state that drifts from the world model (a sphere the arm
    brushed rolls off) fails ``satisfied`` but not ``postconditions_met``, so the two can be told
    apart; execution stops only at a failed postcondition. ``spec`` names the bowls an N forbids.
    """
    from robofollow_ros.decisions.sim_primitives import PrimitiveRunner

    expected = decision if expected is None else expected
    forbidden = forbidden_containers(anchor, spec) if spec is not None else ()
    steps = primitives_for(anchor, decision)
    layout, seed = layout_of(anchor)
    runner = PrimitiveRunner(layout, seed, {o.name: o.source_name for o in anchor.objects})
    state = WorldState.initial(anchor)
    pushed: set[str] = set()
    results: list[StepResult] = []
    states: list[str] = []  # per step run: "" when the simulator shows the world model's state
    try:
        start = runner.positions()
        initial = mismatches(state, start, start, pushed)  # the anchor must describe what SAPIEN built
        for step in steps if not initial else ():
            problems, next_state = _symbolic(anchor, state, step, forbidden)
            if problems:
                results.append(StepResult(step.label, False, "world: " + "; ".join(problems)))
                states.append("")
                break
            results.append(runner.run(step))
            state = next_state
            pushed |= {step.obj} if step.verb == "push" else set()
            states.append("; ".join(mismatches(state, runner.positions(), start, pushed)) if results[-1].ok else "")
            if not results[-1].ok:  # later steps assume this one happened: stop here
                break
        rises = runner.max_rise()
    finally:
        runner.close()
    lifted = sorted(name for name, rise in rises.items() if rise >= LIFTED_M)
    if anchor.kind == "object_centric":
        decision_ok = set(lifted) == set(expected)
        detail = f"lifted {lifted}, decision {sorted(expected)}"
    else:
        allowed = {n for step in primitives_for(anchor, expected) for n in (step.obj, step.target) if n}
        stray = [n for n in lifted if n not in allowed]
        decision_ok = not stray and decision == expected
        detail = f"objects lifted outside the decision: {stray}" if stray else (
            "no object outside the decision moved up" + ("" if decision == expected else "; other actions ran"))
    return {
        "decision": list(decision),
        "initial_state": "matches the anchor" if not initial else "; ".join(initial),
        "steps": [{"action": r.label, "ok": r.ok, "detail": r.detail, "state": st or "matches the world model"}
                  for r, st in zip(results, states, strict=True)],
        "steps_not_run": [s.label for s in steps[len(results):]],
        "lifted": lifted,
        "final_check": detail,
        # every step ran and met its postcondition, and the final state is the decision's (the criterion before
        # the world model walked along)
        "postconditions_met": not initial and len(results) == len(steps) and all(r.ok for r in results)
        and decision_ok,
        "state_mismatches": [f"after {r.label}: {st}" for r, st in zip(results, states, strict=True) if st],
        "satisfied": not initial and len(results) == len(steps) and all(r.ok for r in results) and decision_ok
        and not any(states),
    }


def layout_of(anchor: Anchor) -> tuple[Layout, int]:
    """The layout (rearranged as authored) and seed an anchor was authored or captured from (its provenance)."""
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.decisions.authoring import anchor_layout

    prov = anchor.provenance
    in_sim = prov.get("source") in ("sim_layout", "sim_ground_truth") or prov.get("image_source") == "sim"
    if not in_sim or "layout" not in prov or "seed" not in prov:
        raise ExecutionUnavailable(f"anchor {anchor.anchor_id}: provenance {prov} names no sim layout and seed "
                                   "(a rig capture executes on the rig, not in SAPIEN)")
    try:
        layout = default_registry().layout(anchor.scene, str(prov["layout"]))
        return anchor_layout(anchor, layout), int(prov["seed"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ExecutionUnavailable(f"anchor {anchor.anchor_id}: unknown layout in provenance ({exc})") from None
