"""Suite validation: anchor and catalog, constraint consistency, membership, exclusion, cardinality,
ordering, joint satisfaction and uniqueness of every decision, plus the family structure.

Checks run in suite order and stop at the first invalid task, raising ``TaskError`` whose message
names the task and the constraint that failed, so a hand-edited suite can be fixed line by line.
"""

from __future__ import annotations

from robofollow_ros.decisions.anchors import Anchor, check_anchor
from robofollow_ros.decisions.candidates import one_word_apart
from robofollow_ros.decisions.errors import OwdaError, TaskError
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.language import parse
from robofollow_ros.decisions.solver import TaskSpec, redundant_exclusion, solve
from robofollow_ros.decisions.tasks import CHANGING_PAIRS, COMPOSITION_TYPES, PRESERVING_PAIRS, ROLES, Family, Instance


def validate_suite(suite: Suite) -> dict[str, int]:
    """Raise on the first invalid task; return the suite's counts when all pass."""
    anchors: dict[str, Anchor] = {}
    for a in suite.anchors:
        if a.anchor_id in anchors:
            raise TaskError("anchor", f"duplicate anchor id {a.anchor_id!r}")
        check_anchor(a)
        anchors[a.anchor_id] = a
    families = {f.family_id: f for f in suite.families}
    if len(families) != len(suite.families):
        raise TaskError("family", "duplicate family ids")
    for f in suite.families:
        validate_family(f, anchors, families)
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
        if inst[a].decision != inst[b].decision or inst[a].text == inst[b].text:
            raise _fail(inst[b].instance_id, family.changed_op,
                        "a task-preserving rewrite must reword the instruction and keep the decision")
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
        ospec = other.instances[0].spec
        if other.anchor_id != family.anchor_id or ospec.scope != base.scope or ospec.constraints != (cons,):
            raise _fail(fid, op, f"constituent {cid} is not the same anchor, scope and constraint")
