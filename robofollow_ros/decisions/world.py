"""The symbolic world state: what rests on what, what is inside what, and where each object is.

One model shared by the catalog builder, the solver, the validator and the SAPIEN execution check, so
a gold decision is proved executable by the same rules the simulator is later held to:

Action-sequence primitives (each needs its subject *clear*: nothing rests on it):
  lift X            X is lifted and put back where it was; the state does not change
  push X to Y       X and Y rest on the table, X is not a sphere (it would roll), X and Y are at least
                    ``PUSH_MIN_GAP_M`` apart; X slides ``push_travel`` metres towards Y and must end
                    ``PUSH_CLEARANCE_M`` from every other object
  place X in bowl B B holds nothing and X is not already in it; X ends inside B
  stack X on Y      (also "place X on a label") X and Y are not spheres, Y is clear and rests on the
                    table; X ends on Y
Object-centric decisions pick objects up and take them away: an object can be picked only when every
object resting on it has been picked already, and never out of a container the instruction forbids
touching.
Every grasp, release and push also needs room for the rig's gripper (``clearance``, ``gripper``): the open
fingers and the palm, coming straight down over the object (or over where it is set down), must not land on
another object, and a push's swept fingers and palm must clear everything but the pushed object. That is
where a push leaves its object beside its target: neither can be grasped there afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from robofollow_ros.decisions.anchors import Anchor, CandidateAction
from robofollow_ros.decisions.clearance import PUSH_BEHIND_M, Body, blockers, hand_at, push_sweep
from robofollow_ros.decisions.gripper import Gripper, active_gripper

#: "push X to Y" only where Y is this far from X, so the push makes visible progress without a collision
PUSH_MIN_GAP_M = 0.10
#: where a push leaves its object, every object but the target must be at least this far (centre to centre)
PUSH_CLEARANCE_M = 0.07


#: the oracle's push starts its fingers this far behind the object's back face (as measured in SAPIEN, the
#: stroke moves the object by the stroke less about this much)
PUSH_FINGER_GAP_M = 0.011
#: the bottom of an object inside a bowl: the bowl's floor, this far above the table
BOWL_FLOOR_M = 0.004


def push_stroke(gap: float) -> float:
    """The oracle's push stroke for an object ``gap`` metres from its target."""
    return min(max(gap - 0.05, 0.05), 0.07)


def push_travel(gap: float) -> float:
    """How far a push moves the object towards its target: the oracle's stroke less the finger gap."""
    return max(0.0, push_stroke(gap) - PUSH_FINGER_GAP_M)


@dataclass(frozen=True)
class Placement:
    xy: tuple[float, float]
    on: str | None = None  # the object or label it rests on; None = the table (or its container)
    inside: str | None = None  # the container it sits in


@dataclass(frozen=True)
class WorldState:
    """Where every object of one anchor is; ``taken`` objects have been picked up and carried away."""

    anchor: Anchor
    places: Mapping[str, Placement]
    taken: frozenset[str] = frozenset()
    #: objects a push has moved: they may have turned, so their footprint is the disc around them
    pushed: frozenset[str] = frozenset()
    #: the gripper that needs room: the active rig's, read when the first state of a world is made (the states
    #: ``after`` and ``take`` make carry it along)
    gripper: Gripper = field(default_factory=active_gripper, compare=False, repr=False)

    @classmethod
    def initial(cls, anchor: Anchor, gripper: Gripper | None = None) -> WorldState:
        """The anchor's own state; room is checked for ``gripper`` (default: the active rig's)."""
        places = {o.name: Placement(o.xy, o.on_top_of, o.in_container) for o in anchor.objects}
        return cls(anchor, places) if gripper is None else cls(anchor, places, gripper=gripper)

    def present(self) -> list[str]:
        return [o.name for o in self.anchor.objects if o.name not in self.taken]

    def resting_on(self, name: str) -> list[str]:
        """The objects that rest directly on ``name`` (not those inside it: see ``contents``)."""
        return [n for n in self.present() if self.places[n].on == name]

    def contents(self, bowl: str) -> list[str]:
        return [n for n in self.present() if self.places[n].inside == bowl]

    def on_table(self, name: str) -> bool:
        p = self.places[name]
        return p.on is None and p.inside is None

    def top(self, name: str) -> float:
        """Height of the object's top above the table."""
        p, o = self.places[name], self.anchor.object(name)
        below = self.top(p.on) if p.on is not None else (BOWL_FLOOR_M if p.inside is not None else 0.0)
        return below + (o.extent[2] if o.extent is not None else 0.0)

    def bodies(self, skip: Iterable[str]) -> list[Body]:
        """Every present object with a known extent, but those in ``skip``, as the gripper sees it."""
        skip = set(skip)
        return [body for body in self._bodies if body.name not in skip]

    @cached_property
    def _bodies(self) -> tuple[Body, ...]:
        """Every present object's body, once per state (a state never changes: ``after`` makes a new one; the OWDA
        generator asks a state for its bodies many times)."""
        out = []
        for n in self.present():
            o = self.anchor.object(n)
            if o.extent is None:
                continue
            body = Body(n, self.places[n].xy, (o.extent[0], o.extent[1]), o.round, self.top(n))
            out.append(body.as_disc() if n in self.pushed else body)
        return tuple(out)

    def hand_problems(self, x: str, at: str | None = None) -> list[str]:
        """Objects the gripper would land on grasping ``x`` where it is (``at`` None) or releasing it on/in ``at``."""
        o = self.anchor.object(x)
        if o.extent is None:
            return []
        if at is None:
            inside = self.places[x].inside
            xy, top, doing = self.places[x].xy, self.top(x), "grasping"
            skip = {x} if inside is None else {x, inside}
        else:
            bowl = self.anchor.object(at).shape == "bowl"
            xy, doing = self.places[at].xy, f"setting it down {'in' if bowl else 'on'} {at!r}"
            top, skip = self.top(at) + o.extent[2], {x}
        hits = blockers(hand_at(self.gripper, xy, o.extent[0], top), self.bodies(skip))
        return [f"the gripper would land on {', '.join(hits)} {doing} {x!r}"] if hits else []

    def push_problems(self, x: str, t: str) -> list[str]:
        """Objects the oracle's push of ``x`` towards ``t`` would sweep into (its fingers and palm)."""
        o = self.anchor.object(x)
        if o.extent is None:
            return []
        (x0, y0), (x1, y1) = self.places[x].xy, self.places[t].xy
        gap = math.hypot(x1 - x0, y1 - y0)
        u = ((x1 - x0) / gap, (y1 - y0) / gap)
        behind = (o.extent[0] * (abs(u[0]) + abs(u[1])) if o.shape == "cube" else o.extent[0]) + PUSH_BEHIND_M
        start = (x0 - u[0] * behind, y0 - u[1] * behind)
        hits = blockers(push_sweep(self.gripper, start, u, push_stroke(gap)), self.bodies({x}))
        return [f"the push would sweep the gripper into {', '.join(hits)}"] if hits else []

    def describe(self, name: str) -> str:
        p = self.places[name]
        if name in self.taken:
            return "taken away"
        where = f"on {p.on}" if p.on else (f"inside {p.inside}" if p.inside else "on the table")
        return f"{where} at ({p.xy[0]:+.3f}, {p.xy[1]:+.3f})"

    # ------------------------------------------------------------------------- action sequences
    def broken(self, action: CandidateAction) -> list[str]:
        """The preconditions of ``action`` that do not hold in this state (empty: it can run)."""
        a, x, t = self.anchor, action.obj, action.target
        out: list[str] = []
        if x in self.taken:
            return [f"{x!r} is no longer on the table"]
        out += [f"{y!r} rests on {x!r}" for y in self.resting_on(x)]
        out += self.hand_problems(x) if action.verb != "push" else []
        shape = a.object(x).shape
        if action.verb == "push":
            assert t is not None
            if not self.on_table(x):
                out.append(f"{x!r} does not rest on the table ({self.describe(x)})")
            if shape == "sphere":
                out.append(f"{x!r} is a sphere and would roll away")
            if not self.on_table(t):
                out.append(f"push target {t!r} does not rest on the table ({self.describe(t)})")
            gap = math.dist(self.places[x].xy, self.places[t].xy)
            if gap < PUSH_MIN_GAP_M:
                out.append(f"{x!r} is only {gap:.3f} m from {t!r} (a push needs {PUSH_MIN_GAP_M} m)")
            else:
                end = self.after(action).places[x].xy
                out += [f"the push would leave {x!r} {math.dist(end, self.places[n].xy):.3f} m from {n!r} "
                        f"(needs {PUSH_CLEARANCE_M} m)" for n in self.present() if n not in (x, t)
                        and self.anchor.object(n).role != "label"
                        and math.dist(end, self.places[n].xy) < PUSH_CLEARANCE_M]
                out += self.push_problems(x, t)
        elif action.verb in ("place", "stack"):
            assert t is not None
            if a.object(t).shape == "bowl":
                if self.contents(t):
                    out.append(f"bowl {t!r} is not empty (holds {self.contents(t)})")
                if self.places[x].inside == t:
                    out.append(f"{x!r} is already inside {t!r}")
            else:
                if shape == "sphere":
                    out.append(f"{x!r} is a sphere and would roll off {t!r}")
                if a.object(t).shape == "sphere":
                    out.append(f"{t!r} is a sphere: nothing stays on it")
                out += [f"{y!r} already rests on {t!r}" for y in self.resting_on(t)]
                if not self.on_table(t):
                    out.append(f"{t!r} does not rest on the table ({self.describe(t)})")
            out += self.hand_problems(x, at=t)
        return out

    def after(self, action: CandidateAction) -> WorldState:
        """The state once ``action`` has run (call ``broken`` first)."""
        x, t = action.obj, action.target
        places = dict(self.places)
        if action.verb == "push":
            assert t is not None
            (x0, y0), (x1, y1) = places[x].xy, places[t].xy
            gap = math.hypot(x1 - x0, y1 - y0)
            step = push_travel(gap) / gap
            places[x] = replace(places[x], xy=(x0 + (x1 - x0) * step, y0 + (y1 - y0) * step))
            return replace(self, places=places, pushed=self.pushed | {x})
        elif action.verb in ("place", "stack"):
            assert t is not None
            holder_is_bowl = self.anchor.object(t).shape == "bowl"
            places[x] = Placement(places[t].xy, None if holder_is_bowl else t, t if holder_is_bowl else None)
        return replace(self, places=places)

    def run(self, actions: Iterable[CandidateAction]) -> tuple[WorldState, int | None, list[str]]:
        """Run ``actions`` in order: (final state, index of the first that cannot run or None, its problems)."""
        state = self
        for i, action in enumerate(actions):
            problems = state.broken(action)
            if problems:
                return state, i, problems
            state = state.after(action)
        return state, None, []

    # --------------------------------------------------------------------------- object picking
    def pick_problems(self, name: str, forbidden: Iterable[str] = ()) -> list[str]:
        out = [f"{y!r}, which stays, rests on {name!r}" for y in self.resting_on(name)]
        inside = self.places[name].inside
        if inside is not None and inside in set(forbidden):
            out.append(f"{name!r} sits inside {inside!r}, which the instruction forbids touching")
        return out + self.hand_problems(name)

    def take(self, name: str) -> WorldState:
        return replace(self, taken=self.taken | {name})


def cramped(anchor: Anchor) -> list[str]:
    """Why the anchor is no physical state to work in: a candidate with nothing on it that no gripper can
    reach without landing on a neighbour (empty: every such object leaves room for a top-down grasp)."""
    state = WorldState.initial(anchor)
    return [p for o in anchor.candidate_objects if not state.resting_on(o.name) for p in state.hand_problems(o.name)]


def pick_order(anchor: Anchor, names: Iterable[str]) -> list[str]:
    """Top-down: an object resting on another is picked before the one under it; otherwise catalog order."""
    def height(name: str) -> int:
        below = anchor.object(name).on_top_of
        return 0 if below is None else 1 + height(below)

    index = {o.name: i for i, o in enumerate(anchor.objects)}
    return sorted(names, key=lambda n: (-height(n), index[n]))


def pick_problems(anchor: Anchor, chosen: Iterable[str], forbidden: Iterable[str] = ()) -> tuple[str, list[str]] | None:
    """(object, problems) for the first pick of ``chosen`` that cannot be done top-down, or None."""
    state = WorldState.initial(anchor)
    forbidden = tuple(forbidden)
    for name in pick_order(anchor, chosen):
        problems = state.pick_problems(name, forbidden)
        if problems:
            return name, problems
        state = state.take(name)
    return None
