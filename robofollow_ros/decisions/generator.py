"""Build the default OWDA suite at the benchmark's exact sizes, deterministically for a seed.

Compositional families are drawn first (object-centric anchors only, N/E/Q), round-robin over
anchors and types so every anchor and type is represented; their matched atomic constituents are
then forced into the atomic set, which is filled round-robin over anchors to its exact size.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.authoring import authored_anchors
from robofollow_ros.decisions.candidates import Candidate, atomic_candidates, check_candidate, scopes
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.language import realise
from robofollow_ros.decisions.solver import Constraint, solve
from robofollow_ros.decisions.tasks import ROLES, Family, Instance

ATOMIC_FAMILIES = 988
K2_FAMILIES = 82
K3_FAMILIES = 20
K2_TYPES: tuple[tuple[str, ...], ...] = (("E", "N"), ("E", "Q"), ("N", "Q"))
#: atomic families on object-centric anchors; the rest (736) go to the 64 action-sequence anchors
OBJECT_CENTRIC_ATOMIC = 252


@dataclass(frozen=True)
class Suite:
    seed: int
    anchors: tuple[Anchor, ...]
    families: tuple[Family, ...]

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


def generate_suite(seed: int) -> Suite:
    anchors = authored_anchors(seed)
    rng = random.Random(f"owda-suite-{seed}")
    oc = [a for a in anchors if a.kind == "object_centric"]
    comps = _pick_compositions(oc, rng)
    pools = {a.anchor_id: _interleaved(list(atomic_candidates(a)), rng) for a in anchors}
    chosen: dict[str, list[Candidate]] = {a.anchor_id: [] for a in anchors}
    for anchor_id, cand in comps:
        for c in cand.base:
            atom = _matching_atomic(pools[anchor_id], cand.scope, c)
            if atom not in chosen[anchor_id]:
                chosen[anchor_id].append(atom)
    _fill(chosen, pools, [a.anchor_id for a in oc], OBJECT_CENTRIC_ATOMIC)
    _fill(chosen, pools, [a.anchor_id for a in anchors if a.kind == "action_sequence"],
          ATOMIC_FAMILIES - OBJECT_CENTRIC_ATOMIC)
    by_id = {a.anchor_id: a for a in anchors}
    families: list[Family] = []
    atomic_ids: dict[tuple[str, tuple[str, ...], Constraint], str] = {}
    for anchor in anchors:
        for cand in chosen[anchor.anchor_id]:
            fid = f"A{len(atomic_ids) + 1:04d}"
            atomic_ids[(anchor.anchor_id, cand.scope, cand.base[0])] = fid
            families.append(_family(fid, "atomic", anchor, cand, rng, ()))
    for n, (anchor_id, cand) in enumerate(comps, start=1):
        constituents = tuple(atomic_ids[(anchor_id, cand.scope, c)] for c in cand.base)
        families.append(_family(f"C{n:03d}", "compositional", by_id[anchor_id], cand, rng, constituents))
    return Suite(seed, tuple(anchors), tuple(families))


def _interleaved(pool: list[Candidate], rng: random.Random) -> list[Candidate]:
    """Shuffle, then alternate operators so a partly used pool still covers N, E, Q (and T) evenly."""
    rng.shuffle(pool)
    by_op: dict[str, list[Candidate]] = {}
    for c in pool:
        by_op.setdefault(c.ops[0], []).append(c)
    lanes = [by_op[op] for op in sorted(by_op)]
    return [c for group in itertools.zip_longest(*lanes) for c in group if c is not None]


def _matching_atomic(pool: list[Candidate], scope: tuple[str, ...], c: Constraint) -> Candidate:
    return next(a for a in pool if a.scope == scope and a.base == (c,))


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
            raise OwdaError(f"only {count} valid atomic families for {total} wanted")


def _pick_compositions(anchors: list[Anchor], rng: random.Random) -> list[tuple[str, Candidate]]:
    streams: dict[tuple[str, tuple[str, ...]], Iterator[Candidate]] = {
        (a.anchor_id, ops): _composition_stream(a, ops, rng) for a in anchors for ops in (*K2_TYPES, ("E", "N", "Q"))}
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
            if got == before:
                raise OwdaError(f"only {got} valid compositions of {ops_list} for {wanted} wanted")
    return out


def _composition_stream(anchor: Anchor, ops: tuple[str, ...], rng: random.Random) -> Iterator[Candidate]:
    """Valid compositions of ``ops`` on ``anchor``, in a seeded order, each constituent a valid atomic seed."""
    atomic = list(atomic_candidates(anchor))
    combos: list[tuple[tuple[str, ...], tuple[tuple[Constraint, Constraint], ...]]] = []
    for scope in scopes(anchor):
        per_op = [[(a.base[0], a.changed) for a in atomic if a.scope == scope and a.ops == (op,)] for op in ops]
        combos += [(scope, combo) for combo in itertools.product(*per_op)]
    rng.shuffle(combos)
    for i, (scope, combo) in enumerate(combos):
        base = tuple(pair[0] for pair in combo)
        for shift in range(len(ops)):  # rotate which constraint the one-word change touches
            idx = (i + shift) % len(ops)
            cand = Candidate(scope, base, idx, combo[idx][1])
            if check_candidate(anchor, cand):
                yield cand
                break


def _family(fid: str, kind: str, anchor: Anchor, cand: Candidate, rng: random.Random,
            constituents: tuple[str, ...]) -> Family:
    a = rng.randrange(2)
    plan = ((cand.base_spec, a), (cand.base_spec, 1 - a), (cand.changed_spec, a), (cand.changed_spec, 1 - a))
    instances = tuple(Instance(f"{fid}/{i}", ROLES[i], realise(anchor, spec, t), spec, solve(anchor, spec))
                      for i, (spec, t) in enumerate(plan))
    return Family(fid, kind, anchor.anchor_id, cand.ops, cand.ops[cand.changed_index], instances, constituents)
