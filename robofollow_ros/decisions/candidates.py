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


def spec_key(spec: TaskSpec) -> tuple[object, ...]:
    """What a spec means: exclusions are sets, so "skip a and b" and "skip b and a" are the same task."""
    return (spec.scope, tuple((c.op, frozenset(c.names) if c.op == "E" else c.names, c.attr, c.value, c.k)
                              for c in spec.constraints))


def family_key(cand: Candidate) -> frozenset[tuple[object, ...]]:
    """A family is its unordered pair of tasks: (X -> Y) and its mirror (Y -> X) are one family."""
    return frozenset((spec_key(cand.base_spec), spec_key(cand.changed_spec)))


def verdict(anchor: Anchor, spec: TaskSpec) -> tuple[tuple[str, ...] | None, str]:
    """(decision, "") if the task is valid and every constraint in it is active, else (None, why not)."""
    if (name := redundant_exclusion(anchor, spec)) is not None:
        return None, f"E: excluded {name!r} is inhibited by N anyway"
    try:
        decision = solve(anchor, spec)
    except OwdaError as exc:
        return None, str(exc)
    for i, c in enumerate(spec.constraints):
        reduced = TaskSpec(spec.scope, spec.constraints[:i] + spec.constraints[i + 1:])
        try:
            if solve(anchor, reduced) == decision:
                return None, f"{c.op}: inactive (dropping it leaves the decision unchanged)"
        except OwdaError:
            continue  # without it the task is invalid: it is doing work
    return decision, ""


def all_active(anchor: Anchor, spec: TaskSpec) -> tuple[str, ...] | None:
    """The decision if it is valid and every constraint in it is active, else None."""
    return verdict(anchor, spec)[0]


def examine(anchor: Anchor, cand: Candidate) -> str:
    """Why a family seed is rejected ("" when it is valid): the base's, the change's, or an unchanged decision."""
    base, why = verdict(anchor, cand.base_spec)
    if base is None:
        return why
    changed, why = verdict(anchor, cand.changed_spec)
    if changed is None:
        return why
    return "" if base != changed else f"{cand.changed.op}: the change leaves the decision as it is"


def check_candidate(anchor: Anchor, cand: Candidate) -> bool:
    return examine(anchor, cand) == ""


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


def atomic_candidates(anchor: Anchor, rejected: dict[str, dict[str, int]] | None = None) -> Iterator[Candidate]:
    """Valid atomic family seeds, one per unordered pair of tasks, in a fixed order (scope, op, pair).

    ``rejected`` (if given) counts, per operator, the seeds turned down and why (a mirror counts once).
    """
    seen: set[frozenset[tuple[object, ...]]] = set()
    for scope in scopes(anchor):
        for op, pair_list in constraint_pairs(anchor, scope).items():
            for base, changed in pair_list:
                cand = Candidate(scope, (base,), 0, changed)
                key = family_key(cand)
                if key in seen:
                    if rejected is not None:
                        _count(rejected, op, MIRROR)
                    continue
                seen.add(key)
                why = examine(anchor, cand)
                if not why:
                    yield cand
                elif rejected is not None:
                    _count(rejected, op, rejection_reason(why))


MIRROR = "the mirror of a family already counted (the same two tasks)"


def _count(rejected: dict[str, dict[str, int]], label: str, reason: str) -> None:
    rejected.setdefault(label, {})[reason] = rejected.setdefault(label, {}).get(reason, 0) + 1


def distinct_atomic_pairs(anchor: Anchor) -> list[Candidate]:
    return list(atomic_candidates(anchor))


_REASONS = (
    ("inactive", "a constraint is inactive (dropping it leaves the decision)"),
    ("leaves the decision as it is", "the one-word change leaves the decision as it is"),
    ("inhibited by N anyway", "an exclusion names what N already removes"),
    ("which stays, rests on", "world: an object that stays rests on a picked one"),
    ("forbids touching", "world: picking reaches into a bowl N forbids"),
    ("cannot run", "world: an action's precondition is false"),
    ("a precondition of remaining action", "removes an action another one requires"),
    ("cannot go first", "T: the action requires another, so it cannot go first"),
    ("cannot go last", "T: another action requires it, so it cannot go last"),
    ("are not unique", "Q: the cut falls between two objects equally far from the corner"),
    ("must be between", "Q: k is out of range after the exclusions"),
    ("is empty", "the decision would be empty"),
    ("a task needs >= 2", "the scope covers fewer than two objects"),
    ("is not a", "an excluded member is not in scope"),
)


def rejection_reason(message: str) -> str:
    """A short category for a rejection message (for the suite's table of rejections)."""
    return next((label for needle, label in _REASONS if needle in message), message)
