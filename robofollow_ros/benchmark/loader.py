"""Reading and validating the shipped benchmark data (``data/``) into typed records.

Every check raises :class:`RegistryError` naming the file, the record and the field, so a bad edit
to the data is reported where it is, not as a KeyError deep inside the scorer or simulator.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark.errors import RegistryError
from robofollow_ros.benchmark.records import (
    LEVELS,
    SCENE_ACTIONS,
    SCENES,
    EvalTask,
    Layout,
    ObjectSpec,
    PerturbRule,
    Role,
    TrainingTask,
    spawn_height,
)
from robofollow_ros.benchmark.seeds import trial_seeds
from robofollow_ros.contract import ARMS, TABLE_TOP_Z

DATA_DIR = Path(__file__).resolve().parent / "data"

#: (friction, mass) by shape where the layout file leaves them to the scene's environment
#: (spec section a: the Scene 1 expert environment and the Scene 2 evaluation environment).
SCENE_PHYSICS: dict[str, dict[str, tuple[float, float]]] = {
    "scene1": {"sphere": (2.0, 0.05), "cylinder": (0.1, 0.2), "cube": (0.1, 0.2)},
    "scene2": {"sphere": (2.0, 0.05), "cylinder": (0.12, 0.2), "cube": (0.1, 0.2)},
}
#: Bowl friction and mass are not in the spec (RoboTwin's asset carries them); these are ours.
BOWL_FRICTION, BOWL_MASS = 0.5, 0.15
LABEL_FRICTION, LABEL_MASS = 0.5, 0.05
#: Scene 3 and Scene 4 jitter every free object by ±0.01 m in x and y (``layout_perturb``).
UNIFORM_JITTER = PerturbRule(0.01, 0.01, "both")


def verify_checksums(data_dir: Path = DATA_DIR) -> None:
    """Check every data file against ``SHA256SUMS`` so an edited copy cannot pass unnoticed."""
    sums = data_dir / "SHA256SUMS"
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        path = data_dir / name
        if not path.is_file():
            raise RegistryError("SHA256SUMS", name, "file", "listed file is missing")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise RegistryError("SHA256SUMS", name, "sha256", f"is {actual}, expected {digest}; see data/PROVENANCE.md")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RegistryError(path.name, "<file>", "<json>", str(exc)) from None


def _need(rec: dict[str, Any], key: str, file: str, rid: str) -> Any:
    if key not in rec or rec[key] is None:
        raise RegistryError(file, rid, key, "is missing")
    return rec[key]


def _object_from(scene: str, raw: dict[str, Any], role: Role, file: str, rid: str) -> ObjectSpec:
    name = _need(raw, "name", file, rid)
    where = f"{rid}/{name}"
    if role == "bowl":
        if "position_xyz" in raw:
            x, y, z = raw["position_xyz"]
        else:
            x, y = _need(raw, "nominal_xy", file, where)
            z = TABLE_TOP_Z + float(raw.get("center_z_offset", 0.0))
        return ObjectSpec(
            name=name,
            shape="bowl",
            size=(),
            color_rgb=_bowl_colour(raw, file, where),
            mass=BOWL_MASS,
            friction=BOWL_FRICTION,
            role="bowl",
            nominal_xy=(x, y),
            spawn_z=z,
            is_static=bool(raw.get("is_static", False)),
            perturb=UNIFORM_JITTER if scene == "scene4" else None,
            quat_wxyz=tuple(raw.get("quat_wxyz", (1.0, 0.0, 0.0, 0.0))),  # type: ignore[arg-type]
            scale=float(raw.get("scale", 1.0)),
            model_id=raw.get("model_id"),
            slot=raw.get("slot"),
        )
    shape = _need(raw, "shape", file, where)
    if shape not in ("sphere", "cube", "cylinder", "box"):
        raise RegistryError(file, where, "shape", f"unknown shape {shape!r}")
    size = tuple(float(v) for v in _need(raw, "size", file, where))
    expected_len = {"sphere": 1, "cube": 1, "cylinder": 2, "box": 3}[shape]
    if len(size) != expected_len or min(size) <= 0:
        raise RegistryError(file, where, "size", f"{list(size)} is not a valid {shape} size")
    friction, mass = SCENE_PHYSICS.get(scene, {}).get(shape, (None, None))
    if role == "label":  # static flat markers: mass never matters, friction is ours
        friction, mass = LABEL_FRICTION, LABEL_MASS
    friction = float(raw.get("friction", friction if friction is not None else -1))
    mass = float(raw.get("mass", mass if mass is not None else -1))
    if friction < 0 or mass <= 0:
        raise RegistryError(file, where, "friction/mass", "no physics given and no scene default")
    xy = raw.get("position_xy", raw.get("nominal_xy"))
    if xy is None:
        raise RegistryError(file, where, "position_xy", "is missing")
    stacked = raw.get("on_top_of") or raw.get("in_container")
    if role == "label":
        spawn_z: float | None = TABLE_TOP_Z + size[2]
    else:
        spawn_z = None if stacked else spawn_height(scene, shape, size)
    if raw.get("perturb"):
        p = raw["perturb"]
        perturb: PerturbRule | None = PerturbRule(p["x_range"], p["y_range"], p["y_direction"])
    elif scene in ("scene3", "scene4") and not stacked:
        perturb = UNIFORM_JITTER
    else:
        perturb = None
    colour = tuple(float(c) for c in _need(raw, "color_rgb", file, where))
    return ObjectSpec(
        name=name,
        shape=shape,
        size=size,
        color_rgb=colour,  # type: ignore[arg-type]
        mass=mass,
        friction=friction,
        role=role,
        nominal_xy=(float(xy[0]), float(xy[1])),  # type: ignore[arg-type]
        spawn_z=spawn_z,
        yaw=float(raw.get("yaw", 0.0)),
        is_static=bool(raw.get("is_static", role == "label")),
        perturb=perturb,
        slot=raw.get("slot"),
        on_top_of=raw.get("on_top_of"),
        in_container=raw.get("in_container"),
    )


def _bowl_colour(raw: dict[str, Any], file: str, where: str) -> tuple[float, float, float]:
    """RoboFollow recolours bowl model 1 yellow and model 3 green (asset overrides)."""
    colours = {1: (1.0, 0.85, 0.1), 3: (0.1, 0.8, 0.2)}
    model = raw.get("model_id")
    if model not in colours:
        raise RegistryError(file, where, "model_id", f"{model!r} has no known colour (1 or 3)")
    return colours[model]


def load_layouts(data_dir: Path = DATA_DIR) -> dict[str, dict[str, Layout]]:
    """Every layout of every scene, keyed by scene then layout key (aliases included)."""
    file = "layouts.json"
    raw = _read_json(data_dir / file)
    out: dict[str, dict[str, Layout]] = {}
    for scene in SCENES:
        if scene not in raw:
            raise RegistryError(file, scene, "<scene>", "scene is missing")
        layouts: dict[str, Layout] = {}
        aliases: dict[str, str] = {}
        for key, spec in raw[scene].items():
            if not isinstance(spec, dict) or key in ("slot_xy", "layout_perturb"):
                continue
            if "alias_of" in spec:
                aliases[key] = spec["alias_of"]
                continue
            rid = f"{scene}/{key}"
            objects = [_object_from(scene, o, "object", file, rid) for o in spec.get("objects", [])]
            objects += [_object_from(scene, o, "label", file, rid) for o in spec.get("labels", [])]
            objects += [_object_from(scene, o, "bowl", file, rid) for o in spec.get("actors", [])]
            names = [o.name for o in objects]
            dupes = {n for n in names if names.count(n) > 1}
            if dupes:
                raise RegistryError(file, rid, "objects", f"duplicate object names {sorted(dupes)}")
            for o in objects:
                for ref_field, ref in (("on_top_of", o.on_top_of), ("in_container", o.in_container)):
                    if ref is not None and ref not in names:
                        raise RegistryError(file, f"{rid}/{o.name}", ref_field, f"unknown object {ref!r}")
            swaps = tuple(tuple(s) for s in spec.get("swaps", ()))
            layouts[key] = Layout(scene, key, tuple(objects), (), swaps, spec.get("note"))  # type: ignore[arg-type]
        for alias, target in aliases.items():
            if target not in layouts:
                raise RegistryError(file, f"{scene}/{alias}", "alias_of", f"unknown layout {target!r}")
            base = layouts[target]
            layouts[target] = Layout(base.scene, base.key, base.objects, (*base.aliases, alias), base.swaps, base.note)
        for alias, target in aliases.items():
            layouts[alias] = layouts[target]
        out[scene] = layouts
    return out


def _check_task_refs(
    file: str, rid: str, rec: dict[str, Any], scene: str, layout: Layout, slot_xy: dict[int, Any]
) -> None:
    if rec.get("level") is not None and rec["level"] not in LEVELS:
        raise RegistryError(file, rid, "level", f"{rec['level']!r} is not one of {LEVELS}")
    if rec["arm"] not in ARMS:
        raise RegistryError(file, rid, "arm", f"{rec['arm']!r} is not one of {ARMS}")
    if rec.get("second_arm") is not None and rec["second_arm"] not in ARMS:
        raise RegistryError(file, rid, "second_arm", f"{rec['second_arm']!r} is not one of {ARMS}")
    if rec["action"] not in SCENE_ACTIONS[scene]:
        raise RegistryError(file, rid, "action", f"{rec['action']!r} is not an action of {scene}")
    for fld in ("source", "target", "via", "second_source", "scored_pass_over_object", "scored_avoid_object"):
        name = rec.get(fld)
        if name is not None and name not in layout.names:
            raise RegistryError(
                file,
                rid,
                fld,
                f"unknown object {name!r} in layout {scene}/{layout.key} (objects: {', '.join(layout.names)})",
            )
    slot = rec.get("place_slot")
    if slot is not None and int(slot) not in slot_xy:
        raise RegistryError(file, rid, "place_slot", f"unknown slot {slot!r}")


def _task_records(
    file: str, layouts: dict[str, dict[str, Layout]], slot_xy: dict[int, Any], data_dir: Path
) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """(id, record, scene, layout key) of every task record, after the checks both task files share."""
    seen: set[str] = set()
    for i, rec in enumerate(_read_json(data_dir / file)):
        rid = str(rec.get("task_id", f"#{i}"))
        scene = _need(rec, "scene", file, rid)
        if scene not in SCENES:
            raise RegistryError(file, rid, "scene", f"{scene!r} is not one of {SCENES}")
        if rid in seen:
            raise RegistryError(file, rid, "task_id", "duplicate id")
        seen.add(rid)
        layout_key = _need(rec, "layout", file, rid)
        if layout_key not in layouts[scene]:
            raise RegistryError(file, rid, "layout", f"unknown layout {layout_key!r} of {scene}")
        _check_task_refs(file, rid, rec, scene, layouts[scene][layout_key], slot_xy)
        yield rid, rec, scene, layout_key


_OPTIONAL_TASK_FIELDS = (
    "via",
    "route_mode",
    "place_mode",
    "place_slot",
    "second_source",
    "second_arm",
    "semantic_type",
    "expected_branch",
)


def load_training_tasks(
    layouts: dict[str, dict[str, Layout]], slot_xy: dict[int, Any], data_dir: Path = DATA_DIR
) -> list[TrainingTask]:
    file = "training_tasks.json"
    tasks: list[TrainingTask] = []
    for rid, rec, scene, layout_key in _task_records(file, layouts, slot_xy, data_dir):
        instructions = tuple(_need(rec, "instructions", file, rid))
        if not instructions or len(instructions) != rec.get("n_instruction_variants", len(instructions)):
            raise RegistryError(file, rid, "instructions", "empty or inconsistent with n_instruction_variants")
        tasks.append(
            TrainingTask(
                scene=scene,
                task_id=rid,
                layout=layout_key,
                scene_group=_need(rec, "scene_group", file, rid),
                action=rec["action"],
                action_family=rec.get("action_family") or rec["action"],
                source=_need(rec, "source", file, rid),
                target=rec.get("target"),
                arm=rec["arm"],
                instructions=instructions,
                relation=rec.get("relation"),
                **{k: rec.get(k) for k in _OPTIONAL_TASK_FIELDS},
            )
        )
    return tasks


_EVAL_OPTIONAL = (
    "via",
    "route_mode",
    "place_mode",
    "scored_pass_over_object",
    "scored_avoid_object",
    "target_yaw_rad",
    "phrased_route_mode",
    "phrased_via",
    "phrased_place_mode",
    "place_slot",
    "second_source",
    "second_arm",
    "semantic_type",
    "expected_branch",
    "note",
)


def load_eval_tasks(
    layouts: dict[str, dict[str, Layout]], slot_xy: dict[int, Any], data_dir: Path = DATA_DIR
) -> list[EvalTask]:
    file = "evaluation_tasks.json"
    tasks: list[EvalTask] = []
    for rid, rec, scene, layout_key in _task_records(file, layouts, slot_xy, data_dir):
        level = _need(rec, "level", file, rid)
        seeds = tuple(int(s) for s in _need(rec, "seeds_base42_rounds10", file, rid))
        expected = trial_seeds(rid, rounds=len(seeds))
        if seeds != expected:
            raise RegistryError(
                file, rid, "seeds_base42_rounds10", f"{list(seeds)} differs from the seed rule {list(expected)}"
            )
        known = {
            "scene",
            "level",
            "task_id",
            "layout",
            "scenario_tag",
            "base_task_type",
            "instruction_variant",
            "instruction",
            "action",
            "source",
            "target",
            "arm",
            "seeds_base42_rounds10",
            "registry_order",
            *_EVAL_OPTIONAL,
        }
        tasks.append(
            EvalTask(
                scene=scene,
                level=level,
                task_id=rid,
                layout=layout_key,
                scenario_tag=_need(rec, "scenario_tag", file, rid),
                base_task_type=_need(rec, "base_task_type", file, rid),
                instruction_variant=_need(rec, "instruction_variant", file, rid),
                instruction=_need(rec, "instruction", file, rid),
                action=rec["action"],
                source=_need(rec, "source", file, rid),
                target=rec.get("target"),
                arm=rec["arm"],
                seeds=seeds,
                registry_order=int(_need(rec, "registry_order", file, rid)),
                extras={k: v for k, v in rec.items() if k not in known},
                **{k: rec.get(k) for k in _EVAL_OPTIONAL if k != "target_yaw_rad"},
                target_yaw_rad=_yaw(rec.get("target_yaw_rad"), file, rid),
            )
        )
    return tasks


#: Yaw values the data spells as text (RoboFollow writes the Scene 3 quarter turn as "pi/2").
_NAMED_YAWS = {"pi/2": math.pi / 2, "0": 0.0}


def _yaw(value: Any, file: str, rid: str) -> float | None:
    """``target_yaw_rad`` as radians: a number, or one of the spelled-out values."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and value.strip() in _NAMED_YAWS:
        return _NAMED_YAWS[value.strip()]
    raise RegistryError(file, rid, "target_yaw_rad", f"{value!r} is neither radians nor one of {sorted(_NAMED_YAWS)}")


def load_slot_xy(data_dir: Path = DATA_DIR) -> dict[int, tuple[float, float]]:
    """Scene 4's six slot positions (x, y), un-jittered."""
    raw = _read_json(data_dir / "layouts.json")["scene4"]["slot_xy"]
    return {int(k): (float(v[0]), float(v[1])) for k, v in raw.items()}
