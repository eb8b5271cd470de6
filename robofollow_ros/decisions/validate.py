"""Suite validation: anchor and catalog, constraint consistency, membership, exclusion, cardinality,
ordering, joint satisfaction and uniqueness of every decision, plus the family structure.

Checks run in suite order and stop at the first invalid task, raising ``TaskError`` whose message
names the task and the constraint that failed, so a hand-edited suite can be fixed line by line.
"""

from __future__ import annotations

from collections.abc import Callable

from robofollow_ros.decisions.anchors import Anchor, check_anchor
from robofollow_ros.decisions.candidates import one_word_apart, spec_key
from robofollow_ros.decisions.errors import OwdaError, TaskError
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.language import parse
from robofollow_ros.decisions.solver import TaskSpec, forbidden_containers, redundant_exclusion, solve
from robofollow_ros.decisions.tasks import CHANGING_PAIRS, COMPOSITION_TYPES, PRESERVING_PAIRS, ROLES, Family, Instance
from robofollow_ros.decisions.world import WorldState, cramped, pick_problems


def validate_suite(suite: Suite, progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
    """Raise on the first invalid task; return the suite's counts when all pass. ``progress(stage, done,
    total)``, when given, is called after each family (the CLI's progress line)."""
    anchors: dict[str, Anchor] = {}
    for a in suite.anchors:
        if a.anchor_id in anchors:
            raise TaskError("anchor", f"duplicate anchor id {a.anchor_id!r}")
        check_anchor(a)
        tight = cramped(a)
        if tight:
            raise TaskError("anchor", f"anchor {a.anchor_id}: {tight[0]}")
        anchors[a.anchor_id] = a
    families = {f.family_id: f for f in suite.families}
    if len(families) != len(suite.families):
        raise TaskError("family", "duplicate family ids")
    instances = {i.instance_id: (f, i) for f in suite.families for i in f.instances}
    seen: dict[tuple[str, frozenset[tuple[object, ...]]], str] = {}
    for n, f in enumerate(suite.families, start=1):
        validate_family(f, anchors, families)
        if f.kind == "compositional":
            _check_matched(f, instances)
        key = (f.anchor_id, frozenset(spec_key(i.spec) for i in f.instances))
        if key in seen:
            raise _fail(f.family_id, "family", f"the same tasks as family {seen[key]} on anchor {f.anchor_id} "
                                               "(a family and its mirror are one family)")
        seen[key] = f.family_id
        if progress is not None:
            progress("families", n, len(suite.families))
    return suite.counts()


def _fail(where: str, constraint: str, message: str) -> TaskError:
    return TaskError(constraint, f"{message} (task {where})")


def validate_family(family: Family, anchors: dict[str, Anchor], families: dict[str, Family]) -> None:
    fid = family.family_id
    anchor = anchors.get(family.anchor_id)
    if anchor is None:
        raise _fail(fid, "anchor", f"unknown anchor {family.anchor_id!r}")
    if [i.role for i in family.instances] != list(ROLES):
        raise _fail(fid, "family", f"instances must be {list(ROLES)}, got {[i.role for i in family.instances]}")
    if "T" in family.ops and (anchor.kind != "action_sequence" or family.kind != "atomic"):
        raise _fail(fid, "T", "temporal ordering is atomic and on action-sequence anchors only")
    if family.kind == "compositional":
        _check_composition(family, anchor, families)
    elif family.kind != "atomic" or len(family.ops) != 1:
        raise _fail(fid, "family", f"kind {family.kind!r} with ops {list(family.ops)} is not atomic or compositional")
    for one in family.instances:
        _check_instance(one, anchor, family)
    inst = list(family.instances)
    for a, b in PRESERVING_PAIRS:
        if inst[a].decision != inst[b].decision or inst[a].spec != inst[b].spec:
            raise _fail(inst[b].instance_id, family.changed_op, "a task-preserving rewrite must keep the task")
        same = [x for x, y in zip(_sentences(inst[a].text), _sentences(inst[b].text), strict=False) if x == y]
        if same:
            raise _fail(inst[b].instance_id, family.changed_op,
                        f"a task-preserving rewrite must reword every sentence; {same[0]!r} is unchanged")
    for a, b in CHANGING_PAIRS:
        if inst[a].decision == inst[b].decision:
            raise _fail(inst[b].instance_id, family.changed_op, "the task-changing rewrite leaves the decision as is")
        if not one_word_apart(inst[a].text, inst[b].text):
            raise _fail(inst[b].instance_id, family.changed_op,
                        f"a task-changing rewrite must change exactly one word of {inst[a].text!r}")
        changed = [i for i, (x, y) in enumerate(zip(inst[a].spec.constraints, inst[b].spec.constraints, strict=True))
                   if x != y]
        if len(changed) != 1 or inst[a].spec.constraints[changed[0]].op != family.changed_op:
            raise _fail(inst[b].instance_id, family.changed_op, "the rewrite must change the family's changed_op only")


def _check_instance(inst: Instance, anchor: Anchor, family: Family) -> None:
    where = inst.instance_id
    if inst.spec.ops != family.ops:
        raise _fail(where, "family", f"spec ops {list(inst.spec.ops)} differ from the family's {list(family.ops)}")
    try:
        read_back = parse(anchor, inst.text)
    except OwdaError as exc:
        raise _fail(where, "language", str(exc)) from None
    if read_back != inst.spec:
        raise _fail(where, _first_difference(read_back, inst.spec),
                    f"the instruction reads back as {read_back.to_dict()}, not {inst.spec.to_dict()}")
    try:
        decision = solve(anchor, inst.spec)
    except TaskError as exc:
        raise _fail(where, exc.constraint, str(exc).split(": ", 1)[-1]) from None
    if decision != inst.decision:
        raise _fail(where, inst.spec.ops[-1], f"stored decision {list(inst.decision)} is not the solution "
                                              f"{list(decision)}")
    if (problem := world_problem(anchor, inst.spec, inst.decision)) is not None:
        raise _fail(where, "world", problem)
    if (name := redundant_exclusion(anchor, inst.spec)) is not None:
        raise _fail(where, "E", f"excluded {name!r} is already inhibited by N: the exclusion does no work")
    for i, c in enumerate(inst.spec.constraints):
        reduced = TaskSpec(inst.spec.scope, inst.spec.constraints[:i] + inst.spec.constraints[i + 1:])
        try:
            unchanged = solve(anchor, reduced) == decision
        except OwdaError:
            unchanged = False
        if unchanged:
            raise _fail(where, c.op, "the constraint is inactive: dropping it leaves the decision unchanged")


def world_problem(anchor: Anchor, spec: TaskSpec, decision: tuple[str, ...]) -> str | None:
    """Why ``decision`` cannot be executed in the symbolic world, or None: the proof every gold decision gets."""
    if anchor.kind == "object_centric":
        found = pick_problems(anchor, decision, forbidden_containers(anchor, spec))
        return None if found is None else f"picking {found[0]!r}: {'; '.join(found[1])}"
    try:
        actions = [anchor.action(a) for a in decision]
    except OwdaError as exc:
        return str(exc)
    _, bad, problems = WorldState.initial(anchor).run(actions)
    if bad is not None:
        return f"step {bad + 1} {decision[bad]!r} cannot run after {list(decision[:bad])}: {'; '.join(problems)}"
    done: set[str] = set()
    for a in actions:
        missing = [r for r in a.requires if r not in done]
        if missing:
            return f"{a.action_id!r} runs before the actions it requires: {missing}"
        late = [r for r in a.after if r in decision and r not in done]
        if late:
            return f"{a.action_id!r} runs before {late}, which must come first"
        done.add(a.action_id)
    return None


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in text.replace(". ", ".\n").splitlines() if s.strip()]


def _check_matched(family: Family, instances: dict[str, tuple[Family, Instance]]) -> None:
    """Each compositional instance names one matched atomic instance per constraint, with that exact task."""
    for inst in family.instances:
        if len(inst.matched) != len(inst.spec.constraints):
            raise _fail(inst.instance_id, family.type, f"needs one matched atomic instance per constraint, "
                                                       f"got {list(inst.matched)}")
        for c, mid in zip(inst.spec.constraints, inst.matched, strict=True):
            other = instances.get(mid)
            if other is None or other[0].kind != "atomic" or other[0].anchor_id != family.anchor_id:
                raise _fail(inst.instance_id, c.op, f"matched {mid!r} is not an atomic instance on {family.anchor_id}")
            if other[1].spec != TaskSpec(inst.spec.scope, (c,)):
                raise _fail(inst.instance_id, c.op, f"matched {mid} is not the same scope and constraint")


def _first_difference(a: TaskSpec, b: TaskSpec) -> str:
    if a.scope != b.scope:
        return "scope"
    for x, y in zip(a.constraints, b.constraints, strict=False):
        if x != y:
            return y.op
    return "language"


def _check_composition(family: Family, anchor: Anchor, families: dict[str, Family]) -> None:
    fid = family.family_id
    if anchor.kind != "object_centric":
        raise _fail(fid, family.type, "compositions are on object-centric anchors only")
    if family.type not in COMPOSITION_TYPES:
        raise _fail(fid, family.type, f"type must be one of {COMPOSITION_TYPES}")
    if len(family.constituents) != len(family.ops):
        raise _fail(fid, family.type, f"needs one matched atomic constituent per operator, got {family.constituents}")
    base = family.instances[0].spec
    for op, cid, cons in zip(family.ops, family.constituents, base.constraints, strict=True):
        other = families.get(cid)
        if other is None or other.kind != "atomic":
            raise _fail(fid, op, f"matched constituent {cid!r} is not an atomic family of the suite")
        specs = {i.spec for i in other.instances}
        if other.anchor_id != family.anchor_id or TaskSpec(base.scope, (cons,)) not in specs:
            raise _fail(fid, op, f"constituent {cid} is not the same anchor, scope and constraint")
    changed = family.instances[2].spec.constraints[family.ops.index(family.changed_op)]
    own = families[family.constituents[family.ops.index(family.changed_op)]]
    if TaskSpec(base.scope, (changed,)) not in {i.spec for i in own.instances}:
        raise _fail(fid, family.changed_op, f"constituent {own.family_id} does not make the same one-word change")
