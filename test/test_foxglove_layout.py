"""The committed Foxglove layout is the generated one and points at the topics and services that exist."""

from __future__ import annotations

import json
from typing import Any

from robofollow_ros.benchmark import default_registry
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.layout import LAYOUT_PATH, PLOT_STAGES, build_layout
from robofollow_ros.monitoring.server import TRIAL_SERVICES
from robofollow_ros.scoring.monitor import score_trajectory
from robofollow_ros.scoring.synthetic import Puppet


def _panels(node: Any) -> list[dict[str, Any]]:
    if node.get("type") == "panel":
        return [node]
    return [p for item in node.get("items", []) for p in _panels(item["content"])]


def test_committed_layout_is_the_generated_one() -> None:
    assert json.loads(LAYOUT_PATH.read_text()) == build_layout(), \
        "regenerate: python -m robofollow_ros.monitoring.layout"


def test_layout_has_the_panels_the_issue_names() -> None:
    panels = _panels(build_layout()["content"])
    kinds = [p["panelType"] for p in panels]
    assert kinds.count("Image") == 3 and {"ThreeDee", "Plot", "StateTransitions", "RawMessages", "Log"} <= set(kinds)
    images = {p["config"]["imageMode"]["imageTopic"] for p in panels if p["panelType"] == "Image"}
    assert images == {topics.camera_topic(c) for c in ("head", "left_wrist", "right_wrist")}
    plot = next(p for p in panels if p["panelType"] == "Plot")
    values = {s["value"] for s in plot["config"]["paths"]}
    assert f"{topics.SCORE}.intent" in values and f"{topics.SCORE}.stages.stage3_finish.exec" in values
    services = {p["config"]["serviceName"] for p in panels if p["panelType"] == "ServiceCall"}
    assert services == set(TRIAL_SERVICES)


def test_plot_covers_every_stage_name_the_scorer_emits() -> None:
    registry, seen, stages = default_registry(), set(), set()
    for task in registry.eval_tasks():
        if (task.scene, task.action) not in seen:
            seen.add((task.scene, task.action))
            stages |= {p["phase"] for p in score_trajectory(task, Puppet(task).hold(2).frames)["phases"]}
    assert stages == set(PLOT_STAGES)
