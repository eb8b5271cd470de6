"""Physical decision anchors: one fixed state of the rig and its executable decision space.

An anchor freezes what is on the table (identity, shape, colour, size, position of every object)
and which decisions are executable there. Object-centric anchors decide over candidate objects;
action-sequence anchors decide over verified candidate actions, whose preconditions say which action
must come earlier. Every task of the benchmark is solved against exactly one anchor, so the anchor is
the only place where names and positions live: instructions refer to it, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
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
    #: the object's name in the simulator / registry layout, where it differs from ``name``
    sim_name: str = ""
    #: (half size along x, half size along y, height) in metres, at yaw 0; a round object's halves are its
    #: radius. The world model checks that the gripper has room (``clearance``) wherever this is known;
    #: authored and captured anchors always carry it (from the layout).
    extent: tuple[float, float, float] | None = None

    @property
    def round(self) -> bool:
        """Its footprint is a disc (sphere, cylinder, bowl), not a box (cube, bar, label)."""
        return self.shape in ("sphere", "cylinder", "bowl")

    @property
    def source_name(self) -> str:
        """The name SAPIEN and perception know this object by."""
        return self.sim_name or self.name

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "shape": self.shape, "colour": self.colour, "size": self.size,
            "xy": [round(self.xy[0], 4), round(self.xy[1], 4)], "role": self.role,
        }
        if self.on_top_of:
            out["on_top_of"] = self.on_top_of
        if self.in_container:
            out["in_container"] = self.in_container
        if self.sim_name and self.sim_name != self.name:
            out["sim_name"] = self.sim_name
        if self.extent is not None:
            out["extent"] = [round(v, 4) for v in self.extent]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AnchorObject:
        xy = d.get("xy")
        if not isinstance(xy, list) or len(xy) != 2:
            raise AnchorError(f"object {d.get('name')!r}: field 'xy' must be [x, y], got {xy!r}")
        extent = d.get("extent")
        if extent is not None and (not isinstance(extent, list) or len(extent) != 3
                                   or not all(isinstance(v, (int, float)) and 0 <= v < 1 for v in extent)):
            raise AnchorError(f"object {d.get('name')!r}: field 'extent' must be [half x, half y, height] in metres, "
                              f"got {extent!r}")
        return cls(str(d["name"]), str(d["shape"]), str(d["colour"]), str(d.get("size", "")),
                   (float(xy[0]), float(xy[1])), str(d["role"]), d.get("on_top_of"), d.get("in_container"),
                   str(d.get("sim_name", "")), None if extent is None else (float(extent[0]), float(extent[1]),
                                                                            float(extent[2])))


@dataclass(frozen=True)
class CandidateAction:
    """A verified primitive over the anchor's objects, with its relations to the others.

    ``requires``: actions without which this one cannot run (they must come earlier, and a task that
    drops one of them while keeping this one is invalid). ``after``: actions that, when they are also
    done, must come earlier (this one would make them impossible), but that this one does not need.
    """

    action_id: str
    verb: str  # lift | push | place | stack
    obj: str
    target: str | None = None
    requires: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def predecessors(self) -> tuple[str, ...]:
        return self.requires + self.after

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.action_id, "verb": self.verb, "object": self.obj, "target": self.target,
                "requires": list(self.requires), "after": list(self.after)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CandidateAction:
        return cls(str(d["id"]), str(d["verb"]), str(d["object"]), d.get("target"), tuple(d.get("requires", ())),
                   tuple(d.get("after", ())))


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

    @cached_property
    def _by_name(self) -> dict[str, AnchorObject]:
        return {o.name: o for o in self.objects}

    def object(self, name: str) -> AnchorObject:
        try:
            return self._by_name[name]
        except KeyError:
            raise AnchorError(f"anchor {self.anchor_id}: no object {name!r}") from None

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
    shapes = {o.name: o.shape for o in anchor.objects}
    for o in anchor.objects:
        for rel in (o.on_top_of, o.in_container):
            if rel is not None and rel not in names:
                raise AnchorError(f"{where}: object {o.name!r} rests on unknown object {rel!r}")
        if o.in_container is not None and shapes[o.in_container] != "bowl":
            raise AnchorError(f"{where}: object {o.name!r} is inside {o.in_container!r}, which is not a bowl")
        if o.on_top_of is not None and o.in_container is not None:
            raise AnchorError(f"{where}: object {o.name!r} cannot rest on {o.on_top_of!r} and be inside "
                              f"{o.in_container!r}")
        if o.colour not in COLOURS:
            raise AnchorError(f"{where}: object {o.name!r} has colour {o.colour!r}, expected one of {COLOURS}")
    _check_supports(anchor)
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
    subjects = [a.obj for a in anchor.actions]
    if len(set(subjects)) != len(subjects):  # the solver reads "touches" off the anchor's state: one move each
        raise AnchorError(f"{where}: each object may be moved by at most one candidate action, got {subjects}")
    for a in anchor.actions:
        if a.verb not in VERBS:
            raise AnchorError(f"{where}: action {a.action_id!r} has verb {a.verb!r}, expected one of {VERBS}")
        for name in (a.obj, a.target):
            if name is not None and name not in names:
                raise AnchorError(f"{where}: action {a.action_id!r} names unknown object {name!r}")
        if (a.target is None) != (a.verb == "lift") or a.target == a.obj:
            raise AnchorError(f"{where}: action {a.action_id!r}: lift takes no target, the others one other object")
        if a.verb == "place" and a.target is not None and shapes[a.target] not in ("bowl", "label"):
            raise AnchorError(f"{where}: action {a.action_id!r} places into {a.target!r}, not a bowl or label")
        for req in a.predecessors:
            if req not in ids or req == a.action_id:
                raise AnchorError(f"{where}: action {a.action_id!r} is related to unknown action {req!r}")
        if set(a.requires) & set(a.after):
            raise AnchorError(f"{where}: action {a.action_id!r} lists {sorted(set(a.requires) & set(a.after))} "
                              "both as required and as merely earlier")
    _check_acyclic(anchor)


def _check_supports(anchor: Anchor) -> None:
    for o in anchor.objects:
        seen = {o.name}
        below = o.on_top_of
        while below is not None:
            if below in seen:
                raise AnchorError(f"anchor {anchor.anchor_id}: objects rest on each other in a loop at {o.name!r}")
            seen.add(below)
            below = anchor.object(below).on_top_of


def _check_acyclic(anchor: Anchor) -> None:
    done: set[str] = set()
    pending = {a.action_id: set(a.predecessors) for a in anchor.actions}
    while pending:
        ready = [k for k, reqs in pending.items() if reqs <= done]
        if not ready:
            raise AnchorError(f"anchor {anchor.anchor_id}: preconditions form a cycle among {sorted(pending)}")
        for k in ready:
            done.add(k)
            del pending[k]
