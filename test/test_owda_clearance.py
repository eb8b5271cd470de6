"""Room for the gripper: the world model's finger and palm boxes, checked against the rig in SAPIEN, its
verdicts on hand-built tables, and what SAPIEN does where it says there is no room and where it says there is."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.catalog import incomplete_order, with_relations
from robofollow_ros.decisions.gripper import (
    FINGER_BELOW_TCP_M,
    FINGER_HALF_ACROSS_M,
    FINGER_THICKNESS_M,
    PALM_HALF_ACROSS_M,
    PALM_HALF_ALONG_M,
    inner_face,
)
from robofollow_ros.decisions.world import WorldState, cramped

PROV = {"source": "sim_layout", "scene": "test", "layout": "hand", "seed": 0}
LARGE_CUBE = (0.03, 0.03, 0.06)
BIG_BOWL = (0.048, 0.048, 0.04)
BAR = (0.018, 0.028, 0.026)


def _obj(name: str, shape: str, xy: tuple[float, float], extent: tuple[float, float, float], role: str = "object",
         on: str | None = None) -> AnchorObject:
    return AnchorObject(name, shape, "red", "", xy, role, on, None, "", extent)


def _anchor(*objs: AnchorObject, actions: tuple[CandidateAction, ...] = ()) -> Anchor:
    return Anchor("t", "action_sequence" if actions else "object_centric", "test", objs, actions, PROV)


def _tcp_frame_boxes(world, arm: str) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """Min and max corner of each finger's and the palm's collision box, in the TCP frame (x approach, y opening)."""
    import sapien

    tcp, q = world.tcp_pose(arm)
    rot = sapien.Pose(q=q).to_transformation_matrix()[:3, :3]
    out = {}
    for link in world.robot.links:
        if link.name in (f"{arm}_finger_a", f"{arm}_finger_b", f"{arm}_palm"):
            (shape,) = link.collision_shapes
            pose = link.entity_pose * shape.local_pose
            corners = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]) * shape.half_size
            world_corners = pose.p + corners @ sapien.Pose(q=pose.q).to_transformation_matrix()[:3, :3].T
            local = (world_corners - tcp) @ rot
            out[link.name.removeprefix(f"{arm}_")] = np.array([local.min(0), local.max(0)])
    return out


@pytest.mark.parametrize("opening", [0.0, 0.85, 1.0])
def test_the_gripper_boxes_are_the_rigs(registry, opening: float) -> None:  # type: ignore[no-untyped-def]
    from robofollow_ros.contract import GRIPPER_INDEX
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False)
    try:
        world.reset(registry.layout("scene2", "default"), 0)
        row = world.joint_vector()
        row[GRIPPER_INDEX["left"]] = opening
        world.execute(row)
        world.idle(60)
        boxes = _tcp_frame_boxes(world, "left")
    finally:
        world.close()
    for finger in ("finger_a", "finger_b"):
        lo, hi = boxes[finger]
        assert hi[0] == pytest.approx(FINGER_BELOW_TCP_M, abs=1e-3)  # reaches this far below the TCP
        assert min(abs(lo[1]), abs(hi[1])) == pytest.approx(inner_face(opening), abs=1e-3)
        assert hi[1] - lo[1] == pytest.approx(FINGER_THICKNESS_M, abs=1e-3)
        assert (hi[2] - lo[2]) / 2 == pytest.approx(FINGER_HALF_ACROSS_M, abs=1e-3)
    lo, hi = boxes["palm"]
    assert hi[0] == pytest.approx(0.0, abs=1e-3)  # the palm's underside is at the TCP
    assert (hi[1] - lo[1]) / 2 == pytest.approx(PALM_HALF_ALONG_M, abs=1e-3)
    assert (hi[2] - lo[2]) / 2 == pytest.approx(PALM_HALF_ACROSS_M, abs=1e-3)


def test_a_finger_on_a_bowl_rim_makes_the_table_cramped() -> None:
    # as35 of the first suite: the large cube 1.3 cm from the large bowl's rim, on the fingers' axis
    bowl = _obj("yellow_bowl", "bowl", (0.07, -0.1), BIG_BOWL, role="bowl")
    tight = cramped(_anchor(_obj("large_blue_cube", "cube", (-0.021, -0.129), LARGE_CUBE), bowl))
    assert tight == ["the gripper would land on 'yellow_bowl' (under the right finger) grasping 'large_blue_cube'"]
    assert cramped(_anchor(_obj("large_blue_cube", "cube", (-0.04, -0.129), LARGE_CUBE), bowl)) == []
    # across the fingers' axis the same gap is no problem: only the fingers' 2.4 cm width is there
    assert cramped(_anchor(_obj("large_blue_cube", "cube", (0.07, -0.019), LARGE_CUBE), bowl)) == []


def test_the_palm_hits_a_stack_beside_a_low_object() -> None:
    # a bar on a bar 6.5 cm beside a single bar: the fingers (3.4-4.4 cm out) pass the lower bar's edge (4.7 cm),
    # the palm (5 cm out, its underside 4.5 cm up) comes down on the upper bar (5.2 cm up)
    green = _obj("green_bar", "bar", (0.018, -0.084), BAR)
    yellow = _obj("yellow_bar", "bar", (-0.047, -0.083), BAR)
    blue = _obj("blue_bar", "bar", (-0.047, -0.083), BAR, on="yellow_bar")
    state = WorldState.initial(_anchor(green, yellow, blue))
    assert state.hand_problems("green_bar") == [
        "the gripper would land on 'blue_bar' (under the palm) grasping 'green_bar'"]
    assert WorldState.initial(_anchor(green, yellow)).hand_problems("green_bar") == []
    # 6 cm apart (as the first suite's A0977 left them after a push) the finger lands on the lower bar's edge too
    closer = _obj("yellow_bar", "bar", (-0.042, -0.083), BAR)
    assert WorldState.initial(_anchor(green, closer)).hand_problems("green_bar") == [
        "the gripper would land on 'yellow_bar' (under the left finger) grasping 'green_bar'"]


def test_a_push_that_leaves_its_object_in_the_way_comes_after_the_grasp_it_blocks() -> None:
    # pushing the cylinder along the fingers' axis towards the cube leaves it 6 cm from the cube's centre
    cyl = _obj("cylinder", "cylinder", (-0.14, -0.13), (0.03, 0.03, 0.07))
    cube = _obj("cube", "cube", (-0.02, -0.13), (0.02, 0.02, 0.04))
    far = _obj("ball", "sphere", (-0.08, -0.02), (0.024, 0.024, 0.048))
    push = CandidateAction("push:cylinder->cube", "push", "cylinder", "cube")
    lift = CandidateAction("lift:cube", "lift", "cube")
    probe = _anchor(cyl, cube, far, actions=(push, lift, CandidateAction("lift:ball", "lift", "ball")))
    state = WorldState.initial(probe)
    assert state.broken(push) == [] and state.broken(lift) == []
    assert any("under the left finger" in p and "'cylinder'" in p for p in state.after(push).broken(lift))
    actions = with_relations([push, lift, CandidateAction("lift:ball", "lift", "ball")], probe.objects)
    assert next(a for a in actions if a.verb == "push").after == ("lift:cube",)
    assert incomplete_order(state, actions) is None  # every order the relations allow runs


def _run_lift(layout, seed: int, name: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Lift ``name`` and put it back in SAPIEN; per other object, how far it moved (m)."""
    from robofollow_ros.decisions.primitive import Primitive
    from robofollow_ros.decisions.sim_primitives import PrimitiveRunner

    runner = PrimitiveRunner(layout, seed)
    try:
        before = runner.positions()
        result = runner.run(Primitive("lift", name))
        runner.world.idle(250)
        after = runner.positions()
    finally:
        runner.close()
    moved = {n: math.dist(before[n][:2], after[n][:2]) for n in before if n != name}
    moved["_step_ok"] = float(result.ok)
    return moved


def test_sapien_agrees_where_the_model_says_there_is_no_room(registry) -> None:  # type: ignore[no-untyped-def]
    from robofollow_ros.decisions.authoring import objects_at, rearranged

    # the cramped table of as35 (scene 2.6 with the large cube moved beside the large bowl), as the suite had it
    layout = rearranged(registry.layout("scene2", "scene2.6"), {
        "large_red_cylinder": (-0.14, -0.13), "large_blue_cube": (-0.03, -0.13),
        "small_red_cube": (-0.03, -0.04), "small_blue_cylinder": (-0.14, -0.04)})
    anchor = _anchor(*objects_at(layout, layout.jittered_xy(65319)))
    assert any("'yellow_bowl' (under the right finger) grasping 'large_blue_cube'" in p for p in cramped(anchor))
    assert WorldState.initial(anchor).hand_problems("small_red_cube") == []
    roomy = _run_lift(layout, 65319, "small_red_cube")
    assert roomy["_step_ok"] and max(v for k, v in roomy.items() if k != "_step_ok") < 0.003
    blocked = _run_lift(layout, 65319, "large_blue_cube")
    assert blocked["yellow_bowl"] > 0.005, blocked  # the finger came down on the bowl's rim and shoved it


@pytest.mark.parametrize(("scene", "key", "sphere"), [("scene4", "scene4.1", "red_sphere"),
                                                     ("scene1", "default", "green_sphere")])
def test_a_sphere_set_back_stays_where_it_was_put(registry, scene: str, key: str, sphere: str) -> None:  # type: ignore[no-untyped-def]
    from robofollow_ros.decisions.primitive import Primitive
    from robofollow_ros.decisions.sim_primitives import PrimitiveRunner

    runner = PrimitiveRunner(registry.layout(scene, key), 3)
    try:
        start = runner.positions()[sphere]
        assert runner.run(Primitive("lift", sphere)).ok
        placed = runner.positions()[sphere]
        runner.world.idle(1000)  # 4 s: a sphere let go with the fingers' squeeze in it rolls 2-4 cm in that time
        rested = runner.positions()[sphere]
    finally:
        runner.close()
    assert runner.max_rise()[sphere] >= 0.04
    assert math.dist(start[:2], placed[:2]) < 0.01
    assert math.dist(placed[:2], rested[:2]) < 0.003
