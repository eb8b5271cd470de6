"""Capture an anchor from a physical state: SAPIEN ground truth, or the perception pipeline's grounded
objects (the ``source`` recorded in the provenance says which).

Positions are read after the layout has settled under physics, so a captured anchor describes where
things really are, not where the layout file nominally put them.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.decisions.anchors import Anchor, AnchorKind, check_anchor
from robofollow_ros.decisions.authoring import build_actions, objects_at
from robofollow_ros.decisions.errors import OwdaError


def capture_from_sim(anchor_id: str, layout: Layout, seed: int, kind: AnchorKind) -> Anchor:
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False)
    try:
        world.reset(layout, seed)
        positions = {o.name: _xy(world, o.name) for o in layout.objects}
    finally:
        world.close()
    objects = objects_at(layout, positions)
    actions = build_actions(objects, random.Random(f"capture-{anchor_id}-{seed}")) if kind == "action_sequence" else ()
    anchor = Anchor(anchor_id, kind, layout.scene, objects, actions, provenance={
        "source": "sim_ground_truth", "scene": layout.scene, "layout": layout.key, "seed": seed,
        "time": datetime.now(UTC).isoformat(timespec="seconds")})
    check_anchor(anchor)
    return anchor


def _xy(world: object, name: str) -> tuple[float, float]:
    position, _ = world.object_pose(name)  # type: ignore[attr-defined]
    return float(position[0]), float(position[1])


def capture_from_perception(anchor_id: str, layout: Layout, seed: int, kind: AnchorKind) -> Anchor:
    """The perception pipeline's grounded objects, from one head-camera frame (RGB + depth) rendered in SAPIEN.

    The identities come from grounding, the positions from the camera model, exactly as on the rig;
    only the image source is the simulator. An object perception did not find is an error, not a guess.
    """
    from robofollow_ros.perception.camera_model import CameraModel
    from robofollow_ros.perception.tracker import Perception
    from robofollow_ros.sim.calibration import DEFAULT_CALIBRATION_DIR
    from robofollow_ros.sim.cameras import CameraSettings
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
    positions = {name: (float(p[0]), float(p[1])) for name, p in result.positions().items()}
    missing = [o.name for o in layout.objects if o.name not in positions]
    if missing:
        raise OwdaError(f"perception: no grounded pose for {missing} in {layout.scene}/{layout.key} seed {seed}")
    objects = objects_at(layout, positions)
    actions = build_actions(objects, random.Random(f"capture-{anchor_id}-{seed}")) if kind == "action_sequence" else ()
    anchor = Anchor(anchor_id, kind, layout.scene, objects, actions, provenance={
        "source": "perception", "camera": "head", "image_source": "sim", "scene": layout.scene,
        "layout": layout.key, "seed": seed, "time": datetime.now(UTC).isoformat(timespec="seconds")})
    check_anchor(anchor)
    return anchor
