"""SimWorld in render-free mode: layouts, resting, joint tracking, steppers, frames, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.contract import ARM_SLICE, GRIPPER_INDEX
from robofollow_ros.robot.bowl import is_in_bowl
from robofollow_ros.sim.world import SimWorld

ALL_LAYOUTS = [
    ("scene1", "default"), ("scene1", "scene1_1"), ("scene1", "scene1_2"), ("scene1", "scene1_3"),
    ("scene2", "default"), *[("scene2", f"scene2.{i}") for i in range(1, 7)],
    ("scene3", "default"), *[("scene3", f"scene3.{i}") for i in range(1, 5)],
    ("scene4", "scene4_1"), ("scene4", "scene4_2"), ("scene4", "scene4_3"),
    *[("scene4", f"scene4.{i}") for i in range(4, 9)],
]


@pytest.fixture(scope="module")
def world() -> SimWorld:
    return SimWorld(render=False)


def test_all_layouts_are_covered(registry) -> None:  # type: ignore[no-untyped-def]
    # Aliases (scene4.1 = scene4_1) resolve to the same layout, so compare canonical keys.
    every = {(s, registry.layout(s, k).key) for s in registry.layouts for k in registry.layouts[s]}
    assert every == set(ALL_LAYOUTS)


@pytest.mark.parametrize(("scene", "key"), ALL_LAYOUTS)
def test_every_layout_builds_at_its_jittered_spots_and_rests(registry, world: SimWorld, scene: str,  # type: ignore[no-untyped-def]
                                                             key: str) -> None:
    layout = registry.layout(scene, key)
    seed = 1234
    world.reset(layout, seed)
    before = world.scorer_frame()
    assert set(before["objects"]) == set(layout.names)
    xy = layout.jittered_xy(seed)
    for spec in layout.objects:
        position = np.array(before["objects"][spec.name])
        if spec.on_top_of is None and spec.in_container is None:
            assert np.hypot(*(position[:2] - xy[spec.name])) < 0.004, spec.name
            if spec.shape != "bowl":
                assert abs(position[2] - (0.74 + spec.half_height)) < 0.003, spec.name
        elif spec.on_top_of is not None:
            base = np.array(before["objects"][spec.on_top_of])
            assert np.hypot(*(position[:2] - base[:2])) < 0.006, spec.name
            assert position[2] > base[2] + layout.object(spec.on_top_of).half_height, spec.name
        else:
            assert is_in_bowl(position, before["objects"][spec.in_container]), spec.name
    world.idle(250)  # 1 s
    after = world.scorer_frame()
    for name in layout.names:
        drift = float(np.linalg.norm(np.subtract(after["objects"][name], before["objects"][name])))
        assert drift <= 0.002, (name, drift)


def test_joint_targets_are_reached_within_tolerance(registry, world: SimWorld) -> None:  # type: ignore[no-untyped-def]
    world.reset(registry.layout("scene2", "default"), 3)
    target = world.joint_vector()
    target[ARM_SLICE["left"]] = [0.2, 0.2, 0.1, 0.3, 1.0, -0.4]  # in free space, above the objects
    target[ARM_SLICE["right"]] = [-0.6, 0.3, 0.7, -0.3, 0.5, 0.8]
    target[GRIPPER_INDEX["left"]] = 0.3
    steps = world.execute(target)
    assert steps > 50
    reached = world.joint_vector()
    assert np.allclose(reached, target, atol=2e-3), reached - target
    assert world.physics_steps == steps


def test_a_segment_ends_with_the_drives_on_the_target_and_no_velocity(registry, world: SimWorld) -> None:  # type: ignore[no-untyped-def]
    # The TOPP stepper works out a whole segment's drive targets at once; its last step must hand SAPIEN exactly
    # what the joint map gives for the target (arm joints in rig units, fingers from the gripper opening).
    world.reset(registry.layout("scene2", "default"), 5)
    target = world.joint_vector()
    target[ARM_SLICE["left"]] += 0.1
    target[ARM_SLICE["right"]] -= 0.08
    target[GRIPPER_INDEX["left"]], target[GRIPPER_INDEX["right"]] = 0.25, 1.0
    world.execute(target)
    joints = world.robot.active_joints
    expected = world.joint_map.to_qpos(target)
    drives = np.array([float(np.ravel(j.get_drive_target())[0]) for j in joints])
    index = world.joint_map
    driven = [i for a in ("left", "right") for i in (*index.arm_qpos_index[a], *index.gripper_qpos_index[a])]
    assert np.allclose(drives[driven], expected[driven], atol=1e-6), drives[driven] - expected[driven]
    assert all(float(np.ravel(joints[i].get_drive_velocity_target())[0]) == 0.0 for i in driven)


def test_fingers_along_a_series_equal_fingers_at_each_value(world: SimWorld) -> None:
    values = np.array([-0.5, 0.0, 0.25, 0.5, 1.0, 1.7])
    for arm in ("left", "right"):
        along = world.joint_map.fingers_along(arm, values)
        assert along.shape == (len(values), len(world.joint_map.gripper_qpos_index[arm]))
        for row, value in zip(along, values, strict=True):
            assert np.array_equal(row, world.joint_map.fingers_at(arm, float(value)))
        assert np.array_equal(along[0], along[1]) and np.array_equal(along[-1], along[-2])  # clipped to [0, 1]


def test_targets_beyond_the_limits_are_clipped_not_followed(registry, world: SimWorld) -> None:  # type: ignore[no-untyped-def]
    world.reset(registry.layout("scene1", "default"), 3)
    target = world.joint_vector()
    target[0] = 10.0  # left joint1 limit is 2.6
    target[GRIPPER_INDEX["right"]] = 5.0
    world.execute(target)
    vector = world.joint_vector()
    assert abs(vector[0] - 2.6) < 2e-3
    assert vector[GRIPPER_INDEX["right"]] == 1.0


def test_direct_stepper_steps_fifteen_times_per_row(registry) -> None:  # type: ignore[no-untyped-def]
    world = SimWorld(render=False, stepper="direct")
    world.reset(registry.layout("scene3", "default"), 8)
    target = world.joint_vector()
    target[ARM_SLICE["left"]] += 0.05
    assert world.execute(target) == 15
    assert world.physics_steps == 15
    assert np.allclose(world.joint_vector()[ARM_SLICE["left"]], target[ARM_SLICE["left"]], atol=5e-3)


def test_observation_and_frame_layout_without_rendering(registry, world: SimWorld) -> None:  # type: ignore[no-untyped-def]
    task = registry.eval_tasks(scene="scene3")[0]
    world.reset(task, task.seed(1))
    obs = world.observation()
    assert set(obs["observation"]) == {"head_camera", "left_camera", "right_camera"}
    assert all(v["rgb"] is None for v in obs["observation"].values())
    assert obs["joint_action"]["vector"].shape == (14,)
    assert np.allclose(obs["joint_action"]["vector"], world.rig.home_vector(), atol=1e-6)
    frame = world.scorer_frame()
    assert set(frame) == {"ee_left", "ee_right", "gripper_left", "gripper_right", "objects", "object_quats"}
    assert frame["gripper_left"] == frame["gripper_right"] == 1.0
    bar = frame["object_quats"]["red_bar_2"]
    assert np.isclose(np.linalg.norm(bar), 1.0) and abs(bar[0]) > 0.999  # yaw 0 at rest
    with pytest.raises(RuntimeError, match="render=False"):
        world.render_images()
    assert world._scene is not None
    for entity in world._scene.entities:  # no camera and no visual shape anywhere
        assert not any(type(c).__module__.startswith("sapien.pysapien.render") for c in entity.components), entity.name
    with pytest.raises(RuntimeError):
        world._scene.get_system("render")


def test_bad_action_rows_name_the_field(registry, world: SimWorld) -> None:  # type: ignore[no-untyped-def]
    world.reset(registry.layout("scene1", "default"), 3)
    with pytest.raises(ValueError, match=r"action row.*14"):
        world.execute(np.zeros(13))
    with pytest.raises(ValueError, match=r"action row.*finite"):
        world.execute(np.full(14, np.inf))
    with pytest.raises(ValueError, match="seed"):
        world.reset(registry.layout("scene1", "default"), "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stepper"):
        SimWorld(stepper="fast")  # type: ignore[arg-type]


def _rollout(registry, seed: int) -> list[dict]:  # type: ignore[no-untyped-def]
    world = SimWorld(render=False)
    world.reset(registry.layout("scene2", "scene2.3"), seed)
    frames = [world.scorer_frame()]
    rng = np.random.default_rng(0)
    vector = world.joint_vector()
    for _ in range(6):
        vector = vector + np.concatenate([rng.normal(0, 0.15, 6), [0], rng.normal(0, 0.15, 6), [0]])
        vector[GRIPPER_INDEX["left"]] = float(rng.uniform())
        world.execute(vector)
        frames.append(world.scorer_frame())
    return frames


def test_same_seed_and_actions_give_identical_frames(registry) -> None:  # type: ignore[no-untyped-def]
    first, second = _rollout(registry, 77), _rollout(registry, 77)
    assert first == second
    other = _rollout(registry, 78)
    assert other[0]["objects"] != first[0]["objects"]


@pytest.mark.parametrize(("scene", "key", "static_names"), [
    ("scene2", "default", set()),  # both bowls dynamic
    ("scene3", "default", {"green_label_1", "blue_label_6"}),
    ("scene4", "scene4_1", {"green_bowl"}),
])
def test_static_and_dynamic_bodies_follow_the_spec(registry, world: SimWorld, scene: str, key: str,  # type: ignore[no-untyped-def]
                                                   static_names: set[str]) -> None:
    import sapien

    world.reset(registry.layout(scene, key), 2)
    static = {name for name, entity in world.objects.items()
              if entity.find_component_by_type(sapien.physx.PhysxRigidStaticComponent) is not None}
    assert static == static_names
    for name, entity in world.objects.items():
        body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        if body is not None:
            assert body.mass == pytest.approx(registry.layout(scene, key).object(name).mass, rel=1e-3), name
