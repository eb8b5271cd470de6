"""Run OWDA primitives in SAPIEN with the oracle's planner (``robofollow_ros.policy.expert``).

Each primitive becomes one expert task (a ``TaskMeaning``) planned closed-loop from the poses the
simulator reports, so the same planner that runs the RoboFollow oracle moves the arms here. Primitives
name objects by their anchor ids; the runner maps them to the simulator's names.
  lift X           grasp, verify the lift, put X back where it was (on the table spot, on its base
                   with the stacking placement, or in its bowl) and go home; with ``set_aside`` put it
                   down on the free table spot farthest from everything else
  push X to Y      the expert's push, along the line from X towards Y
  place X in bowl  the expert's bowl placement
  place X on label / stack X on Y   the expert's stacking placement onto the target's top
Each primitive's postcondition is checked on the poses after it ran.

Every placement lets go with ``settle_release`` instead of the oracle's snap-open: closed on an object, the
fingers squeeze it with their full drive force, and PhysX carries that squeeze as a velocity the object
keeps when the fingers open (a held sphere reports ~2.5 cm/s while standing still). A sphere released that
way rolls off at ~5 mm/s and, with no rolling resistance in the simulator, keeps rolling for tens of
centimetres. So the release first relaxes the grip to a light hold (the fingers 2 mm inside the object's
sides) and waits, then opens and waits again before rising: measured on every sphere of the Scene 1 and
Scene 4 layouts, a set-down sphere then stays within 4 mm of its spot (with the snap-open, 27 of 30 rolled
2-4 cm in 4 s).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.decisions.primitive import Primitive, StepResult

if TYPE_CHECKING:
    from robofollow_ros.benchmark.records import ObjectSpec
    from robofollow_ros.policy.expert import PoseSnapshot
    from robofollow_ros.policy.expert.motion import MotionBuilder

LIFTED_M = 0.04
#: calls to the planner per primitive (each call plans one phase; a retry costs two); then we give up
MAX_CALLS = 20


#: the relaxed hold before letting go: the fingers' target this far inside the object's sides
RELAX_SQUEEZE_M = 0.002
#: control rows (one physics step each in SAPIEN) held with the relaxed grip, then with the fingers open
RELAX_ROWS = 50
SETTLE_ROWS = 25


def settle_release(mb: MotionBuilder, arm: str, release_tcp: np.ndarray, obj: ObjectSpec) -> None:
    """Relax the squeeze, wait, open, wait for the object to come to rest, rise (see the module doc)."""
    from robofollow_ros.decisions.gripper import Gripper
    from robofollow_ros.policy.expert import skills

    mb.grip(arm, Gripper.of(mb.kin.rig).opening_with_inner_face(skills.half_width(obj) - RELAX_SQUEEZE_M))
    mb.hold(RELAX_ROWS)
    mb.grip(arm, skills.RELEASE_OPEN)
    mb.hold(SETTLE_ROWS)
    mb.move(arm, release_tcp + np.array([0.0, 0.0, skills.RETREAT]), 2)


class PrimitiveRunner:
    """One SAPIEN world for a whole decision; primitives run one after another on it."""

    def __init__(self, layout: Layout, seed: int, names: dict[str, str] | None = None) -> None:
        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.kinematics import RigKinematics
        from robofollow_ros.sim.world import SimWorld

        #: anchor id -> simulator name (identity where the anchor uses the simulator's names)
        self.sim_names = dict(names) if names else {o.name: o.name for o in layout.objects}
        self.layout = layout
        self.slot_xy = dict(default_registry().slot_xy)
        self.world = SimWorld(render=False)
        self.world.reset(layout, seed)
        self.kin = RigKinematics()
        self.names = tuple(o.name for o in layout.objects)
        self.start_z = {n: float(self.world.object_pose(n)[0][2]) for n in self.names}
        self._max_z = dict(self.start_z)

    def close(self) -> None:
        self.world.close()

    def position(self, name: str) -> np.ndarray:
        return np.asarray(self.world.object_pose(name)[0], dtype=np.float64)

    def max_rise(self) -> dict[str, float]:
        """Per anchor id: the highest its centre rose above its start."""
        return {a: self._max_z[n] - self.start_z[n] for a, n in self.sim_names.items()}

    def positions(self) -> dict[str, tuple[float, float, float]]:
        """Per anchor id: where the simulator has the object now."""
        return {a: tuple(float(v) for v in self.position(n)) for a, n in self.sim_names.items()}  # type: ignore[misc]

    def free_spot(self, sim_name: str) -> tuple[float, float]:
        """The table spot on the object's arm side farthest from every other object (for setting it aside)."""
        others = [self.position(n)[:2] for n in self.names if n != sim_name]
        left = self.position(sim_name)[0] <= 0.0
        grid = [(x / 100, y / 100) for x in range(-20, 17, 2) for y in range(-22, -1, 2) if (x <= 0) == left]
        return max(grid, key=lambda p: min(math.dist(p, tuple(o)) for o in others))

    def _snapshot(self) -> PoseSnapshot:
        from robofollow_ros.policy.expert import PoseSnapshot

        poses = {n: self.world.object_pose(n) for n in self.names}
        return PoseSnapshot({n: p for n, (p, _) in poses.items()}, {n: q for n, (_, q) in poses.items()})

    def run(self, step: Primitive) -> StepResult:
        from robofollow_ros.policy.expert import ExpertPlanner, TaskMeaning
        from robofollow_ros.policy.interface import PolicyError

        verb, label = step.verb, step.label
        obj = self.sim_names[step.obj]
        target = self.sim_names[step.target] if step.target else None
        before = {n: self.position(n) for n in self.names}
        rise_before = dict(self._max_z)
        self._max_z.update({n: float(before[n][2]) for n in self.names})
        arm = "left" if before[obj][0] <= 0.0 else "right"
        slot_xy = dict(self.slot_xy)
        spec = self.layout.object(obj)
        if verb == "lift" and step.set_aside:  # taken away: put down on a free spot
            slot_xy[0] = self.free_spot(obj)
            meaning = TaskMeaning(scene=self.layout.scene, action="unstack_to_slot", source=obj, arm=arm, place_slot=0)
        elif verb == "lift" and spec.on_top_of is not None:  # put it back on its base
            meaning = TaskMeaning(scene=self.layout.scene, action="stack", source=obj, arm=arm, target=spec.on_top_of)
        elif verb == "lift" and spec.in_container is not None:  # put it back in its bowl
            meaning = TaskMeaning(scene=self.layout.scene, action="place_bowl", source=obj, arm=arm,
                                  target=spec.in_container)
        elif verb == "lift":  # set it down where it stood
            slot_xy[0] = (float(before[obj][0]), float(before[obj][1]))
            meaning = TaskMeaning(scene=self.layout.scene, action="unstack_to_slot", source=obj, arm=arm, place_slot=0)
        elif verb == "push":
            meaning = TaskMeaning(scene="scene2", action="push", source=obj, arm=arm, target=target)
        elif verb == "place" and self.layout.object(str(target)).shape == "bowl":
            meaning = TaskMeaning(scene=self.layout.scene, action="place_bowl", source=obj, arm=arm, target=target)
        else:
            meaning = TaskMeaning(scene=self.layout.scene, action="stack", source=obj, arm=arm, target=target)
        try:
            planner = ExpertPlanner(self.kin, meaning, self.layout, slot_xy, release=settle_release)
            for _ in range(MAX_CALLS):
                rows = planner.step(self.world.joint_vector(), self._snapshot(), 50)
                for row in rows:
                    self.world.execute(np.asarray(row, dtype=np.float64))
                    for n in self.names:
                        self._max_z[n] = max(self._max_z[n], float(self.position(n)[2]))
                if planner.done:
                    break
        except PolicyError as exc:  # the planner found no motion (e.g. no IK): the step fails, visibly
            self._max_z = {n: max(self._max_z[n], rise_before[n]) for n in self.names}
            return StepResult(label, False, f"planner: {exc}")
        rise = self._max_z[obj] - float(before[obj][2])
        after = {n: self.position(n) for n in self.names}
        # keep the running maximum over the whole decision, not just this step
        self._max_z = {n: max(self._max_z[n], rise_before[n]) for n in self.names}
        home = np.array([*slot_xy[0], 0.0]) if step.set_aside else before[obj]
        ok, detail = _postcondition(verb, obj, target, {**before, obj: home}, after, rise)
        return StepResult(label, ok, detail)


def _postcondition(verb: str, obj: str, target: str | None, before: dict[str, np.ndarray],
                   after: dict[str, np.ndarray], rise: float) -> tuple[bool, str]:
    p = after[obj]
    if verb == "lift":
        back = math.dist(tuple(p[:2]), tuple(before[obj][:2]))
        return rise >= LIFTED_M and back <= 0.05, f"rose {rise:.3f} m, set down {back:.3f} m from its spot"
    assert target is not None
    t = after[target]
    d_xy = math.dist(tuple(p[:2]), tuple(t[:2]))
    if verb == "push":
        d0 = math.dist(tuple(before[obj][:2]), tuple(before[target][:2]))
        moved = math.dist(tuple(p[:2]), tuple(before[obj][:2]))
        return moved >= 0.01 and d_xy <= d0 - 0.01, f"moved {moved:.3f} m, {d0:.3f} -> {d_xy:.3f} m from target"
    if verb == "place":
        return d_xy <= 0.05 and p[2] >= t[2] - 0.01, f"{d_xy:.3f} m from the {target} centre"
    return d_xy <= 0.03 and p[2] > t[2] + 0.01, f"{d_xy:.3f} m off {target}, {p[2] - t[2]:+.3f} m above it"
