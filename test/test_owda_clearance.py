"""Room for the gripper: the world model's finger and palm boxes, checked against each rig in SAPIEN, its
verdicts on hand-built tables, and what SAPIEN does where it says there is no room and where it says there is."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.catalog import incomplete_order, with_relations
from robofollow_ros.decisions.clearance import hand_at, push_sweep
from robofollow_ros.decisions.gripper import Gripper, grasp_tcp_height
from robofollow_ros.decisions.world import WorldState, cramped
from robofollow_ros.robot.rig_config import RigConfig, load_rig_config
from robofollow_ros.robot.rig_model import GripperGeometry

PROV = {"source": "sim_layout", "scene": "test", "layout": "hand", "seed": 0}
LARGE_CUBE = (0.03, 0.03, 0.06)
BIG_BOWL = (0.048, 0.048, 0.04)
BAR = (0.018, 0.028, 0.026)
SMALL_CUBE = (0.02, 0.02, 0.04)
#: Per rig, the links whose collision shapes are the palm: everything of the gripper above the fingers (the
#: ALOHA's: the housing and the bar the fingers slide on, both on gripper_link, and the prop).
PALM_LINKS = {"robofollow": ("left_palm",), "aloha": ("vx300s_left/gripper_link", "vx300s_left/gripper_prop_link")}
CORNERS = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], dtype=np.float64)


def _obj(name: str, shape: str, xy: tuple[float, float], extent: tuple[float, float, float], role: str = "object",
         on: str | None = None) -> AnchorObject:
    return AnchorObject(name, shape, "red", "", xy, role, on, None, "", extent)


def _anchor(*objs: AnchorObject, actions: tuple[CandidateAction, ...] = ()) -> Anchor:
    return Anchor("t", "action_sequence" if actions else "object_centric", "test", objs, actions, PROV)


def _tcp_frame_boxes(rig: RigConfig, arm: str, openings: tuple[float, ...]) -> list[dict[str, np.ndarray]]:
    """Per opening, the min and max corner of each finger link's and of the palm's collision shapes in the TCP frame
    (x approach, y opening), the arm at zero and the fingers where the rig puts them: the rig's URDF in a
    physics-only SAPIEN scene, each shape as PhysX has it (a box's corners, a mesh's convex hull's vertices)."""
    import sapien

    from robofollow_ros.sim.articulation import load_rig_articulation

    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    robot = load_rig_articulation(scene, rig, visuals=False)
    model = robot.create_pinocchio_model()
    joints = [j.name for j in robot.active_joints]
    index = {link.name: i for i, link in enumerate(robot.links)}
    parts = {robot.find_joint_by_name(f.name).child_link.name: (robot.find_joint_by_name(f.name).child_link,)
             for f in rig.fingers[arm]}
    parts["palm"] = tuple(robot.find_link_by_name(name) for name in PALM_LINKS[rig.name])
    out = []
    for opening in openings:
        q = np.zeros(len(joints))
        for finger in rig.fingers[arm]:
            q[joints.index(finger.name)] = finger.position(opening)
        model.compute_forward_kinematics(q)
        tcp = model.get_link_pose(index[rig.tcp_links[arm]]).to_transformation_matrix()
        boxes = {}
        for part, links in parts.items():
            points = []
            for link in links:
                for shape in link.collision_shapes:
                    if isinstance(shape, sapien.physx.PhysxCollisionShapeBox):
                        local = CORNERS * shape.half_size
                    else:
                        local = np.asarray(shape.get_vertices()) * np.asarray(shape.scale)
                    pose = (model.get_link_pose(index[link.name]) * shape.local_pose).to_transformation_matrix()
                    points.append(local @ pose[:3, :3].T + pose[:3, 3])
            in_tcp = (np.concatenate(points) - tcp[:3, 3]) @ tcp[:3, :3]
            boxes[part] = np.array([in_tcp.min(0), in_tcp.max(0)])
        out.append(boxes)
    return out


@pytest.mark.parametrize("rig_name", ["robofollow", "aloha"])
def test_the_gripper_boxes_are_the_rigs(rig_name: str) -> None:
    """Each rig YAML's ``gripper_geometry`` (the built-in rig's: the defaults) is where its collision shapes are."""
    rig = load_rig_config(rig_name)
    gripper = Gripper.of(rig)
    g = rig.gripper_geometry
    openings = (0.0, 0.85, 1.0)
    for opening, boxes in zip(openings, _tcp_frame_boxes(rig, "left", openings), strict=True):
        fingers = [part for part in boxes if part != "palm"]
        assert len(fingers) == 2
        for finger in fingers:
            lo, hi = boxes[finger]
            where = (rig_name, finger, opening)
            assert hi[0] == pytest.approx(g.finger_below_tcp, abs=2e-4), where  # reaches this far below the TCP
            inner = lo[1] if lo[1] + hi[1] > 0 else -hi[1]  # the face towards the TCP's centre line
            assert inner == pytest.approx(gripper.inner_face(opening), abs=2e-4), where
            assert hi[1] - lo[1] == pytest.approx(g.finger_thickness, abs=2e-4), where
            assert (hi[2] - lo[2]) / 2 == pytest.approx(g.finger_half_across, abs=2e-4), where
        lo, hi = boxes["palm"]
        assert -hi[0] == pytest.approx(g.palm_above_tcp, abs=2e-4)  # the palm's lowest point, above the TCP
        assert (hi[1] - lo[1]) / 2 == pytest.approx(g.palm_half_along, abs=2e-4)
        assert (hi[2] - lo[2]) / 2 == pytest.approx(g.palm_half_across, abs=2e-4)
        np.testing.assert_allclose(lo[1:] + hi[1:], 0.0, atol=4e-4)  # centred on the TCP's approach line


def test_the_built_in_rigs_gripper_is_the_default_and_the_alohas_is_its_own() -> None:
    assert load_rig_config("robofollow").gripper_geometry == GripperGeometry()
    aloha = load_rig_config("aloha").gripper_geometry
    assert aloha.palm_above_tcp > 0.03 and aloha.palm_half_along > GripperGeometry().palm_half_along


def test_the_world_model_checks_room_for_the_active_rigs_gripper(monkeypatch: pytest.MonkeyPatch) -> None:
    # a small cube 4.5 cm farther than the grasped one and 4 cm to its right: the built-in rig's fingers (1.2 cm
    # either side of their axis) pass its near edge (2.5 cm off the axis), the ALOHA's (3.05 cm: their carriages)
    # land on it
    grasped = _obj("cube", "cube", (0.0, -0.1), SMALL_CUBE)
    beside = _obj("other_cube", "cube", (0.04, -0.055), SMALL_CUBE)
    table = _anchor(grasped, beside)
    monkeypatch.delenv("ROBOFOLLOW_RIG", raising=False)
    assert WorldState.initial(table).gripper.geometry == GripperGeometry()
    assert cramped(table) == []
    monkeypatch.setenv("ROBOFOLLOW_RIG", "aloha")
    state = WorldState.initial(table)
    assert state.gripper.geometry == load_rig_config("aloha").gripper_geometry
    assert state.take("other_cube").gripper is state.gripper  # read once per world, carried along
    assert cramped(table) == ["the gripper would land on 'other_cube' (under the right finger) grasping 'cube'",
                              "the gripper would land on 'cube' (under the left finger) grasping 'other_cube'"]


def test_the_palm_and_the_fingers_sit_where_the_rig_has_them() -> None:
    aloha = Gripper.of(load_rig_config("aloha"))
    g = aloha.geometry
    tcp = grasp_tcp_height(0.04)
    parts = {p.what: p for p in hand_at(aloha, (0.0, 0.0), 0.02, 0.04)}
    assert parts["palm"].bottom == pytest.approx(tcp + g.palm_above_tcp)  # the ALOHA's bar, 3.7 cm above its TCP
    assert parts["palm"].half == (g.palm_half_along, g.palm_half_across)
    # the oracle opens the ALOHA to its own finger_half_gap (0 ... 0.0346 m): (0.02 + 0.014) / 0.0346
    centre = aloha.inner_face(0.034 / 0.0346) + g.finger_thickness / 2
    assert parts["right finger"].xy[0] == pytest.approx(centre)
    assert parts["right finger"].bottom == pytest.approx(tcp - g.finger_below_tcp)
    fingers, palm = push_sweep(aloha, (0.0, 0.0), (1.0, 0.0), 0.06)
    assert fingers.half == pytest.approx((0.03 + g.finger_inner_closed + g.finger_thickness, g.finger_half_across))
    assert palm.bottom == pytest.approx(0.052 + g.palm_above_tcp)
    assert Gripper.of(load_rig_config("aloha")).opening_with_inner_face(g.finger_inner_closed + g.finger_travel) == 1.0


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
