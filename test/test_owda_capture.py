"""`robofollow owda capture`: anchors from SAPIEN ground truth, usable by the solver and the reference decider."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.deciders import ReferenceDecider


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
        assert math.dist(o.xy, nominal[o.name]) < 0.03, o.name
    assert anchor.object("green_cylinder_top").on_top_of == "blue_cube_right"
    answer = ReferenceDecider().decide(anchor, "Pick up all the spheres. Skip the red sphere.")
    assert answer.decision == ("blue_sphere",)


def test_capture_action_sequence_anchor_has_physical_preconditions(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    assert main(["owda", "capture", "--scene", "scene4", "--layout", "scene4.1", "--seed", "1",
                 "--kind", "action_sequence", "--id", "rig_a", "--out", str(out)]) == 0
    anchor = Anchor.from_dict(json.loads(out.read_text()))
    assert anchor.kind == "action_sequence" and len(anchor.actions) >= 3
    by_subject = {a.obj: a for a in anchor.actions}
    # this seed's catalog moves both: the cube under the green cylinder moves only after the cylinder has
    assert by_subject["green_cylinder_top"].action_id in by_subject["blue_cube_right"].requires
    assert not by_subject["green_cylinder_top"].requires


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


@pytest.mark.parametrize(("argv", "needle"), [
    (["--scene", "scene9", "--layout", "default"], "--scene: unknown scene 'scene9'"),
    (["--scene", "scene2", "--layout", "nope"], "--layout"),
    (["--scene", "scene2", "--layout", "default", "--seed", "-1"], "--seed: must be >= 0, got -1"),
])
def test_capture_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                   needle: str) -> None:
    assert main(["owda", "capture", *argv, "--out", str(tmp_path / "x.json")]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
