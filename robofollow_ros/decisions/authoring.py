"""Anchors authored from this rig's RoboFollow scenes.

Object-centric anchors take a layout's objects at the positions one seed's jitter gives them.
Action-sequence anchors add a catalog of pick/place/push/stack primitives over those objects, each
object moved by at most one action, with preconditions that come from the physical state: an object
under another cannot move before the one on top has; a bowl must be emptied before something is put
in it; a stack target's own move must happen before something is stacked on it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.decisions.anchors import COLOURS, SHAPE_NOUNS, Anchor, AnchorObject, CandidateAction, check_anchor
from robofollow_ros.decisions.errors import OwdaError

N_OBJECT_CENTRIC = 21
N_ACTION_SEQUENCE = 64
#: An action catalog must support this many distinct atomic families (the suite needs 736 over 64 anchors);
#: a poorer random catalog (say four lifts) is redrawn.
MIN_FAMILIES_PER_ACTION_ANCHOR = 12
#: "push X to Y" only where Y is this far from X, so the push makes visible progress without a collision
PUSH_MIN_GAP_M = 0.10


def anchor_object(spec: ObjectSpec, xy: tuple[float, float]) -> AnchorObject:
    """Attributes language can use, read from the registry's object record."""
    tokens = spec.name.split("_")
    colour = next((t for t in tokens if t in COLOURS), "")
    if not colour:  # fall back to the nearest named colour of the rendered RGB
        palette = {"red": (1, 0, 0), "yellow": (1, 1, 0), "green": (0, 1, 0), "blue": (0, 0, 1)}
        colour = min(palette, key=lambda c: sum((a - b) ** 2 for a, b in zip(palette[c], spec.color_rgb, strict=True)))
    size = next((t for t in tokens if t in ("small", "large")), "")
    shape = "label" if spec.role == "label" else SHAPE_NOUNS[spec.shape]
    return AnchorObject(spec.name, shape, colour, size, (float(xy[0]), float(xy[1])), spec.role,
                        spec.on_top_of, spec.in_container)


def objects_at(layout: Layout, positions: Mapping[str, tuple[float, float]]) -> tuple[AnchorObject, ...]:
    return tuple(anchor_object(o, positions[o.name]) for o in layout.objects)


def object_centric_anchor(anchor_id: str, layout: Layout, seed: int) -> Anchor:
    anchor = Anchor(anchor_id, "object_centric", layout.scene, objects_at(layout, layout.jittered_xy(seed)),
                    provenance={"source": "sim_layout", "scene": layout.scene, "layout": layout.key, "seed": seed})
    check_anchor(anchor)
    return anchor


def action_sequence_anchor(anchor_id: str, layout: Layout, seed: int, rng: random.Random) -> Anchor:
    objects = objects_at(layout, layout.jittered_xy(seed))
    anchor = Anchor(anchor_id, "action_sequence", layout.scene, objects, build_actions(objects, rng),
                    provenance={"source": "sim_layout", "scene": layout.scene, "layout": layout.key, "seed": seed})
    if len(anchor.actions) >= 3:
        check_anchor(anchor)
    return anchor


def build_actions(objects: tuple[AnchorObject, ...], rng: random.Random, n_max: int = 6) -> tuple[CandidateAction, ...]:
    """A random, physically consistent catalog of up to ``n_max`` primitives (at least 4)."""
    movable = [o for o in objects if o.role == "object"]
    holders = [o for o in objects if o.role in ("bowl", "label")]
    subjects = rng.sample(movable, k=len(movable))
    # an object with something on top of it may only move when that object moves first
    on_top = {o.on_top_of: o.name for o in objects if o.on_top_of}
    chosen: list[CandidateAction] = []
    used_targets: set[str] = set()
    subject_names = {o.name for o in subjects[:n_max]}
    for o in subjects[:n_max]:
        if o.name in on_top and on_top[o.name] not in subject_names:
            continue
        verbs = ["lift", "push", "stack"] + (["place"] if holders else [])
        verb = rng.choice(verbs)
        target = _pick_target(verb, o, objects, holders, used_targets, on_top, rng)
        if verb != "lift" and target is None:
            verb = "lift"
        if target is not None and verb in ("place", "stack"):
            used_targets.add(target)
        chosen.append(CandidateAction(_action_id(verb, o.name, target), verb, o.name, target))
    return _with_preconditions(chosen, objects)


def _pick_target(verb: str, obj: AnchorObject, objects: tuple[AnchorObject, ...], holders: list[AnchorObject],
                 used: set[str], on_top: dict[str, str], rng: random.Random) -> str | None:
    if verb == "lift":
        return None
    if verb == "push" and (obj.on_top_of or obj.in_container or obj.name in on_top or obj.shape == "sphere"):
        return None  # push only what rests on the table, carries nothing and does not roll away
    if verb == "place":  # into another holder than the one it already sits in
        options = [h.name for h in holders if h.name not in used and h.name != obj.in_container]
    elif verb == "stack" and obj.shape == "sphere":
        return None  # a sphere rolls off whatever it is stacked on
    else:  # stack only onto a non-sphere that rests on the table and carries nothing yet
        options = [o.name for o in objects if o.role == "object" and o.name != obj.name
                   and o.on_top_of != obj.name and obj.on_top_of != o.name
                   and (verb != "push" or math.dist(o.xy, obj.xy) >= PUSH_MIN_GAP_M)
                   and (verb == "push" or (o.name not in used and o.name not in on_top and o.shape != "sphere"
                                           and o.in_container is None and o.on_top_of is None))]
    return rng.choice(options) if options else None


def _action_id(verb: str, obj: str, target: str | None) -> str:
    return f"{verb}:{obj}" + (f"->{target}" if target else "")


def _with_preconditions(actions: list[CandidateAction],
                        objects: tuple[AnchorObject, ...]) -> tuple[CandidateAction, ...]:
    by_subject = {a.obj: a.action_id for a in actions}
    out = []
    for a in actions:
        reqs: list[str] = []
        for o in objects:
            if o.on_top_of == a.obj and o.name in by_subject:  # unstack the top object first
                reqs.append(by_subject[o.name])
            if a.verb == "place" and o.in_container == a.target and o.name in by_subject:  # empty the bowl first
                reqs.append(by_subject[o.name])
        if a.verb == "stack" and a.target in by_subject:  # the base moves before anything goes onto it
            reqs.append(by_subject[a.target])
        out.append(CandidateAction(a.action_id, a.verb, a.obj, a.target, tuple(dict.fromkeys(r for r in reqs
                                                                                               if r != a.action_id))))
    return _drop_unreachable(out)


def _drop_unreachable(actions: list[CandidateAction]) -> tuple[CandidateAction, ...]:
    """Remove actions caught in a precondition cycle (stack a on b and b on a), keeping the rest."""
    kept = list(actions)
    while True:
        done: set[str] = set()
        pending = {a.action_id: set(a.requires) for a in kept}
        progress = True
        while progress:
            progress = False
            for k, reqs in list(pending.items()):
                if reqs <= done:
                    done.add(k)
                    del pending[k]
                    progress = True
        if not pending:
            return tuple(kept)
        drop = sorted(pending)[0]
        kept = [CandidateAction(a.action_id, a.verb, a.obj, a.target, tuple(r for r in a.requires if r != drop))
                for a in kept if a.action_id != drop]


def authored_anchors(seed: int) -> list[Anchor]:
    """The default 85 anchors (21 object-centric, 64 action-sequence), deterministic for ``seed``."""
    from robofollow_ros.benchmark import default_registry

    reg = default_registry()
    layouts = [reg.layouts[scene][key] for scene in sorted(reg.layouts) for key in sorted(reg.layouts[scene])]
    rng = random.Random(f"owda-anchors-{seed}")
    picks = sorted(rng.sample(range(len(layouts)), N_OBJECT_CENTRIC))
    anchors = [object_centric_anchor(f"oc{i + 1:02d}_{layouts[j].scene}_{layouts[j].key}", layouts[j],
                                     rng.randrange(100_000)) for i, j in enumerate(picks)]
    for n in range(1, N_ACTION_SEQUENCE + 1):
        layout = layouts[(n - 1) % len(layouts)]
        anchors.append(_rich_action_anchor(f"as{n:02d}_{layout.scene}_{layout.key}", layout, rng))
    return anchors


def _rich_action_anchor(anchor_id: str, layout: Layout, rng: random.Random) -> Anchor:
    from robofollow_ros.decisions.candidates import atomic_candidates

    for _ in range(50):
        anchor = action_sequence_anchor(anchor_id, layout, rng.randrange(100_000), rng)
        if len(anchor.actions) >= 4 and sum(1 for _ in atomic_candidates(anchor)) >= MIN_FAMILIES_PER_ACTION_ANCHOR:
            return anchor
    raise OwdaError(f"anchor {anchor_id}: no action catalog with {MIN_FAMILIES_PER_ACTION_ANCHOR} families in 50 draws")
