"""`robofollow owda capture`: anchors from SAPIEN ground truth, from perception on a rendered frame, and from
the perception node's grounded objects in a running sim graph; each goes through the validator."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.deciders import ReferenceDecider
from robofollow_ros.decisions.generator import generate_on_anchors
from robofollow_ros.decisions.validate import validate_suite


def test_capture_object_centric_anchor_from_sim(tmp_path: Path, registry) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "a.json"
    assert main(["owda", "capture", "--scene", "scene4", "--layout", "scene4.1", "--seed", "7",
                 "--out", str(out)]) == 0
    anchor = Anchor.from_dict(json.loads(out.read_text()))
    assert anchor.kind == "object_centric" and anchor.anchor_id == "captured_scene4_scene4.1_7"
    assert anchor.provenance["source"] == "sim_ground_truth" and anchor.provenance["seed"] == 7
    assert "time" in anchor.provenance
    nominal = registry.layout("scene4", "scene4.1").jittered_xy(7)
    for o in anchor.objects:  # settled positions stay near the seed's layout positions
        assert math.dist(o.xy, nominal[o.source_name]) < 0.03, o.name
    # ids say what an object is; the simulator's name (which says "right", "top") is kept apart
    cylinder = anchor.object("green_cylinder")
    assert cylinder.sim_name == "green_cylinder_top" and cylinder.on_top_of == "blue_cube"
    answer = ReferenceDecider().decide(anchor, "Pick up all the spheres. Skip the red sphere.")
    assert answer.decision == ("blue_sphere",)


def test_capture_action_sequence_anchor_has_physical_relations(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    assert main(["owda", "capture", "--scene", "scene4", "--layout", "scene4.1", "--seed", "1",
                 "--kind", "action_sequence", "--id", "rig_a", "--out", str(out)]) == 0
    anchor = Anchor.from_dict(json.loads(out.read_text()))
    assert anchor.kind == "action_sequence" and len(anchor.actions) >= 3
    by_subject = {a.obj: a for a in anchor.actions}
    for a in anchor.actions:  # an object with something on it moves only after that thing was moved off it
        for top in (o for o in anchor.objects if o.on_top_of == a.obj):
            assert by_subject[top.name].verb in ("place", "stack") and by_subject[top.name].action_id in a.requires
    suite = generate_on_anchors([anchor], per_anchor=4)
    assert validate_suite(suite)["atomic_families"] >= 1


def test_capture_from_perception_grounds_every_object_near_the_truth(tmp_path: Path) -> None:
    truth, seen = tmp_path / "truth.json", tmp_path / "seen.json"
    common = ["owda", "capture", "--scene", "scene2", "--layout", "scene2.3", "--seed", "5"]
    assert main([*common, "--out", str(truth)]) == 0
    assert main([*common, "--source", "perception", "--out", str(seen)]) == 0
    a = Anchor.from_dict(json.loads(truth.read_text()))
    b = Anchor.from_dict(json.loads(seen.read_text()))
    assert b.provenance["source"] == "perception" and b.provenance["image_source"] == "sim"
    assert [o.name for o in a.objects] == [o.name for o in b.objects]
    for x, y in zip(a.objects, b.objects, strict=True):  # perception's positions within 1 cm of ground truth
        assert math.dist(x.xy, y.xy) < 0.01, x.name
    decide = ReferenceDecider().decide
    text = "Pick up all the objects. Do not touch anything red. Take only the one closest to the front left corner."
    assert decide(a, text).decision == decide(b, text).decision == ("large_blue_cube",)


def test_capture_from_the_perception_node_in_a_sim_graph(tmp_path: Path) -> None:
    """sim_node renders, perception_node grounds; `capture --source ros` listens on /robofollow/objects only."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import String
    from std_srvs.srv import Trigger
    from visualization_msgs.msg import MarkerArray

    from robofollow_ros.nodes import trial_protocol as tp
    from robofollow_ros.nodes.perception_node import PerceptionNode
    from robofollow_ros.nodes.sim_node import SimNode
    from ros_harness import RosHarness

    task, out = "L0_pickup_red_cylinder", tmp_path / "ros.json"  # scene2, default layout
    result: dict[str, int] = {}
    with RosHarness() as ros:
        ros.add(SimNode(context=ros.context, parameter_overrides=[
            Parameter("render", value=True), Parameter("depth", value=True), Parameter("camera_hz", value=0.0)]))
        ros.add(PerceptionNode(context=ros.context, parameter_overrides=[Parameter("task", value=task)]))
        probe = ros.node("capture_probe")
        seen: list[MarkerArray] = []
        probe.create_subscription(MarkerArray, "/robofollow/objects", ros.collector(seen), 100)
        trial = probe.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        render = probe.create_client(Trigger, tp.SERVICE_SIM_RENDER)
        capture = threading.Thread(target=lambda: result.setdefault("code", main([
            "owda", "capture", "--source", "ros", "--scene", "scene2", "--layout", "default", "--frames", "2",
            "--timeout", "900", "--id", "rig_like", "--out", str(out)])), daemon=True)
        capture.start()
        ros.wait_for(lambda: probe.count_subscribers("/robofollow/objects") >= 2, timeout=120,
                     what="the capture's subscription")
        trial.publish(String(data=json.dumps({"id": "owda-capture", "phase": "resetting", "task": task, "seed": 3})))

        def grounded() -> list[MarkerArray]:
            return [m for m in seen if m.markers and all(k.text for k in m.markers)]

        for n in range(1, 4):  # the first frame has no depth partner yet; ask for more until the capture is done
            ros.wait_for(lambda n=n: len(grounded()) >= n or not capture.is_alive(), timeout=900,
                         what="perception's markers")
            if not capture.is_alive():
                break
            assert render.wait_for_service(timeout_sec=60)
            future = render.call_async(Trigger.Request())
            ros.wait_for(future.done, timeout=900, what="a render")
        capture.join(timeout=900)
        truth = next(m for m in reversed(seen) if m.markers and not any(k.text for k in m.markers))
    assert result.get("code") == 0
    anchor = Anchor.from_dict(json.loads(out.read_text()))
    assert anchor.provenance["source"] == "perception" and anchor.provenance["topic"] == "/robofollow/objects"
    true_xy = {m.ns: (m.pose.position.x, m.pose.position.y) for m in truth.markers}  # sim_node's ground truth
    for o in anchor.objects:
        assert math.dist(o.xy, true_xy[o.source_name]) < 0.01, o.name
    suite = generate_on_anchors([anchor], per_anchor=3)
    assert validate_suite(suite)["atomic_families"] == 3


@pytest.mark.parametrize(("argv", "needle"), [
    (["--scene", "scene9", "--layout", "default"], "--scene: unknown scene 'scene9'"),
    (["--scene", "scene2", "--layout", "nope"], "--layout"),
    (["--scene", "scene2", "--layout", "default", "--seed", "-1"],
     "argument --seed: must be an integer in 0..4294967295, got '-1'"),
    (["--scene", "scene2", "--layout", "default", "--source", "ros", "--frames", "0"],
     "argument --frames: must be an integer in 1..1000, got '0'"),
    (["--scene", "scene2", "--layout", "default", "--source", "ros", "--timeout", "0.5"], "no grounded objects"),
])
def test_capture_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                   needle: str) -> None:
    assert main(["owda", "capture", *argv, "--out", str(tmp_path / "x.json")]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
