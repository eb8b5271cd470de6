"""The Foxglove layout ``config/foxglove/robofollow_layout.json``, generated from the topic contract.

Built with the SDK's ``foxglove.layouts`` types so the file follows Foxglove's layout schema, and
from ``monitoring.topics`` so a renamed topic cannot leave the layout behind (a test compares the
committed file with ``build_layout()``). Regenerate: ``python -m robofollow_ros.monitoring.layout``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import foxglove.layouts as fl

from robofollow_ros.contract import CAMERA_NAMES, WORLD_FRAME
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.server import TRIAL_SERVICES

#: Stage names of every scene, for the plot and state panels (a missing stage just plots nothing).
PLOT_STAGES = ("stage1_source_select", "stage1_push_setup", "stage1_action_a", "stage2_relative_place",
               "stage2_stack", "stage2_push", "stage2_place_bowl", "stage2_route", "stage2_unstack_slot",
               "stage2_action_b", "stage3_orientation", "stage3_finish")

LAYOUT_PATH = Path(__file__).resolve().parents[2] / "config" / "foxglove" / "robofollow_layout.json"


def _images() -> fl.SplitContainer:
    return fl.SplitContainer(direction="column", items=[
        fl.SplitItem(content=fl.ImagePanel(title=f"{camera} camera", config=fl.ImageConfig(
            image_mode=fl.ImageModeConfig(image_topic=topics.camera_topic(camera)))))
        for camera in CAMERA_NAMES])


def _plot() -> fl.PlotPanel:
    series = [fl.PlotSeries(value=f"{topics.SCORE}.intent", label="IS (total)"),
              fl.PlotSeries(value=f"{topics.SCORE}.exec", label="ES (total)")]
    series += [fl.PlotSeries(value=f"{topics.SCORE}.stages.{stage}.{kind}", label=f"{stage} {kind}")
               for stage in PLOT_STAGES for kind in ("intent", "exec")]
    return fl.PlotPanel(title="IS / ES", config=fl.PlotConfig(paths=series, min_y_value=0.0, max_y_value=1.0))


def _states() -> fl.StateTransitionsPanel:
    paths = [fl.StateTransitionsSeries(value=f"{topics.TRIAL}.phase", label="trial phase"),
             fl.StateTransitionsSeries(value=f"{topics.SCORE}.complete", label="complete")]
    paths += [fl.StateTransitionsSeries(value=f"{topics.SCORE}.stages.{stage}.exec_reason", label=stage)
              for stage in PLOT_STAGES]
    return fl.StateTransitionsPanel(title="stage states", config=fl.StateTransitionsConfig(paths=paths))


def _services() -> fl.SplitContainer:
    return fl.SplitContainer(direction="row", items=[
        fl.SplitItem(content=fl.ServiceCallPanel(title=name.rsplit("/", 1)[-1], config=fl.ServiceCallConfig(
            service_name=name, request_payload="{}", button_text=name.rsplit("/", 1)[-1].replace("_", " "))))
        for name in TRIAL_SERVICES])


def build_layout() -> dict[str, Any]:
    """3-D scene, three cameras, IS/ES plot, stage states, trial state, log and trial-control buttons."""
    three_d = fl.ThreeDeePanel(title="scene", config=fl.ThreeDeeConfig(
        follow_tf=WORLD_FRAME, fixed_frame=WORLD_FRAME,
        topics={topics.SCENE: fl.BaseRendererSceneUpdateTopicSettings(visible=True)}))
    left = fl.SplitContainer(direction="column", items=[
        fl.SplitItem(proportion=3, content=three_d),
        fl.SplitItem(proportion=2, content=_plot()),
        fl.SplitItem(proportion=1, content=_states()),
    ])
    right = fl.SplitContainer(direction="column", items=[
        fl.SplitItem(proportion=3, content=_images()),
        fl.SplitItem(proportion=1, content=fl.RawMessagesPanel(
            title="trial state", config=fl.RawMessagesConfig(topic_path=topics.TRIAL))),
        fl.SplitItem(proportion=1, content=fl.LogPanel(title="log", config=fl.LogConfig(topic_to_render=topics.LOG))),
        fl.SplitItem(proportion=1, content=_services()),
    ])
    layout = fl.Layout(content=fl.SplitContainer(direction="row", items=[
        fl.SplitItem(proportion=3, content=left), fl.SplitItem(proportion=2, content=right)]))
    result: dict[str, Any] = json.loads(layout.to_json())
    return result


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:] or [str(LAYOUT_PATH)])[0])
    path.write_text(json.dumps(build_layout(), indent=2) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
