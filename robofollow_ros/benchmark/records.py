"""Typed, immutable records of the RoboFollow benchmark: objects, layouts and tasks.

The records are plain frozen dataclasses so every layer (scorer, simulator, oracle, perception,
ROS nodes) can hold them without importing anything heavy, and nothing can change a task after
the registry validated it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z

SCENES = ("scene1", "scene2", "scene3", "scene4")
LEVELS = ("L0", "L1", "L2", "L3")
SPLITS = ("train", "eval")
Arm = Literal["left", "right"]
Shape = Literal["sphere", "cube", "cylinder", "box", "bowl"]
#: ``object`` can be grasped and is a candidate in nearest-object tests; ``label`` and ``bowl`` never are.
Role = Literal["object", "label", "bowl"]

#: Actions each scene's tasks may use (spec section b); anything else is a data error.
SCENE_ACTIONS: dict[str, frozenset[str]] = {
    "scene1": frozenset({"pickup", "place_behind", "place_in_front", "place_left_of", "place_beside"}),
    "scene2": frozenset({"pickup", "stack", "push", "place_bowl"}),
    "scene3": frozenset({"place_on_label_route"}),
    "scene4": frozenset({"pickup", "unstack_to_slot", "stack_on_target", "sequence_pickups"}),
}


@dataclass(frozen=True)
class PerturbRule:
    """RoboFollow's ``PerturbRule``: x = x0 + U(-xr, xr); y moves ``up`` (+), ``down`` (-) or ``both``."""

    x_range: float
    y_range: float
    y_direction: Literal["up", "down", "both"] = "both"

    def sample(self, rng: np.random.RandomState) -> tuple[float, float]:
        """Draw one (dx, dy) offset; x is drawn before y, always, so a seed fixes the layout."""
        dx = float(rng.uniform(-self.x_range, self.x_range))
        if self.y_direction == "up":
            dy = float(rng.uniform(0.0, self.y_range))
        elif self.y_direction == "down":
            dy = -float(rng.uniform(0.0, self.y_range))
        else:
            dy = float(rng.uniform(-self.y_range, self.y_range))
        return dx, dy


@dataclass(frozen=True)
class ObjectSpec:
    """One thing on the table: a graspable object, a Scene 3 label or a bowl."""

    name: str
    shape: Shape
    #: sphere (r,), cube (half,), cylinder (r, half_height), box (hx, hy, hz); bowl: () (see ``scale``).
    size: tuple[float, ...]
    color_rgb: tuple[float, float, float]
    mass: float
    friction: float
    role: Role
    nominal_xy: tuple[float, float]
    #: Spawn height of the object's centre; ``None`` for objects that rest on another (Scene 4).
    spawn_z: float | None
    yaw: float = 0.0
    is_static: bool = False
    perturb: PerturbRule | None = None
    #: Bowls: the RoboTwin model's orientation, scale and variant (1 = yellow, 3 = green).
    quat_wxyz: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    scale: float = 1.0
    model_id: int | None = None
    #: Scene 4: slot number, the object this one is stacked on, or the container it sits in.
    slot: int | None = None
    on_top_of: str | None = None
    in_container: str | None = None

    @property
    def half_height(self) -> float:
        """Half of the object's vertical extent when it stands upright (used by stacking rules)."""
        if self.shape in ("sphere", "cube"):
            return self.size[0]
        if self.shape == "cylinder":
            return self.size[1]
        if self.shape == "box":
            return self.size[2]
        return 0.0

    @property
    def is_candidate(self) -> bool:
        """Whether nearest-object tests may pick this thing (labels and bowls never are)."""
        return self.role == "object"


@dataclass(frozen=True)
class Layout:
    """One arrangement of a scene's objects (a layout variant such as ``scene2.3``)."""

    scene: str
    key: str
    objects: tuple[ObjectSpec, ...]
    aliases: tuple[str, ...] = ()
    swaps: tuple[tuple[str, str], ...] = ()
    note: str | None = None

    def object(self, name: str) -> ObjectSpec:
        """The object called ``name``; a clear error names the layout when it is absent."""
        for obj in self.objects:
            if obj.name == name:
                return obj
        known = ", ".join(o.name for o in self.objects)
        raise KeyError(f"layout {self.scene}/{self.key}: no object {name!r} (objects: {known})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.objects)

    def jittered_xy(self, seed: int) -> dict[str, tuple[float, float]]:
        """Nominal positions plus the seed's jitter, for every object.

        Objects are visited in layout order and each perturbed one draws (x, y) from one
        ``RandomState(seed)``, mirroring RoboFollow's draws from NumPy's global RNG after seeding.
        Stacked objects take their base's position and an in-bowl cube takes the bowl's, as the
        reference scene does before physics settles them.
        """
        rng = np.random.RandomState(seed)
        out: dict[str, tuple[float, float]] = {}
        for obj in self.objects:
            x, y = obj.nominal_xy
            if obj.perturb is not None and obj.on_top_of is None and obj.in_container is None:
                dx, dy = obj.perturb.sample(rng)
                x, y = x + dx, y + dy
            out[obj.name] = (x, y)
        for obj in self.objects:
            base = obj.on_top_of or obj.in_container
            if base is not None:
                out[obj.name] = out[base]
        return out


@dataclass(frozen=True)
class TrainingTask:
    """One of the 75 training tasks; the scene group is the layout its demonstrations use."""

    scene: str
    task_id: str
    layout: str
    scene_group: str
    action: str
    action_family: str
    source: str
    target: str | None
    arm: Arm
    instructions: tuple[str, ...]
    relation: str | None = None
    via: str | None = None
    route_mode: str | None = None
    place_mode: str | None = None
    place_slot: int | None = None
    second_source: str | None = None
    second_arm: Arm | None = None
    semantic_type: str | None = None
    expected_branch: str | None = None


@dataclass(frozen=True)
class EvalTask:
    """One of the 554 evaluation tasks: the exact instruction and the behaviour it expects."""

    scene: str
    level: str
    task_id: str
    layout: str
    scenario_tag: str
    base_task_type: str
    instruction_variant: str
    instruction: str
    action: str
    source: str
    target: str | None
    arm: Arm
    seeds: tuple[int, ...]
    registry_order: int
    via: str | None = None
    route_mode: str | None = None
    place_mode: str | None = None
    scored_pass_over_object: str | None = None
    scored_avoid_object: str | None = None
    target_yaw_rad: float | None = None
    phrased_route_mode: str | None = None
    phrased_via: str | None = None
    phrased_place_mode: str | None = None
    place_slot: int | None = None
    second_source: str | None = None
    second_arm: Arm | None = None
    semantic_type: str | None = None
    expected_branch: str | None = None
    note: str | None = None
    extras: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def seed(self, round_index: int) -> int:
        """Trial seed of round ``round_index`` (1-based) for the default base seed 42."""
        if not 1 <= round_index <= len(self.seeds):
            raise ValueError(f"round: {round_index} is outside 1..{len(self.seeds)} for task {self.task_id!r}")
        return self.seeds[round_index - 1]

    @property
    def is_conditional(self) -> bool:
        """The official evaluator's ``_is_conditional_task``: the base id (any case) contains ``_if_`` or
        starts with ``if_``, or the stripped instruction starts with "if "."""
        base = self.base_task_type.lower()
        return "_if_" in base or base.startswith("if_") or self.instruction.strip().lower().startswith("if ")


def spawn_height(scene: str, shape: Shape, size: tuple[float, ...]) -> float:
    """Spawn height of an object's centre on the bare table (spec section a, "Spawn height")."""
    if shape == "sphere":
        return TABLE_TOP_Z + size[0]
    if scene == "scene4":
        half = size[0] if shape == "cube" else size[1]
        return TABLE_TOP_Z + half + 0.001
    if shape == "cylinder":
        return TABLE_TOP_Z + size[1]
    if shape == "cube":
        return TABLE_TOP_Z + size[0] + 0.001
    if shape == "box":
        return TABLE_TOP_Z + size[2] + 0.001
    raise ValueError(f"shape: no spawn rule for {shape!r} in {scene}")
