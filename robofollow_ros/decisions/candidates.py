"""Enumerate the valid (base, changed) constraint pairs an anchor supports.

A pair is usable when both constraints are *active* (dropping the constraint changes the decision,
so a model that ignores the operator is caught) and the change moves the decision. Each change is a
single word in the instruction: another colour, shape, verb, number or object phrase that differs
in one word, or first <-> last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.language import action_phrase, object_refs
from robofollow_ros.decisions.solver import Constraint, TaskSpec, redundant_exclusion, solve

Pair = tuple[Constraint, Constraint]


@dataclass(frozen=True)
class Candidate:
    """A valid family seed: scope, the constraints (one per op) and which one the change replaces."""

    scope: tuple[str, ...]
    base: tuple[Constraint, ...]
    changed_index: int
    changed: Constraint

    @property
    def base_spec(self) -> TaskSpec:
        return TaskSpec(self.scope, self.base)

    @property
    def changed_spec(self) -> TaskSpec:
        cons = list(self.base)
        cons[self.changed_index] = self.changed
        return TaskSpec(self.scope, tuple(cons))

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(c.op for c in self.base)


def one_word_apart(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and sum(x != y for x, y in zip(wa, wb, strict=True)) == 1


def all_active(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...] | None:
    """The decision if it is valid and every constraint in it is active, else None."""
    try:
        if redundant_exclusion(anchor, spec):
            return None
        decision = solve(anchor, spec)
        for i in range(len(spec.constraints)):
            reduced = TaskSpec(spec.scope, spec.constraints[:i] + spec.constraints[i + 1:])
            try:
                if solve(anchor, reduced) == decision:
                    return None
            except OwdaError:
                continue  # without it the task is invalid: it is doing work
        return decision
    except OwdaError:
        return None


def check_candidate(anchor: Anchor, cand: Candidate) -> bool:
    base = all_active(anchor, cand.base_spec)
    changed = all_active(anchor, cand.changed_spec)
    return base is not None and changed is not None and base != changed


def scopes(anchor: Anchor) -> list[tuple[str, ...]]:
    if anchor.kind == "action_sequence":
        return [("all",)]
    objs = anchor.candidate_objects
    out: list[tuple[str, ...]] = [("all",)]
    members = [tuple(o.name for o in objs)]
    for attr in ("shape", "colour"):
        for v in dict.fromkeys(getattr(o, attr) for o in objs):
            group = tuple(o.name for o in objs if getattr(o, attr) == v)
            if len(group) >= 3 and group not in members:  # a scope equal to another adds nothing
                out.append((attr, v))
                members.append(group)
    return out


def constraint_pairs(anchor: Anchor, scope: tuple[str, ...]) -> dict[str, list[Pair]]:
    """Every (base, changed) constraint pair per op, before activity checks."""
    if anchor.kind == "object_centric":
        return _object_pairs(anchor, scope)
    return _action_pairs(anchor)


def _object_pairs(anchor: Anchor, scope: tuple[str, ...]) -> dict[str, list[Pair]]:
    refs = object_refs(anchor)
    in_scope = [o for o in anchor.candidate_objects
                if scope == ("all",) or getattr(o, scope[0]) == scope[1]]
    named = [o.name for o in in_scope if o.name in refs]
    pairs: dict[str, list[Pair]] = {"E": [], "N": [], "Q": []}
    for a in named:
        for b in named:
            if a != b and one_word_apart(refs[a], refs[b]):
                pairs["E"].append((Constraint("E", names=(a,)), Constraint("E", names=(b,))))
                for c in named:
                    if c not in (a, b) and len(in_scope) >= 4:
                        pairs["E"].append((Constraint("E", names=(c, a)), Constraint("E", names=(c, b))))
    for attr in ("colour", "shape"):
        if scope[0] == attr:
            continue
        values = list(dict.fromkeys(getattr(o, attr) for o in in_scope))
        for v in values:
            for w in values:
                if v != w:
                    pairs["N"].append((Constraint("N", attr=attr, value=v), Constraint("N", attr=attr, value=w)))
    n = len(in_scope)
    for k in range(1, n):
        for k2 in (k + 1, k - 1):
            if 1 <= k2 < n:
                pairs["Q"].append((Constraint("Q", k=k), Constraint("Q", k=k2)))
    return pairs


def _action_pairs(anchor: Anchor) -> dict[str, list[Pair]]:
    refs = object_refs(anchor)
    pairs: dict[str, list[Pair]] = {"E": [], "N": [], "Q": [], "T": []}
    phrases = {a.action_id: action_phrase(anchor, a, gerund=True) for a in anchor.actions}
    for a in anchor.actions:
        for b in anchor.actions:
            if a is not b and one_word_apart(phrases[a.action_id], phrases[b.action_id]):
                pairs["E"].append((Constraint("E", names=(a.action_id,)), Constraint("E", names=(b.action_id,))))
    verbs = list(dict.fromkeys(a.verb for a in anchor.actions))
    for v in verbs:
        for w in verbs:
            if v != w:
                pairs["N"].append((Constraint("N", attr="verb", value=v), Constraint("N", attr="verb", value=w)))
    touched = [n for n in dict.fromkeys(x for a in anchor.actions for x in (a.obj, a.target) if x) if n in refs]
    for a_name in touched:
        for b_name in touched:
            if a_name != b_name and one_word_apart(refs[a_name], refs[b_name]):
                pairs["N"].append((Constraint("N", attr="object", value=a_name),
                                   Constraint("N", attr="object", value=b_name)))
    n = len(anchor.actions)
    for k in range(1, n):
        for k2 in (k + 1, k - 1):
            if 1 <= k2 < n:
                pairs["Q"].append((Constraint("Q", k=k), Constraint("Q", k=k2)))
    for a in anchor.actions:
        for pos, other in (("first", "last"), ("last", "first")):
            pairs["T"].append((Constraint("T", names=(a.action_id,), value=pos),
                               Constraint("T", names=(a.action_id,), value=other)))
    return pairs


def atomic_candidates(anchor: Anchor) -> Iterator[Candidate]:
    """Valid atomic family seeds, in a fixed order (scope, op, pair); one per base constraint."""
    seen: set[tuple[tuple[str, ...], Constraint]] = set()
    for scope in scopes(anchor):
        for pair_list in constraint_pairs(anchor, scope).values():
            for base, changed in pair_list:
                cand = Candidate(scope, (base,), 0, changed)
                if (scope, base) not in seen and check_candidate(anchor, cand):
                    seen.add((scope, base))
                    yield cand
