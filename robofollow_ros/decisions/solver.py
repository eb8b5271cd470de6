"""Symbolic task form and the solver that computes its unique executable decision a*(x, s).

Constraints are written before any sentence: a task is a scope (which candidates the base
instruction covers) plus constraints N (inhibit an attribute or a verb), E (exclude named members),
Q (keep the k objects closest to the table's front-left corner, or the first k actions) and T
(force one action first or last).
They apply in one fixed order (E and N remove, T orders, Q cuts) so that a composition means one
thing, and the prompt says so. Where an instruction leaves the order of actions open, actions follow
the listed order: the earliest-listed action whose required actions are done goes next. "Do not
touch X" removes every action that moves X, has X as its target, or takes its object out of X. The
solver raises ``TaskError`` naming the constraint when the decision would be empty, ambiguous or not
executable in the symbolic world (``world``): an object-centric pick under an object that stays, or
out of a bowl the instruction forbids touching; an action whose preconditions the earlier ones leave
false.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.errors import TaskError
from robofollow_ros.decisions.world import WorldState, pick_problems

OPS = ("N", "E", "Q", "T")
#: Q ranks objects by distance from this point, the table's front-left corner in the world frame (metres).
#: A corner rather than "leftmost": the scenes place objects in columns, which would tie in x.
Q_CORNER_XY = (-0.45, -0.30)
#: Two objects whose corner distances differ by less than this cannot be told apart; a cut between them is
#: ambiguous and the task is rejected.
Q_MIN_GAP_M = 0.02


@dataclass(frozen=True)
class Constraint:
    """One symbolic constraint. Fields not used by ``op`` stay at their defaults."""

    op: str
    names: tuple[str, ...] = ()  # E: excluded object names / action ids; T: the one action
    attr: str = ""  # N: colour | shape (objects) or verb (actions)
    value: str = ""  # N: the attribute value; T: first | last
    k: int = 0  # Q

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.names:
            out["names"] = list(self.names)
        if self.attr:
            out["attr"] = self.attr
        if self.value:
            out["value"] = self.value
        if self.k:
            out["k"] = self.k
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Constraint:
        op = d.get("op")
        if op not in OPS:
            raise TaskError("spec", f"field 'op' must be one of {OPS}, got {op!r}")
        return cls(op, tuple(d.get("names", ())), str(d.get("attr", "")), str(d.get("value", "")), int(d.get("k", 0)))


@dataclass(frozen=True)
class TaskSpec:
    """Scope plus constraints; ``scope`` is ("all",), ("shape", noun) or ("colour", word)."""

    scope: tuple[str, ...]
    constraints: tuple[Constraint, ...]

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(c.op for c in self.constraints)

    def without(self, op: str) -> TaskSpec:
        return TaskSpec(self.scope, tuple(c for c in self.constraints if c.op != op))

    def to_dict(self) -> dict[str, Any]:
        return {"scope": list(self.scope), "constraints": [c.to_dict() for c in self.constraints]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskSpec:
        return cls(tuple(d["scope"]), tuple(Constraint.from_dict(c) for c in d["constraints"]))


def solve(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...]:
    """The decision: object names in catalog order (a set) or action ids in execution order."""
    if anchor.kind == "object_centric":
        return _solve_objects(anchor, spec)
    return _solve_actions(anchor, spec)


def redundant_exclusion(anchor: Anchor, spec: TaskSpec) -> str | None:
    """An E member that an N of the same task inhibits anyway (each named exclusion must do work), or None."""
    inhibited = [c for c in spec.constraints if c.op == "N"]
    for c in spec.constraints:
        if c.op != "E":
            continue
        for name in c.names:
            if anchor.kind == "object_centric":
                obj = anchor.object(name)
                if any(getattr(obj, n.attr, None) == n.value for n in inhibited):
                    return name
            elif any(_touches(anchor, anchor.action(name), n) for n in inhibited if name in anchor.candidate_ids):
                return name
    return None


def forbidden_containers(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...]:
    """Bowls an object-centric N forbids touching: nothing may be taken out of them."""
    inhibited = [c for c in spec.constraints if c.op == "N" and c.attr in ("colour", "shape")]
    return tuple(o.name for o in anchor.objects if o.role == "bowl"
                 and any(getattr(o, c.attr) == c.value for c in inhibited))


def _in_scope(obj: AnchorObject, scope: tuple[str, ...]) -> bool:
    if scope == ("all",):
        return True
    if len(scope) == 2 and scope[0] in ("shape", "colour"):
        return getattr(obj, scope[0]) == scope[1]
    raise TaskError("scope", f"unknown scope {list(scope)}")


def _solve_objects(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...]:
    chosen = [o for o in anchor.candidate_objects if _in_scope(o, spec.scope)]
    if len(chosen) < 2:
        raise TaskError("scope", f"scope {list(spec.scope)} covers {len(chosen)} candidate(s); a task needs >= 2")
    removed_by = {o.name: "scope" for o in anchor.candidate_objects if o not in chosen}
    for c in spec.constraints:
        if c.op == "E":
            names = {o.name for o in chosen}
            for n in c.names:
                if n not in names:
                    raise TaskError("E", f"excluded {n!r} is not a candidate in scope {list(spec.scope)}")
            removed_by.update(dict.fromkeys(c.names, "E"))
            chosen = [o for o in chosen if o.name not in c.names]
        elif c.op == "N":
            if c.attr not in ("colour", "shape"):
                raise TaskError("N", f"objects can be inhibited by colour or shape, got attr {c.attr!r}")
            removed_by.update({o.name: "N" for o in chosen if getattr(o, c.attr) == c.value})
            chosen = [o for o in chosen if getattr(o, c.attr) != c.value]
        elif c.op == "T":
            raise TaskError("T", "temporal ordering applies to action-sequence anchors only")
    for c in spec.constraints:
        if c.op == "Q":
            kept = _closest_to_corner(chosen, c.k)
            removed_by.update({o.name: "Q" for o in chosen if o not in kept})
            chosen = kept
    if not chosen:
        raise TaskError(spec.ops[-1] if spec.ops else "scope", "the decision is empty")
    keep = {o.name for o in chosen}
    problem = pick_problems(anchor, keep, forbidden_containers(anchor, spec))
    if problem is not None:
        name, problems = problem
        stays = next((y for y in WorldState.initial(anchor).resting_on(name) if y not in keep), None)
        raise TaskError(removed_by.get(stays, "N") if stays else "N",
                        f"world: {name!r} cannot be picked up: {'; '.join(problems)}")
    return tuple(o.name for o in anchor.candidate_objects if o.name in keep)


def corner_distance(obj: AnchorObject) -> float:
    return math.hypot(obj.xy[0] - Q_CORNER_XY[0], obj.xy[1] - Q_CORNER_XY[1])


def _closest_to_corner(objs: list[AnchorObject], k: int) -> list[AnchorObject]:
    if not 1 <= k < len(objs):
        raise TaskError("Q", f"k={k} must be between 1 and {len(objs) - 1} ({len(objs)} candidates remain)")
    ordered = sorted(objs, key=corner_distance)
    gap = corner_distance(ordered[k]) - corner_distance(ordered[k - 1])
    if gap < Q_MIN_GAP_M:
        raise TaskError("Q", f"the {k} closest to the corner are not unique: {ordered[k - 1].name!r} and "
                             f"{ordered[k].name!r} differ by {gap:.3f} m (< {Q_MIN_GAP_M} m)")
    return ordered[:k]


def _solve_actions(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...]:
    if spec.scope != ("all",):
        raise TaskError("scope", f"action-sequence tasks cover all actions, got scope {list(spec.scope)}")
    chosen = list(anchor.actions)
    removed_by: dict[str, str] = {}
    for c in spec.constraints:
        if c.op == "E":
            ids = {a.action_id for a in chosen}
            for n in c.names:
                if n not in ids:
                    raise TaskError("E", f"excluded action {n!r} is not a remaining candidate")
                removed_by[n] = "E"
            chosen = [a for a in chosen if a.action_id not in c.names]
        elif c.op == "N":
            if c.attr not in ("verb", "object"):
                raise TaskError("N", f"actions can be inhibited by verb or object, got attr {c.attr!r}")
            removed_by.update({a.action_id: "N" for a in chosen if _touches(anchor, a, c)})
            chosen = [a for a in chosen if not _touches(anchor, a, c)]
    kept = {a.action_id for a in chosen}
    for a in chosen:
        for req in a.requires:
            if req not in kept:
                raise TaskError(removed_by.get(req, "scope"),
                                f"removes {req!r}, a precondition of remaining action {a.action_id!r}")
    first = [c for c in spec.constraints if c.op == "T" and c.value == "first"]
    last = [c for c in spec.constraints if c.op == "T" and c.value == "last"]
    head = _forced(chosen, first, kept, "first")
    tail = _forced(chosen, last, kept, "last")
    middle = [a for a in chosen if a.action_id not in {x.action_id for x in head + tail}]
    order = head + _catalog_topological(middle, {a.action_id for a in head}) + tail
    for c in spec.constraints:
        if c.op == "Q":
            if not 1 <= c.k < len(order):
                raise TaskError("Q", f"k={c.k} must be between 1 and {len(order) - 1} ({len(order)} actions remain)")
            order = order[: c.k]
    if not order:
        raise TaskError(spec.ops[-1] if spec.ops else "scope", "the decision is empty")
    _, bad, problems = WorldState.initial(anchor).run(order)
    if bad is not None:
        raise TaskError("world", f"{order[bad].action_id!r} (step {bad + 1}) cannot run: {'; '.join(problems)}")
    return tuple(a.action_id for a in order)


def touched(anchor: Anchor, action: CandidateAction) -> tuple[str, ...]:
    """What an action touches: the object it moves, its target, and a bowl it takes the object out of."""
    names = [action.obj, action.target, anchor.object(action.obj).in_container]
    return tuple(n for n in names if n)


def _touches(anchor: Anchor, action: CandidateAction, c: Constraint) -> bool:
    if c.attr == "verb":
        return action.verb == c.value
    return c.value in touched(anchor, action)
def _forced(chosen: list[CandidateAction], cons: list[Constraint], kept: set[str], where: str) -> list[CandidateAction]:
    if not cons:
        return []
    if len(cons) > 1:
        raise TaskError("T", f"more than one action is required {where}")
    (c,) = cons
    if len(c.names) != 1 or c.names[0] not in kept:
        raise TaskError("T", f"action {list(c.names)} to do {where} is not a remaining candidate")
    action = next(a for a in chosen if a.action_id == c.names[0])
    before = [p for p in action.predecessors if p in kept]
    if where == "first" and before:
        raise TaskError("T", f"{action.action_id!r} cannot go first: it comes after {before}")
    if where == "last":
        later = [a.action_id for a in chosen if action.action_id in a.predecessors]
        if later:
            raise TaskError("T", f"{action.action_id!r} cannot go last: {later} come after it")
    return [action]


def _catalog_topological(actions: list[CandidateAction], done: set[str]) -> list[CandidateAction]:
    """At each step the earliest-listed remaining action whose remaining predecessors are all done."""
    done = set(done)
    pending = list(actions)
    out: list[CandidateAction] = []
    while pending:
        waiting = {p.action_id for p in pending}
        nxt = next((a for a in pending if not any(r in waiting for r in a.predecessors)), None)
        if nxt is None:
            raise TaskError("T", f"no order for {[a.action_id for a in pending]} respects their relations")
        out.append(nxt)
        done.add(nxt.action_id)
        pending.remove(nxt)
    return out
