"""Task families: a base instruction, its task-preserving rewrite and two task-changing rewrites.

Instances of a family, by position:
  0 ``base``                 template set a
  1 ``preserving``           template set b, same spec, same decision as 0
  2 ``changing``             template set a, one word changed, a different decision
  3 ``changing_preserving``  template set b with the same change; same decision as 2
So (0, 1) and (2, 3) are the task-preserving pairs (decision invariance) and (0, 2) and (1, 3) the
task-changing pairs (decision sensitivity). "Template set" means one wording of every sentence; the
rewrite's wording differs from the base's in every sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robofollow_ros.decisions.solver import TaskSpec

ROLES = ("base", "preserving", "changing", "changing_preserving")
PRESERVING_PAIRS = ((0, 1), (2, 3))
CHANGING_PAIRS = ((0, 2), (1, 3))
COMPOSITION_TYPES = ("E+N", "E+Q", "N+Q", "E+N+Q")


@dataclass(frozen=True)
class Instance:
    instance_id: str
    role: str
    text: str
    spec: TaskSpec
    decision: tuple[str, ...]
    #: compositional only: the matched atomic instances, one per constraint (same anchor, scope, constraint)
    matched: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.instance_id, "role": self.role, "text": self.text, "spec": self.spec.to_dict(),
               "decision": list(self.decision)}
        if self.matched:
            out["matched"] = list(self.matched)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Instance:
        return cls(str(d["id"]), str(d["role"]), str(d["text"]), TaskSpec.from_dict(d["spec"]), tuple(d["decision"]),
                   tuple(str(m) for m in d.get("matched", ())))


@dataclass(frozen=True)
class Family:
    """Four instances around one primary constraint (atomic) or one composition."""

    family_id: str
    kind: str  # atomic | compositional
    anchor_id: str
    ops: tuple[str, ...]  # ("E",) or ("E", "N") ...
    #: the changed constraint's op (task-changing rewrites touch this one only)
    changed_op: str
    instances: tuple[Instance, ...]
    #: compositional only: the matched atomic families, one per constituent operator
    constituents: tuple[str, ...] = ()

    @property
    def type(self) -> str:
        return "+".join(self.ops)

    @property
    def depth(self) -> int:
        return len(self.ops)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.family_id, "kind": self.kind, "anchor": self.anchor_id,
                               "ops": list(self.ops), "type": self.type, "changed_op": self.changed_op,
                               "instances": [i.to_dict() for i in self.instances]}
        if self.kind == "compositional":
            out["k"] = self.depth
            out["constituents"] = list(self.constituents)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Family:
        return cls(str(d["id"]), str(d["kind"]), str(d["anchor"]), tuple(d["ops"]), str(d["changed_op"]),
                   tuple(Instance.from_dict(i) for i in d["instances"]), tuple(d.get("constituents", ())))
