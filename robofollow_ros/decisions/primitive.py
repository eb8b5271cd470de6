"""What executing a decision is made of: a :class:`Primitive` (one verb on one object) and the
:class:`StepResult` of running it.

Its own small module because both sides need it: ``execute`` turns a decision into primitives and
judges the results, ``sim_primitives`` runs each one in SAPIEN. Neither imports the other for these
types, so the light ``execute`` never pulls in the simulator until it actually runs a step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Primitive:
    verb: str
    obj: str
    target: str | None = None
    #: lift only: put the object down on a free spot of the table instead of back where it was
    set_aside: bool = False

    @property
    def label(self) -> str:
        return f"{self.verb}:{self.obj}" + (f"->{self.target}" if self.target else "") + (
            " (set aside)" if self.set_aside else "")


@dataclass(frozen=True)
class StepResult:
    label: str
    ok: bool
    detail: str
