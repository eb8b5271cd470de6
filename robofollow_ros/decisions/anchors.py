"""Physical decision anchors: one fixed state of the rig and its executable decision space.

An anchor freezes what is on the table (identity, shape, colour, size, position of every object)
and which decisions are executable there. Object-centric anchors decide over candidate objects;
action-sequence anchors decide over verified candidate actions, whose preconditions say which action
must come earlier. Every task of the benchmark is solved against exactly one anchor, so the anchor is
the only place where names and positions live: instructions refer to it, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from robofollow_ros.decisions.errors import AnchorError

AnchorKind = Literal["object_centric", "action_sequence"]
ANCHOR_KINDS: tuple[AnchorKind, ...] = ("object_centric", "action_sequence")
VERBS = ("lift", "push", "place", "stack")
COLOURS = ("red", "yellow", "green", "blue")
SHAPE_NOUNS = {"sphere": "sphere", "cube": "cube", "cylinder": "cylinder", "box": "bar", "bowl": "bowl"}


@dataclass(frozen=True)
class AnchorObject:
    """One thing on the table, with the attributes instructions may use to refer to it."""

    name: str
    shape: str  # the noun used in language: sphere, cube, cylinder, bar, bowl, label
    colour: str
    size: str  # small | large | "" when the scene has no size contrast
    xy: tuple[float, float]
    role: str  # object (a candidate) | bowl | label
    on_top_of: str | None = None
    in_container: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "shape": self.shape, "colour": self.colour, "size": self.size,
            "xy": [round(self.xy[0], 4), round(self.xy[1], 4)], "role": self.role,
        }
        if self.on_top_of:
            out["on_top_of"] = self.on_top_of
        if self.in_container:
            out["in_container"] = self.in_container
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnchorObject:
        xy = d.get("xy")
        if not isinstance(xy, list) or len(xy) != 2:
            raise AnchorError(f"object {d.get('name')!r}: field 'xy' must be [x, y], got {xy!r}")
        return cls(str(d["name"]), str(d["shape"]), str(d["colour"]), str(d.get("size", "")),
                   (float(xy[0]), float(xy[1])), str(d["role"]), d.get("on_top_of"), d.get("in_container"))


@dataclass(frozen=True)
class CandidateAction:
    """A verified primitive over the anchor's objects; ``requires`` lists actions that must come first."""

    action_id: str
    verb: str  # lift | push | place | stack
    obj: str
    target: str | None = None
    requires: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.action_id, "verb": self.verb, "object": self.obj, "target": self.target,
                "requires": list(self.requires)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CandidateAction:
        return cls(str(d["id"]), str(d["verb"]), str(d["object"]), d.get("target"), tuple(d.get("requires", ())))


@dataclass(frozen=True, eq=False)
class Anchor:
    """One physical state and its candidate decision space, with where it came from.

    Compared and hashed by identity (``eq=False``): caches of referring phrases key on the object.
    """

    anchor_id: str
    kind: AnchorKind
    scene: str
    objects: tuple[AnchorObject, ...]
    actions: tuple[CandidateAction, ...] = ()
    #: {"source": "sim_layout", "layout", "seed"} or {"source": "sim_ground_truth"|"rig_capture", "time", ...}
    provenance: dict[str, Any] = field(default_factory=dict)

    def object(self, name: str) -> AnchorObject:
        for o in self.objects:
            if o.name == name:
                return o
        raise AnchorError(f"anchor {self.anchor_id}: no object {name!r}")

    def action(self, action_id: str) -> CandidateAction:
        for a in self.actions:
            if a.action_id == action_id:
                return a
        raise AnchorError(f"anchor {self.anchor_id}: no action {action_id!r}")

    @property
    def candidate_objects(self) -> tuple[AnchorObject, ...]:
        return tuple(o for o in self.objects if o.role == "object")

    @property
    def candidate_ids(self) -> tuple[str, ...]:
        """The decision space: object names (object-centric) or action ids (action-sequence), catalog order."""
        if self.kind == "object_centric":
            return tuple(o.name for o in self.candidate_objects)
        return tuple(a.action_id for a in self.actions)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.anchor_id, "kind": self.kind, "scene": self.scene,
                "objects": [o.to_dict() for o in self.objects],
                "actions": [a.to_dict() for a in self.actions], "provenance": dict(self.provenance)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Anchor:
        try:
            kind = d["kind"]
            if kind not in ANCHOR_KINDS:
                raise AnchorError(f"anchor {d.get('id')!r}: field 'kind' must be one of {ANCHOR_KINDS}, got {kind!r}")
            anchor = cls(str(d["id"]), kind, str(d["scene"]),
                         tuple(AnchorObject.from_dict(o) for o in d["objects"]),
                         tuple(CandidateAction.from_dict(a) for a in d.get("actions", ())),
                         dict(d.get("provenance", {})))
        except KeyError as exc:
            raise AnchorError(f"anchor {d.get('id')!r}: missing field {exc.args[0]!r}") from None
        check_anchor(anchor)
        return anchor


def check_anchor(anchor: Anchor) -> None:
    """Reject an anchor whose catalog is inconsistent (the first check of the benchmark's validation)."""
    where = f"anchor {anchor.anchor_id}"
    names = [o.name for o in anchor.objects]
    if len(set(names)) != len(names):
        raise AnchorError(f"{where}: duplicate object names in {names}")
    for o in anchor.objects:
        for rel in (o.on_top_of, o.in_container):
            if rel is not None and rel not in names:
                raise AnchorError(f"{where}: object {o.name!r} rests on unknown object {rel!r}")
        if o.colour not in COLOURS:
            raise AnchorError(f"{where}: object {o.name!r} has colour {o.colour!r}, expected one of {COLOURS}")
    if not anchor.candidate_objects:
        raise AnchorError(f"{where}: no candidate objects")
    if "source" not in anchor.provenance:
        raise AnchorError(f"{where}: provenance needs a 'source'")
    if anchor.kind == "object_centric":
        if anchor.actions:
            raise AnchorError(f"{where}: an object-centric anchor has no candidate actions")
        return
    ids = [a.action_id for a in anchor.actions]
    if len(ids) < 3 or len(set(ids)) != len(ids):
        raise AnchorError(f"{where}: needs at least 3 distinct candidate actions, got {ids}")
    for a in anchor.actions:
        if a.verb not in VERBS:
            raise AnchorError(f"{where}: action {a.action_id!r} has verb {a.verb!r}, expected one of {VERBS}")
        for name in (a.obj, a.target):
            if name is not None and name not in names:
                raise AnchorError(f"{where}: action {a.action_id!r} names unknown object {name!r}")
        for req in a.requires:
            if req not in ids or ids.index(req) == ids.index(a.action_id):
                raise AnchorError(f"{where}: action {a.action_id!r} requires unknown action {req!r}")
    _check_acyclic(anchor)


def _check_acyclic(anchor: Anchor) -> None:
    done: set[str] = set()
    pending = {a.action_id: set(a.requires) for a in anchor.actions}
    while pending:
        ready = [k for k, reqs in pending.items() if reqs <= done]
        if not ready:
            raise AnchorError(f"anchor {anchor.anchor_id}: preconditions form a cycle among {sorted(pending)}")
        for k in ready:
            done.add(k)
            del pending[k]
