"""Doubt in the operator's view (issue 37): the 3-D scene labels doubtful objects and draws them faint, and
``/robofollow/status`` carries perception's status (doubts, depth age, rates, frames dropped)."""

from __future__ import annotations

import pytest

from robofollow_ros.monitoring import stages
from robofollow_ros.monitoring.scene import DOUBTFUL_ALPHA, MIN_ALPHA, SceneBuilder
from robofollow_ros.scoring.synthetic import Puppet

TASK = "L0_place_yellow_block_1_behind_red_cylinder"
BLOCK = "yellow_block_1"


def _scene(registry, **extra):  # type: ignore[no-untyped-def]
    task = registry.eval_task(TASK)
    frame = {**Puppet(task).frames[0].to_dict(), **extra}
    markers = SceneBuilder(task, registry.layout_of(task), registry.slot_xy).update(frame).markers
    solids = {m.ns: m.color.a for m in markers if m.ns.startswith("object/") and not m.text and not m.points}
    texts = [m.text for m in markers if m.text]
    return solids, texts


def test_a_doubtful_object_is_drawn_faint_with_a_doubtful_label(registry):  # type: ignore[no-untyped-def]
    solids, texts = _scene(registry)
    assert solids[f"object/{BLOCK}"] == 1.0 and not [t for t in texts if t.startswith("doubtful")]
    solids, texts = _scene(registry, doubtful=[BLOCK])
    assert solids[f"object/{BLOCK}"] == pytest.approx(DOUBTFUL_ALPHA)
    assert f"doubtful: {BLOCK}" in texts and solids["object/red_cylinder"] == 1.0
    # From /robofollow/objects: opacity follows the confidence, never invisible.
    solids, _ = _scene(registry, confidence={BLOCK: 0.0, "red_cylinder": 0.8})
    assert solids[f"object/{BLOCK}"] == pytest.approx(MIN_ALPHA) and solids["object/red_cylinder"] == pytest.approx(0.8)


def test_perceptions_status_joins_the_status_array() -> None:
    report = {"layout": "scene1:scene1_2", "objects": {BLOCK: {"confidence": 0.2}, "red_cylinder": {"confidence": 0.9}},
              "doubts": {"blue_bar_5": "stands 4.0 cm tall where it should be 2.6 cm"}, "depth_age_s": 1.4,
              "frames": {"camera_hz": 29.8, "processed_hz": 21.0, "dropped": 12}, "missing": []}
    array = stages.status(0, {"phase": "running"}, None, report)
    assert [s.name for s in array.status] == [*stages.STATUS_NAMES, stages.PERCEPTION_NAME]
    entry = array.status[-1]
    values = {kv.key: kv.value for kv in entry.values}
    assert entry.message == "doubtful" and values["doubtful"] == BLOCK and "blue_bar_5: stands" in values["doubts"]
    assert values["depth_age_s"] == "1.4" and values["frames_dropped"] == "12" and values["camera_hz"] == "29.8"
    trial = {kv.key: kv.value for kv in array.status[0].values}  # the summary at the top, without scrolling
    assert trial["perception"] == f"doubtful: blue_bar_5, {BLOCK}"
    calm = stages.status(0, None, None, {**report, "objects": {}, "doubts": {}})
    assert calm.status[-1].message == "dropping frames"
    assert {kv.key: kv.value for kv in calm.status[0].values}["perception"] == "dropping frames: 12 dropped"
    assert [s.name for s in stages.status(0, None, None).status] == list(stages.STATUS_NAMES)  # sim: no entry


def test_perception_logs_a_line_when_its_doubt_changes_and_not_per_frame() -> None:
    doubting = {"objects": {BLOCK: {"confidence": 0.2}}, "doubts": {"blue_bar_5": "half hidden"},
                "frames": {"dropped": 3}}
    key, line = stages.doubt_change("", {"objects": {}, "frames": {}})
    assert line is None  # sure from the start: nothing to say
    key, line = stages.doubt_change(key, doubting)
    assert line == f"perception doubtful: blue_bar_5, {BLOCK} (blue_bar_5: half hidden)"
    assert stages.doubt_change(key, {**doubting, "frames": {"dropped": 9}}) == (key, None)  # the same doubt
    key, line = stages.doubt_change(key, {"objects": {BLOCK: {"confidence": 0.95}}, "frames": {"dropped": 9}})
    assert line == "perception: sure of every object again"
