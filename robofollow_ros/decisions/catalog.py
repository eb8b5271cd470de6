"""Action catalogs for action-sequence anchors, with relations proved against the symbolic world.

A catalog moves every object at most once. Its ``requires`` relations come from the anchor's state
(``world``): an object with something on it moves only after that thing has been moved off it; a bowl
holding something takes a new object only after it has been emptied; a stack target's own lift or
push comes before anything is stacked on it; a push towards an object comes before that object leaves
the table. An action that no order can make executable (say, pushing a cube whose top object is only
lifted and put back) is left out.

Two kinds of relation: ``requires`` (cannot run without: clearing the subject, emptying the bowl) and
``after`` (must come later if both are done: stacking onto an object after that object's own lift or
push; a push towards an object before that object leaves the table; a push after every action it would
make impossible, because the pushed object ends where that action's gripper needs room). They are then
proved *complete*: every order that respects them, over every subset of actions closed under
``requires``, runs in the world without a broken precondition (a depth-first walk over all such
orders). A catalog that fails is not used. So a decision the solver builds from the relations alone
is always executable, and a model given the relations has everything it needs.
"""

from __future__ import annotations

import math
import random

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.world import PUSH_MIN_GAP_M, WorldState

MOVES_OFF = ("place", "stack")  # the verbs that take an object off what it rests on / out of its bowl


def action_id(verb: str, obj: str, target: str | None) -> str:
    return f"{verb}:{obj}" + (f"->{target}" if target else "")


def draw_actions(objects: tuple[AnchorObject, ...], rng: random.Random, n_max: int = 6) -> list[CandidateAction]:
    """A random catalog: one primitive for each of up to ``n_max`` movable objects, targets as the table allows."""
    movable = [o for o in objects if o.role == "object"]
    holders = [o for o in objects if o.role in ("bowl", "label")]
    used: set[str] = set()
    out: list[CandidateAction] = []
    for o in rng.sample(movable, k=min(n_max, len(movable))):
        options: list[tuple[str, str | None]] = [("lift", None)]
        if o.on_top_of is None and o.in_container is None and o.shape != "sphere":
            options += [("push", t.name) for t in movable if t.name != o.name and _on_table(t)
                        and math.dist(t.xy, o.xy) >= PUSH_MIN_GAP_M]
        options += [("place", h.name) for h in holders if h.name not in used and h.name != o.in_container]
        if o.shape != "sphere":
            options += [("stack", t.name) for t in movable if t.name not in used and t.name != o.name
                        and _on_table(t) and t.shape != "sphere" and t.name != o.on_top_of]
        verbs = sorted({v for v, _ in options})
        verb = rng.choice(verbs)
        target = rng.choice([t for v, t in options if v == verb])
        if verb in MOVES_OFF and target is not None:
            used.add(target)
        out.append(CandidateAction(action_id(verb, o.name, target), verb, o.name, target))
    return out


def _on_table(o: AnchorObject) -> bool:
    return o.on_top_of is None and o.in_container is None


def with_relations(actions: list[CandidateAction], objects: tuple[AnchorObject, ...]) -> tuple[CandidateAction, ...]:
    """The actions that some order can execute, each with what it requires and what must precede it.

    Recomputed from scratch after every drop: a dropped action may have been what made another feasible.
    """
    kept = list(actions)
    blocked = _blocked_by_pushes(actions, objects)
    while True:
        relations = {a.action_id: _relations(a, kept, objects) for a in kept}
        infeasible = [k for k, r in relations.items() if r is None]
        if infeasible:
            kept = [a for a in kept if a.action_id not in infeasible]
            continue
        ids = {a.action_id for a in kept}
        out = []
        for a in kept:
            requires, after = relations[a.action_id]  # type: ignore[misc]
            after += tuple(b for b in blocked.get(a.action_id, ()) if b in ids and b not in requires + after)
            out.append(CandidateAction(a.action_id, a.verb, a.obj, a.target, requires, after))
        stuck = _in_cycle(out)
        if stuck is None:
            return tuple(out)
        kept = [a for a in kept if a.action_id != stuck]


def _relations(b: CandidateAction, actions: list[CandidateAction],
               objects: tuple[AnchorObject, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(requires, after) of ``b``, or None when no order can make it executable."""
    by_subject = {a.obj: a for a in actions}
    by_name = {o.name: o for o in objects}
    requires: list[str] = []
    after: list[str] = []

    def moved_off(name: str) -> bool:
        mover = by_subject.get(name)
        if mover is None or mover.verb not in MOVES_OFF:
            return False
        requires.append(mover.action_id)
        return True

    if not all(moved_off(o.name) for o in objects if o.on_top_of == b.obj):  # clear the subject
        return None
    target = by_name.get(b.target) if b.target else None
    if target is not None and target.shape == "bowl":
        if not all(moved_off(o.name) for o in objects if o.in_container == target.name):  # empty the bowl
            return None
    elif target is not None and b.verb in MOVES_OFF:  # stacked onto an object or placed on a label
        if not _on_table(target) or not all(moved_off(o.name) for o in objects if o.on_top_of == target.name):
            return None
        own = by_subject.get(target.name)
        if own is not None and own.verb in MOVES_OFF:
            return None  # the target leaves the table, and once loaded it cannot move: never both
        if own is not None:
            after.append(own.action_id)  # the target's own lift or push first: a loaded target cannot move
    elif target is not None and not _on_table(target):  # push
        return None
    if b.verb in MOVES_OFF:  # pushes towards the subject happen while it is still on the table
        after += [a.action_id for a in actions if a.verb == "push" and a.target == b.obj]
    return tuple(dict.fromkeys(requires)), tuple(x for x in dict.fromkeys(after) if x not in requires)


def _blocked_by_pushes(actions: list[CandidateAction], objects: tuple[AnchorObject, ...]) -> dict[str, list[str]]:
    """Per push, the other actions that could not run after it (it leaves its object where their gripper
    needs room, or sweeps through where they put something): the push must come after them."""
    state = WorldState.initial(Anchor("probe", "action_sequence", "", objects, provenance={"source": "probe"}))
    out: dict[str, list[str]] = {}
    for p in actions:
        if p.verb != "push" or state.broken(p):
            continue
        pushed = state.after(p)
        for b in actions:
            if b is not p and b.obj != p.obj and set(pushed.broken(b)) - set(state.broken(b)):
                out.setdefault(p.action_id, []).append(b.action_id)
    return out


def _in_cycle(actions: list[CandidateAction]) -> str | None:
    """One action caught in (or behind) a cycle of relations (e.g. stack a on b, push b towards a), or None."""
    done: set[str] = set()
    progress = True
    while progress:
        progress = False
        for a in actions:
            if a.action_id not in done and set(a.predecessors) <= done:
                done.add(a.action_id)
                progress = True
    pending = sorted(a.action_id for a in actions if a.action_id not in done)
    return pending[0] if pending else None


def incomplete_order(state: WorldState, actions: tuple[CandidateAction, ...]) -> tuple[list[str], list[str]] | None:
    """An order the relations allow that breaks a precondition (order, problems), or None if none does.

    The orders a task can produce: any subset closed under ``requires``, in any order where every
    action comes after its required actions and after those of its ``after`` actions that are in the
    subset. Walked depth-first: appending an action whose ``after`` action is not done yet rules that one
    out for the rest of the order. At most 1,957 prefixes for six actions.
    """
    def walk(state: WorldState, done: list[str], ruled_out: frozenset[str]) -> tuple[list[str], list[str]] | None:
        for a in actions:
            if a.action_id in done or a.action_id in ruled_out or not set(a.requires) <= set(done):
                continue
            problems = state.broken(a)
            if problems:
                return [*done, a.action_id], problems
            later = frozenset(x for x in a.after if x not in done)
            found = walk(state.after(a), [*done, a.action_id], ruled_out | later)
            if found:
                return found
        return None

    return walk(state, [], frozenset())
