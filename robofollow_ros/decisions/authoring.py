"""Anchors authored from this rig's RoboFollow scenes.

Object ids are built from what the object *is* (size, colour, shape, and a neutral number where two
look alike: ``yellow_cube_2``), never from where it happens to stand, so no id can contradict a
position; the registry's name is kept as ``sim_name`` for SAPIEN and perception.

Every anchor is a different physical state. Object-centric anchors take the registry's distinct
layouts (the registry lists three scene-4 layouts twice under two keys; each counts once).
Action-sequence anchors rearrange a layout: the free objects on the table trade their nominal spots
(seeded), the way the registry's own layout variants differ, so the 64 states are distinct from each
other and from the object-centric ones. Both are jittered by a seed, as the simulator places them.
Every anchor leaves the gripper room: each candidate with nothing on it can be grasped top-down without
the open fingers or the palm landing on a neighbour (``world.cramped``); a rearrangement that puts a
large cube where the fingers would come down on a bowl's rim is not used.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.decisions.anchors import COLOURS, SHAPE_NOUNS, Anchor, AnchorObject, CandidateAction, check_anchor
from robofollow_ros.decisions.catalog import draw_actions, incomplete_order, with_relations
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.world import WorldState, cramped

N_OBJECT_CENTRIC = 21
N_ACTION_SEQUENCE = 64
#: An action catalog must support this many distinct atomic families (the suite needs 736 over 64 anchors,
#: 11.5 on average); a poorer one (say four lifts) is never used.
MIN_FAMILIES_PER_ACTION_ANCHOR = 8
#: arrangements (each with its own catalog) tried per action-sequence anchor; the richest is kept
ARRANGEMENT_TRIES = 8
#: seeded jitters tried per object-centric anchor until one leaves the gripper room (``world.cramped``)
JITTER_TRIES = 10


def _attributes(spec: ObjectSpec) -> tuple[str, str, str]:
    tokens = spec.name.split("_")
    colour = next((t for t in tokens if t in COLOURS), "")
    if not colour:  # fall back to the nearest named colour of the rendered RGB
        palette = {"red": (1, 0, 0), "yellow": (1, 1, 0), "green": (0, 1, 0), "blue": (0, 0, 1)}
        colour = min(palette, key=lambda c: sum((a - b) ** 2 for a, b in zip(palette[c], spec.color_rgb, strict=True)))
    size = next((t for t in tokens if t in ("small", "large")), "")
    shape = "label" if spec.role == "label" else SHAPE_NOUNS[spec.shape]
    return colour, shape, size


def neutral_ids(layout: Layout) -> dict[str, str]:
    """registry name -> id from size, colour and shape, numbered in layout order where two look alike."""
    looks = {o.name: "_".join(t for t in (_attributes(o)[2], _attributes(o)[0], _attributes(o)[1]) if t)
             for o in layout.objects}
    counts: dict[str, int] = {}
    for v in looks.values():
        counts[v] = counts.get(v, 0) + 1
    seen: dict[str, int] = {}
    out = {}
    for o in layout.objects:
        base = looks[o.name]
        if counts[base] > 1:
            seen[base] = seen.get(base, 0) + 1
            out[o.name] = f"{base}_{seen[base]}"
        else:
            out[o.name] = base
    return out


def extent_of(spec: ObjectSpec) -> tuple[float, float, float]:
    """(half x, half y, height) of a layout object at yaw 0: its footprint and how tall it stands."""
    from robofollow_ros.robot.bowl import BowlGeometry

    if spec.shape == "bowl":
        bowl = BowlGeometry(spec.scale)
        return bowl.outer_radius, bowl.outer_radius, bowl.height
    if spec.shape == "box":
        return spec.size[0], spec.size[1], 2 * spec.size[2]
    return spec.size[0], spec.size[0], 2 * spec.half_height


def objects_at(layout: Layout, positions: Mapping[str, tuple[float, float]]) -> tuple[AnchorObject, ...]:
    """The layout's objects at ``positions`` (keyed by registry name), with neutral ids and their extents.

    Positions are kept to the millimetre, as the prompt states them: the world model then decides on
    the numbers a model is given (seed 0 once put a push's end 0.07005 m from a neighbour, 0.0699 m by
    the prompt's numbers, with the clearance at 0.07 m)."""
    ids = neutral_ids(layout)
    out = []
    for spec in layout.objects:
        colour, shape, size = _attributes(spec)
        x, y = positions[spec.name]
        xy = (round(float(x), 3), round(float(y), 3))
        out.append(AnchorObject(ids[spec.name], shape, colour, size, xy, spec.role,
                                ids.get(spec.on_top_of) if spec.on_top_of else None,
                                ids.get(spec.in_container) if spec.in_container else None, spec.name,
                                extent_of(spec)))
    return tuple(out)


def physical_key(layout: Layout) -> frozenset[tuple[Any, ...]]:
    """What an observer sees at the nominal positions: look-alike objects are interchangeable."""
    def look(name: str | None) -> tuple[str, ...]:
        return () if name is None else _attributes(layout.object(name))

    return frozenset((*_attributes(o), o.role, round(o.nominal_xy[0], 3), round(o.nominal_xy[1], 3),
                      look(o.on_top_of), look(o.in_container)) for o in layout.objects)


def distinct_layouts() -> list[Layout]:
    from robofollow_ros.benchmark import default_registry

    reg = default_registry()
    out: list[Layout] = []
    seen: set[frozenset[tuple[Any, ...]]] = set()
    for scene in sorted(reg.layouts):
        for key in sorted(reg.layouts[scene]):
            layout = reg.layouts[scene][key]
            if physical_key(layout) not in seen:
                seen.add(physical_key(layout))
                out.append(layout)
    return out


def free_objects(layout: Layout) -> list[ObjectSpec]:
    """Candidates standing on the table by themselves: they may trade spots (what rests on them moves along)."""
    return [o for o in layout.objects if o.role == "object" and o.on_top_of is None and o.in_container is None]


def rearranged(layout: Layout, spots: Mapping[str, tuple[float, float]]) -> Layout:
    """``layout`` with some free objects at other nominal spots (registry name -> (x, y))."""
    return replace(layout, objects=tuple(replace(o, nominal_xy=(float(spots[o.name][0]), float(spots[o.name][1])))
                                         if o.name in spots else o for o in layout.objects))


def anchor_layout(anchor: Anchor, registry_layout: Layout) -> Layout:
    """The layout an authored anchor was built on, rearranged as its provenance says."""
    spots = anchor.provenance.get("spots") or {}
    return rearranged(registry_layout, {k: (float(v[0]), float(v[1])) for k, v in spots.items()})


def _provenance(layout: Layout, seed: int, spots: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    prov: dict[str, Any] = {"source": "sim_layout", "scene": layout.scene, "layout": layout.key, "seed": seed}
    if spots:
        prov["spots"] = {k: [round(v[0], 4), round(v[1], 4)] for k, v in spots.items()}
    return prov


def object_centric_anchor(anchor_id: str, layout: Layout, rng: random.Random) -> Anchor:
    """The layout at the first of ``JITTER_TRIES`` seeded jitters that leaves the gripper room everywhere.

    The registry's jitter can push an object against a neighbour (Scene 2.5's small cylinder 1 cm to the
    right puts a finger on the large bowl's rim); such a draw is no workable state, so the next is used.
    """
    for _ in range(JITTER_TRIES):
        seed = rng.randrange(100_000)
        anchor = Anchor(anchor_id, "object_centric", layout.scene, objects_at(layout, layout.jittered_xy(seed)),
                        provenance=_provenance(layout, seed))
        check_anchor(anchor)
        if not cramped(anchor):
            return anchor
    raise OwdaError(f"anchor {anchor_id}: {layout.scene}/{layout.key} leaves no room for the gripper at "
                    f"{JITTER_TRIES} seeded jitters: {cramped(anchor)[0]}")


def build_actions(objects: tuple[AnchorObject, ...], rng: random.Random,
                  tries: int = 20) -> tuple[CandidateAction, ...]:
    """A catalog whose relations are complete in the world (see ``catalog``); empty if none was found."""
    probe = Anchor("probe", "action_sequence", "", objects, provenance={"source": "probe"})
    for _ in range(tries):
        actions = with_relations(draw_actions(objects, rng), objects)
        if len(actions) >= 3 and incomplete_order(WorldState.initial(probe), actions) is None:
            return actions
    return ()


def action_sequence_anchor(anchor_id: str, layout: Layout, seed: int, rng: random.Random,
                           spots: Mapping[str, tuple[float, float]] | None = None) -> Anchor:
    placed = rearranged(layout, spots or {})
    objects = objects_at(placed, placed.jittered_xy(seed))
    return Anchor(anchor_id, "action_sequence", layout.scene, objects, build_actions(objects, rng),
                  provenance=_provenance(layout, seed, spots))


def authored_anchors(seed: int, progress: Callable[[str, int, int], None] | None = None,
                     until: str | None = None) -> list[Anchor]:
    """The default 85 anchors (21 object-centric, 64 action-sequence), deterministic for ``seed``.

    Most of a suite's generation time goes here (the action-sequence anchors each try many arrangements):
    ``progress("anchors", done, 85)``, when given, is called after each anchor. ``until``: stop once the
    anchor of that id is built (one random stream draws them in order, so every anchor up to it is the one
    the whole suite has; ``owda execute --anchor`` needs one, not all 85)."""
    layouts = distinct_layouts()
    rng = random.Random(f"owda-anchors-{seed}")
    oc_ids, as_ids = _anchor_ids(layouts, rng)
    anchors: list[Anchor] = []
    for anchor_id, j in oc_ids:
        anchors.append(object_centric_anchor(anchor_id, layouts[j], rng))
        if anchor_id == until:
            return anchors
    total = N_OBJECT_CENTRIC + N_ACTION_SEQUENCE
    if progress is not None:
        progress("anchors", len(anchors), total)
    seen = {physical_key(layout) for layout in layouts}
    for anchor_id, j in as_ids:
        anchors.append(_rich_action_anchor(anchor_id, layouts[j], rng, seen, anchors))
        if progress is not None:
            progress("anchors", len(anchors), total)
        if anchor_id == until:
            break
    return anchors


def authored_anchor_ids(seed: int) -> list[str]:
    """The ids of :func:`authored_anchors` ``(seed)``, in order, without building an anchor (milliseconds)."""
    oc_ids, as_ids = _anchor_ids(distinct_layouts(), random.Random(f"owda-anchors-{seed}"))
    return [anchor_id for anchor_id, _j in (*oc_ids, *as_ids)]


def _anchor_ids(layouts: list[Layout], rng: random.Random) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(id, layout index) of the object-centric and the action-sequence anchors; draws the picks from ``rng``
    (the stream's first draw, so the anchors built after it are those of the whole suite)."""
    if len(layouts) < N_OBJECT_CENTRIC:
        raise OwdaError(f"the registry has {len(layouts)} distinct layouts, fewer than {N_OBJECT_CENTRIC}")
    picks = sorted(rng.sample(range(len(layouts)), N_OBJECT_CENTRIC))
    oc_ids = [(f"oc{i + 1:02d}_{layouts[j].scene}_{layouts[j].key}", j) for i, j in enumerate(picks)]
    as_ids = [(f"as{n:02d}_{layouts[(n - 1) % len(layouts)].scene}", (n - 1) % len(layouts))
              for n in range(1, N_ACTION_SEQUENCE + 1)]
    return oc_ids, as_ids


#: two anchors whose look-alike objects all stand within this of each other are one physical state
SAME_STATE_M = 0.04


def same_state(a: Anchor, b: Anchor, tol: float = SAME_STATE_M) -> bool:
    """Would an observer take ``a`` and ``b`` for one table: the same looks and supports, spots within ``tol``.

    Needed beside :func:`physical_key` (exact nominal spots): the registry's Scene 4 variants put the
    same objects a few millimetres apart, so two variants rearranged alike are different keys but one
    state (seed 0 drew such a pair once the cramped arrangements were left out)."""
    def look(anchor: Anchor, o: AnchorObject) -> tuple[Any, ...]:
        def of(name: str | None) -> tuple[str, str] | None:
            return None if name is None else (anchor.object(name).colour, anchor.object(name).shape)
        return (o.colour, o.shape, o.size, o.role, of(o.on_top_of), of(o.in_container))

    pool = [(look(b, o), o.xy) for o in b.objects]
    if sorted(p[0] for p in pool) != sorted(look(a, o) for o in a.objects):
        return False
    return all(any(lk == look(a, o) and math.dist(xy, o.xy) < tol for lk, xy in pool) for o in a.objects)


def _rich_action_anchor(anchor_id: str, layout: Layout, rng: random.Random,
                        seen: set[frozenset[tuple[Any, ...]]], earlier: list[Anchor]) -> Anchor:
    """The richest of a few new arrangements with complete catalogs (most distinct atomic families)."""
    from robofollow_ros.decisions.candidates import distinct_atomic_pairs

    free = free_objects(layout)
    best: tuple[int, Anchor, frozenset[tuple[Any, ...]]] | None = None
    tried = 0
    for _ in range(200):
        targets = rng.sample([o.nominal_xy for o in free], k=len(free))
        spots = {o.name: xy for o, xy in zip(free, targets, strict=True) if xy != o.nominal_xy}
        key = physical_key(rearranged(layout, spots))
        if key in seen:
            continue
        anchor = action_sequence_anchor(anchor_id, layout, rng.randrange(100_000), rng, spots)
        if len(anchor.actions) < 4 or cramped(anchor):  # a physical state leaves the gripper room everywhere
            continue
        if any(same_state(anchor, other) for other in earlier):
            continue
        check_anchor(anchor)
        n = len(distinct_atomic_pairs(anchor))
        if best is None or n > best[0]:
            best = (n, anchor, key)
        tried += 1
        if tried >= ARRANGEMENT_TRIES:
            break
    if best is None or best[0] < MIN_FAMILIES_PER_ACTION_ANCHOR:
        raise OwdaError(f"anchor {anchor_id}: no new arrangement of {layout.scene}/{layout.key} with "
                        f"{MIN_FAMILIES_PER_ACTION_ANCHOR} distinct families in 200 draws")
    seen.add(best[2])
    return best[1]
