"""Capture an anchor from a physical state: SAPIEN ground truth, one rendered frame through the perception
pipeline, or the perception node's grounded objects on ``/robofollow/objects`` (on the rig, or in a sim
graph). The ``source`` recorded in the provenance says which.

All three end in ``anchor_from_poses``: the layout names what should be on the table (identities,
what rests on what); the measured poses say where each thing is, and must agree with those relations
(an object "on" another is above it, one "inside" a bowl is within its rim) or the capture is refused
by name. The anchor then goes through the same checks as an authored one (``check_anchor``; an
action catalog is proved complete in the world model), and ``generator.generate_on_anchors`` builds
validated families on it.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.decisions.anchors import Anchor, AnchorKind, CandidateAction, check_anchor
from robofollow_ros.decisions.authoring import build_actions, objects_at
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.world import cramped

XYZ = tuple[float, float, float]
#: a stacked object's centre is within this of its base's in x/y; an object in a bowl within this of its centre
ON_TOP_XY_M = 0.03
IN_BOWL_XY_M = 0.05


def anchor_from_poses(anchor_id: str, layout: Layout, poses: Mapping[str, XYZ], kind: AnchorKind,
                      provenance: dict[str, Any]) -> Anchor:
    """An anchor of ``layout``'s objects at the measured ``poses`` (keyed by the layout's names)."""
    missing = [o.name for o in layout.objects if o.name not in poses]
    if missing:
        raise OwdaError(f"capture: no pose for {missing} of {layout.scene}/{layout.key}")
    for o in layout.objects:
        base = o.on_top_of or o.in_container
        if base is None:
            continue
        (x, y, z), (bx, by, bz) = poses[o.name], poses[base]
        off = math.dist((x, y), (bx, by))
        if o.on_top_of and (off > ON_TOP_XY_M or z <= bz):
            raise OwdaError(f"capture: {o.name} should rest on {base} but is {off:.3f} m beside it, {z - bz:+.3f} m "
                            "above it")
        if o.in_container and off > IN_BOWL_XY_M:
            raise OwdaError(f"capture: {o.name} should be inside {base} but is {off:.3f} m from its centre")
    objects = objects_at(layout, {n: (p[0], p[1]) for n, p in poses.items()})
    tight = cramped(Anchor(anchor_id, kind, layout.scene, objects, provenance={"source": "probe"}))
    if tight:
        raise OwdaError(f"capture: no room for the gripper: {tight[0]}")
    actions: tuple[CandidateAction, ...] = ()
    if kind == "action_sequence":
        actions = build_actions(objects, random.Random(f"capture-{anchor_id}"))
        if not actions:
            raise OwdaError(f"capture: no action catalog for {anchor_id} is executable in every allowed order")
    anchor = Anchor(anchor_id, kind, layout.scene, objects, actions,
                    provenance={**provenance, "scene": layout.scene, "layout": layout.key,
                                "time": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    check_anchor(anchor)
    return anchor


def capture_from_sim(anchor_id: str, layout: Layout, seed: int, kind: AnchorKind) -> Anchor:
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False)
    try:
        world.reset(layout, seed)
        poses = {o.name: _xyz(world.object_pose(o.name)[0]) for o in layout.objects}
    finally:
        world.close()
    return anchor_from_poses(anchor_id, layout, poses, kind, {"source": "sim_ground_truth", "seed": seed})


def _xyz(p: Iterable[float]) -> XYZ:
    x, y, z = (float(v) for v in p)
    return x, y, z


def capture_from_perception(anchor_id: str, layout: Layout, seed: int, kind: AnchorKind) -> Anchor:
    """The perception pipeline's grounded objects, from one head-camera frame (RGB + depth) rendered in SAPIEN.

    The identities come from grounding, the positions from the camera model, exactly as on the rig;
    only the image source is the simulator. An object perception did not find is an error, not a guess.
    """
    from robofollow_ros.perception.camera_model import CameraModel
    from robofollow_ros.perception.tracker import Perception
    from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    perception = Perception(camera, layout)
    world = SimWorld(render=True, cameras=CameraSettings(width=camera.width, height=camera.height, depth=True,
                                                         cameras=("head",)))
    try:
        world.reset(layout, seed)
        head = world.render_images()["head"]
        result = perception.update(head["rgb"], head.get("depth"), world.physics_steps * world.dt)
    finally:
        world.close()
    poses = {name: _xyz(p) for name, p in result.positions().items()}
    return anchor_from_poses(anchor_id, layout, poses, kind,
                             {"source": "perception", "camera": "head", "image_source": "sim", "seed": seed})


def grounded_poses(markers: Iterable[Any], min_confidence: float) -> dict[str, XYZ]:
    """Poses of the *grounded* objects in one ``/robofollow/objects`` MarkerArray's markers.

    A grounded object is a marker in the ``world`` frame whose ``text`` carries the perception node's
    JSON ``{"confidence", "visible", ...}`` with the object seen now and at least ``min_confidence``.
    Markers without it (the simulator's ground truth shares the topic in a sim graph) are not perception's
    and are skipped; so are remembered but unseen objects.
    """
    out: dict[str, XYZ] = {}
    for m in markers:
        if not m.ns or m.header.frame_id not in ("", "world"):
            continue
        try:
            info = json.loads(m.text) if m.text else None
        except ValueError:
            info = None
        if not isinstance(info, dict) or not isinstance(info.get("confidence"), (int, float)):
            continue
        if info.get("visible") is False or float(info["confidence"]) < min_confidence:
            continue
        p = m.pose.position
        out[str(m.ns)] = (float(p.x), float(p.y), float(p.z))
    return out
