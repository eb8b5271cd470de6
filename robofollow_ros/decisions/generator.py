"""Build the default OWDA suite at the benchmark's exact sizes, deterministically for a seed.

Every family is distinct: a family is an unordered pair of tasks on one anchor (its base and its
one-word change), so a family and its mirror (the same two tasks with the roles swapped) are one
family and enter the suite at most once. Compositional families are drawn first (object-centric
anchors only, N/E/Q), round-robin over anchors and types; each constituent constraint's atomic family
(same anchor, scope and constraint; for the changed constraint, the same change) is forced into the
atomic set, which is then filled round-robin over anchors, operators interleaved, to its exact size.
Each compositional instance records its matched atomic instances: the atomic tasks with exactly its
scope and one of its constraints, worded with the same template set where there is a choice.

Generation takes minutes; ``progress(stage, done, total)``, when given, is called as each stage advances
(the CLI turns it into a rate-limited line on stderr).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.authoring import authored_anchors
from robofollow_ros.decisions.candidates import (
    MIRROR,
    Candidate,
    atomic_candidates,
    examine,
    family_key,
    rejection_reason,
    scopes,
)
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.language import Wording, realise
from robofollow_ros.decisions.solver import TaskSpec, solve
from robofollow_ros.decisions.tasks import ROLES, Family, Instance
from robofollow_ros.decisions.templates import N_TEMPLATES

ATOMIC_FAMILIES = 988
K2_FAMILIES = 82
K3_FAMILIES = 20
K2_TYPES: tuple[tuple[str, ...], ...] = (("E", "N"), ("E", "Q"), ("N", "Q"))
#: atomic families on object-centric anchors; the rest (736) go to the 64 action-sequence anchors
OBJECT_CENTRIC_ATOMIC = 252
Rejections = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Suite:
    seed: int
    anchors: tuple[Anchor, ...]
    families: tuple[Family, ...]
    #: family seeds the validator's checks turned down while generating, per operator / type and reason
    rejections: Rejections = field(default_factory=dict, compare=False)
    #: valid distinct family seeds there were to choose from, per operator / type (compositions: those examined)
    available: dict[str, int] = field(default_factory=dict, compare=False)

    def counts(self) -> dict[str, int]:
        atomic = [f for f in self.families if f.kind == "atomic"]
        comp = [f for f in self.families if f.kind == "compositional"]
        return {
            "anchors": len(self.anchors),
            "object_centric_anchors": sum(a.kind == "object_centric" for a in self.anchors),
            "action_sequence_anchors": sum(a.kind == "action_sequence" for a in self.anchors),
            "atomic_families": len(atomic),
            "atomic_instances": sum(len(f.instances) for f in atomic),
            "compositional_families": len(comp),
            "compositional_instances": sum(len(f.instances) for f in comp),
            "k2_families": sum(f.depth == 2 for f in comp),
            "k3_families": sum(f.depth == 3 for f in comp),
        }


#: ``progress(stage, done, total)``: a stage of the work advanced to ``done`` of ``total``.
ProgressFn = Callable[[str, int, int], None]


def _silent(stage: str, done: int, total: int) -> None:
    return None


def generate_suite(seed: int, progress: ProgressFn | None = None) -> Suite:
    say = progress or _silent
    anchors = authored_anchors(seed, say)
    rng = random.Random(f"owda-suite-{seed}")
    rejected: Rejections = {}
    oc = [a for a in anchors if a.kind == "object_centric"]
    pools: dict[str, list[Candidate]] = {}
    for n, a in enumerate(anchors, start=1):  # in anchor order: the seeded draws stay in the same order
        pools[a.anchor_id] = _interleaved([_oriented(c, rng) for c in atomic_candidates(a, rejected)], rng)
        say("atomic candidates (anchors)", n, len(anchors))
    available: dict[str, int] = {}
    for pool in pools.values():
        for c in pool:
            available[c.ops[0]] = available.get(c.ops[0], 0) + 1
    comps = _pick_compositions(oc, pools, rng, rejected, available, say)
    chosen: dict[str, list[Candidate]] = {a.anchor_id: [] for a in anchors}
    for anchor_id, cand in comps:
        for i in range(len(cand.base)):
            atom = _constituent(pools[anchor_id], cand, i)
            if atom not in chosen[anchor_id]:
                chosen[anchor_id].append(atom)
    _fill(chosen, pools, [a.anchor_id for a in oc], OBJECT_CENTRIC_ATOMIC)
    _fill(chosen, pools, [a.anchor_id for a in anchors if a.kind == "action_sequence"],
          ATOMIC_FAMILIES - OBJECT_CENTRIC_ATOMIC)
    by_id = {a.anchor_id: a for a in anchors}
    families: list[Family] = []
    for n, anchor in enumerate(anchors, start=1):
        for cand in chosen[anchor.anchor_id]:
            families.append(_family(f"A{len(families) + 1:04d}", "atomic", anchor, cand, rng))
        say("atomic families (anchors)", n, len(anchors))
    atomic_by_key = {(f.anchor_id, family_key(_seed_of(f))): f for f in families}
    for n, (anchor_id, cand) in enumerate(comps, start=1):
        constituents = [atomic_by_key[(anchor_id, family_key(_constituent(pools[anchor_id], cand, i)))]
                        for i in range(len(cand.base))]
        families.append(_composition(f"C{n:03d}", by_id[anchor_id], cand, rng, constituents))
    return Suite(seed, tuple(anchors), tuple(families), rejected, available)


def generate_on_anchors(anchors: list[Anchor], per_anchor: int, seed: int = 0,
                        progress: ProgressFn | None = None) -> Suite:
    """Atomic families on given anchors (say, captured on the rig): up to ``per_anchor`` distinct ones each."""
    say = progress or _silent
    if per_anchor < 1:
        raise OwdaError(f"families per anchor: must be >= 1, got {per_anchor}")
    rng = random.Random(f"owda-anchors-suite-{seed}")
    rejected: Rejections = {}
    families: list[Family] = []
    for n, anchor in enumerate(anchors, start=1):
        pool = _interleaved([_oriented(c, rng) for c in atomic_candidates(anchor, rejected)], rng)
        if not pool:
            raise OwdaError(f"anchor {anchor.anchor_id}: supports no valid atomic family")
        for cand in pool[:per_anchor]:
            families.append(_family(f"A{len(families) + 1:04d}", "atomic", anchor, cand, rng))
        say("atomic families (anchors)", n, len(anchors))
    return Suite(seed, tuple(anchors), tuple(families), rejected)


def _oriented(cand: Candidate, rng: random.Random) -> Candidate:
    """Either task of the pair may be the base: a seeded coin decides."""
    if rng.randrange(2) == 0:
        return cand
    return Candidate(cand.scope, (cand.changed,), 0, cand.base[0])


def _seed_of(f: Family) -> Candidate:
    base, changed = f.instances[0].spec, f.instances[2].spec
    idx = next(i for i, (x, y) in enumerate(zip(base.constraints, changed.constraints, strict=True)) if x != y)
    return Candidate(base.scope, base.constraints, idx, changed.constraints[idx])


def _interleaved(pool: list[Candidate], rng: random.Random) -> list[Candidate]:
    """Shuffle, then alternate operators so a partly used pool still covers N, E, Q (and T) evenly."""
    rng.shuffle(pool)
    by_op: dict[str, list[Candidate]] = {}
    for c in pool:
        by_op.setdefault(c.ops[0], []).append(c)
    lanes = [by_op[op] for op in sorted(by_op)]
    return [c for group in itertools.zip_longest(*lanes) for c in group if c is not None]


def _constituent(pool: list[Candidate], comp: Candidate, i: int) -> Candidate:
    """The atomic family of constraint ``i`` of a composition: the same scope and constraint, and the same change."""
    if i == comp.changed_index:
        want = family_key(Candidate(comp.scope, (comp.base[i],), 0, comp.changed))
        return next(a for a in pool if family_key(a) == want)
    return next(a for a in pool if a.scope == comp.scope and comp.base[i] in (a.base[0], a.changed))


def _fill(chosen: dict[str, list[Candidate]], pools: dict[str, list[Candidate]], anchor_ids: list[str],
          total: int) -> None:
    count = sum(len(chosen[a]) for a in anchor_ids)
    if count > total:
        raise OwdaError(f"{count} atomic families are forced by compositions, more than the {total} allowed")
    while count < total:
        progress = False
        for a in anchor_ids:
            nxt = next((c for c in pools[a] if c not in chosen[a]), None)
            if nxt is not None and count < total:
                chosen[a].append(nxt)
                count += 1
                progress = True
        if not progress:
            raise OwdaError(f"only {count} distinct valid atomic families for {total} wanted")


def _pick_compositions(anchors: list[Anchor], pools: dict[str, list[Candidate]], rng: random.Random,
                       rejected: Rejections, available: dict[str, int],
                       say: ProgressFn = _silent) -> list[tuple[str, Candidate]]:
    streams: dict[tuple[str, tuple[str, ...]], Iterator[Candidate]] = {
        (a.anchor_id, ops): _composition_stream(a, pools[a.anchor_id], ops, rng, rejected, available)
        for a in anchors for ops in (*K2_TYPES, ("E", "N", "Q"))}
    order = [a.anchor_id for a in anchors]
    rng.shuffle(order)
    out: list[tuple[str, Candidate]] = []
    for ops_list, wanted in (((("E", "N", "Q"),), K3_FAMILIES), (K2_TYPES, K2_FAMILIES)):
        got = 0
        while got < wanted:
            before = got
            for anchor_id, ops in itertools.product(order, ops_list):
                cand = next(streams[(anchor_id, ops)], None)
                if cand is not None and got < wanted:
                    out.append((anchor_id, cand))
                    got += 1
                    say(f"K={len(ops_list[0])} compositions", got, wanted)
            if got == before:
                raise OwdaError(f"only {got} valid compositions of {ops_list} for {wanted} wanted")
    return out


def _composition_stream(anchor: Anchor, pool: list[Candidate], ops: tuple[str, ...], rng: random.Random,
                        rejected: Rejections, available: dict[str, int]) -> Iterator[Candidate]:
    """Distinct valid compositions of ``ops``, in a seeded order; every constraint's change is an atomic family."""
    combos = []
    for scope in scopes(anchor):
        per_op = [[pair for a in pool if a.scope == scope and a.ops == (op,)
                   for pair in ((a.base[0], a.changed), (a.changed, a.base[0]))] for op in ops]
        combos += [(scope, combo) for combo in itertools.product(*per_op)]
    rng.shuffle(combos)
    seen: set[frozenset[tuple[object, ...]]] = set()
    label = "+".join(ops)
    for i, (scope, combo) in enumerate(combos):
        base = tuple(pair[0] for pair in combo)
        idx = i % len(ops)  # rotate which constraint the one-word change touches
        cand = Candidate(scope, base, idx, combo[idx][1])
        reason = MIRROR if family_key(cand) in seen else rejection_reason(examine(anchor, cand))
        seen.add(family_key(cand))
        if reason:
            rejected.setdefault(label, {})[reason] = rejected.setdefault(label, {}).get(reason, 0) + 1
            continue
        available[label] = available.get(label, 0) + 1
        yield cand


def _wordings(rng: random.Random, n: int) -> tuple[Wording, Wording]:
    """Two wordings of ``n`` sentences that differ in every sentence (the base's and its rewrite's)."""
    a = tuple(rng.randrange(N_TEMPLATES) for _ in range(n))
    b = tuple(rng.choice([t for t in range(N_TEMPLATES) if t != x]) for x in a)
    return a, b


def _instances(fid: str, anchor: Anchor, cand: Candidate, rng: random.Random) -> tuple[Instance, ...]:
    a, b = _wordings(rng, 1 + len(cand.base))
    plan: tuple[tuple[TaskSpec, Wording], ...] = (
        (cand.base_spec, a), (cand.base_spec, b), (cand.changed_spec, a), (cand.changed_spec, b))
    return tuple(Instance(f"{fid}/{i}", ROLES[i], realise(anchor, spec, w), spec, solve(anchor, spec))
                 for i, (spec, w) in enumerate(plan))


def _family(fid: str, kind: str, anchor: Anchor, cand: Candidate, rng: random.Random) -> Family:
    return Family(fid, kind, anchor.anchor_id, cand.ops, cand.ops[cand.changed_index],
                  _instances(fid, anchor, cand, rng))


def _composition(fid: str, anchor: Anchor, cand: Candidate, rng: random.Random, constituents: list[Family]) -> Family:
    instances = []
    for n, inst in enumerate(_instances(fid, anchor, cand, rng)):
        matched = []
        for c in inst.spec.constraints:
            atomic_spec = TaskSpec(inst.spec.scope, (c,))
            options = [i for f in constituents for i in f.instances if i.spec == atomic_spec]
            same_wording = [i for i in options if ROLES.index(i.role) % 2 == n % 2]
            matched.append((same_wording or options)[0].instance_id)
        instances.append(Instance(inst.instance_id, inst.role, inst.text, inst.spec, inst.decision, tuple(matched)))
    return Family(fid, "compositional", anchor.anchor_id, cand.ops, cand.ops[cand.changed_index], tuple(instances),
                  tuple(f.family_id for f in constituents))
