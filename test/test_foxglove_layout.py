"""The committed Foxglove layout is the app's exported format, and its panels read topics that exist.

Structure is checked against layouts the Foxglove app and Lichtblick exported (distilled, with their
repositories and paths, in test/data/foxglove_exported_layouts.json) and against the foxglove SDK's
layout models (the app's config keys); topics against the recording contract; and every plotted or
state path is resolved on the messages of a real recording.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import foxglove.layouts as fl
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from robofollow_ros.contract import CAMERA_OPTICAL_FRAMES
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.layout import CONTROLS, LAYOUT_PATH, PLOT, TITLE_KEYS, build_layout
from robofollow_ros.monitoring.robot import urdf_joints
from robofollow_ros.monitoring.server import TRIAL_SERVICES
from robofollow_ros.monitoring.stages import STAGE_SLOTS

REFERENCE = json.loads((Path(__file__).parent / "data" / "foxglove_exported_layouts.json").read_text())
#: The app's panel type -> the SDK model whose config dict holds that panel's keys.
SDK_CONFIG = {"3D": fl.ThreeDeeConfig, "Image": fl.ImageConfig, "Plot": fl.PlotConfig,
              "StateTransitions": fl.StateTransitionsConfig, "RawMessages": fl.RawMessagesConfig,
              "RosOut": fl.LogConfig, "CallService": fl.ServiceCallConfig}
GENERIC_KEYS = set(TITLE_KEYS)  # each app keeps a renamed panel's title in its config, under its own key


def _keys(model: Any) -> set[str]:
    return set(model()._to_dict())


def _leaves(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    return _leaves(node["first"]) + _leaves(node["second"])


def _splits(node: Any) -> list[dict[str, Any]]:
    return [] if isinstance(node, str) else [node, *_splits(node["first"]), *_splits(node["second"])]


def _tab_layouts(layout: dict[str, Any]) -> list[Any]:
    """The mosaics inside the Tab panels (the app keeps their panels in the same ``configById``)."""
    return [tab["layout"] for pid, config in layout["configById"].items() if pid.startswith("Tab!")
            for tab in config["tabs"]]


@pytest.fixture(scope="module")
def layout() -> dict[str, Any]:
    return build_layout()


def test_committed_layout_is_the_generated_one(layout: dict[str, Any]) -> None:
    assert json.loads(LAYOUT_PATH.read_text()) == layout, "regenerate: python -m robofollow_ros.monitoring.layout"


def test_document_and_mosaic_have_the_exported_structure(layout: dict[str, Any]) -> None:
    assert sorted(layout) == REFERENCE["top_level_keys"]
    assert layout["globalVariables"] == {} and layout["userNodes"] == {} and layout["playbackConfig"] == {"speed": 1}
    mosaics = [layout["layout"], *_tab_layouts(layout)]
    for split in (split for mosaic in mosaics for split in _splits(mosaic)):
        assert sorted(split) == REFERENCE["split_node_keys"]
        assert split["direction"] in REFERENCE["directions"] and 0 < split["splitPercentage"] < 100
    leaves = [leaf for mosaic in mosaics for leaf in _leaves(mosaic)]
    assert sorted(leaves) == sorted(layout["configById"]), "every panel placed exactly once"
    controls = layout["configById"][CONTROLS]
    assert [sorted(tab) for tab in controls["tabs"]] == [["layout", "title"]] * len(controls["tabs"])
    assert {leaf for tab in controls["tabs"] for leaf in _leaves(tab["layout"])} == \
        {p for p in layout["configById"] if p.startswith("CallService!")}, "the trial buttons, all in the tabs"


def test_every_panel_id_type_and_config_key_is_one_the_app_knows(layout: dict[str, Any]) -> None:
    known = set(REFERENCE["app_panel_types"]["types"])
    for panel_id, config in layout["configById"].items():
        match = re.fullmatch(r"([A-Za-z0-9]+)!([A-Za-z0-9_-]+)", panel_id)
        assert match, panel_id
        kind = match[1]
        assert kind in known, f"{panel_id}: {kind} is not a panel type of the app"
        sdk = _keys(SDK_CONFIG[kind]) if kind in SDK_CONFIG else set()
        allowed = set(REFERENCE["panel_config_keys"].get(kind, [])) | sdk | GENERIC_KEYS
        assert set(config) <= allowed, f"{panel_id}: unknown keys {sorted(set(config) - allowed)}"
        if kind != "Tab":
            assert len({config.get(key) for key in TITLE_KEYS}) == 1, f"{panel_id}: one title for both apps"
    kinds = [p.split("!")[0] for p in layout["configById"]]
    assert kinds.count("Image") == 3 and kinds.count("CallService") == len(TRIAL_SERVICES)
    assert {"3D", "Plot", "StateTransitions", "RawMessages", "RosOut", "Tab"} <= set(kinds)


def test_the_legend_sits_beside_the_data_and_a_tab_holds_at_most_four_buttons(layout: dict[str, Any]) -> None:
    """What test_lichtblick_layout measures at 1280 x 720, kept by the config: the plot's legend left of the
    data (``floating`` draws it over the data), and at most four Call Service tiles a row (narrower, a
    button's text wraps and the tile no longer shows it)."""
    plot = layout["configById"][PLOT]
    assert plot["showLegend"] and plot["legendDisplay"] == "left" and plot["sidebarDimension"] >= 200
    tabs = layout["configById"][CONTROLS]["tabs"]
    assert all(len(_leaves(tab["layout"])) <= 4 for tab in tabs), [_leaves(tab["layout"]) for tab in tabs]


def test_every_frame_a_recording_names_has_its_axes_hidden(layout: dict[str, Any], registry: Any) -> None:
    """Per frame, the form both apps read (Lichtblick ignores ``scene.transforms.visible``): the URDF's
    links (read here with the recorder's own URDF reader), the optical frames and every object's frame."""
    from robofollow_ros.robot.rig_config import load_rig_config

    transforms = layout["configById"]["3D!robofollow"]["transforms"]
    assert all(v == {"visible": False} for v in transforms.values())
    hidden = {key.removeprefix("frame:") for key in transforms}
    joints = urdf_joints(load_rig_config().urdf_path.read_text())
    links = {j.parent for j in joints} | {j.child for j in joints}
    objects = {f"{topics.OBJECT_FRAME_PREFIX}{name}" for task in registry.eval_tasks()
               for name in registry.layout_of(task).names}
    assert len(links) > 20 and len(objects) > 10
    assert links | set(CAMERA_OPTICAL_FRAMES.values()) | objects <= hidden
    assert layout["configById"]["3D!robofollow"]["scene"]["transforms"]["visible"] is False  # Foxglove's toggle


def test_nested_configs_use_the_apps_keys(layout: dict[str, Any]) -> None:
    panels = layout["configById"]
    for panel_id, config in panels.items():
        if "imageMode" in config:
            assert set(config["imageMode"]) <= _keys(fl.ImageModeConfig), panel_id
        if panel_id.startswith("Plot!"):
            for series in config["paths"]:
                assert set(series) <= _keys(fl.PlotSeries) and series["timestampMethod"] == "receiveTime"
        if panel_id.startswith("StateTransitions!"):
            for series in config["paths"]:
                assert set(series) <= _keys(fl.StateTransitionsSeries)
                custom = series["customStates"]
                assert custom["type"] == "discrete" and set(custom) == set(fl.StateTransitionsDiscreteCustomStates()
                                                                             ._to_dict())
                for state in custom["states"]:
                    assert set(state) == set(fl.StateTransitionsDiscreteCustomState()._to_dict())


def test_topics_and_services_are_the_contracts(layout: dict[str, Any]) -> None:
    known = set(topics.TOPICS)
    panels = layout["configById"]
    used: set[str] = set()
    for config in panels.values():
        used |= set(config.get("topics", {}))
        used |= {t["cameraInfoTopic"] for t in config.get("topics", {}).values() if "cameraInfoTopic" in t}
        mode = config.get("imageMode", {})
        used |= {mode[k] for k in ("imageTopic", "calibrationTopic") if k in mode}
        used |= {config[k] for k in ("topicToRender", "topicPath") if k in config}
        used |= {p["value"].split(".")[0] for p in config.get("paths", [])}
    assert used and used <= known, sorted(used - known)
    assert {p["serviceName"] for i, p in panels.items() if i.startswith("CallService!")} == set(TRIAL_SERVICES)
    three_d = panels["3D!robofollow"]["topics"]
    assert three_d[topics.ROBOT_DESCRIPTION]["visible"] and three_d[topics.SCENE]["visible"]


def _resolve(message: Any, path: str) -> Any:
    """Follow a Foxglove message path like ``status[2].message`` on a decoded message."""
    value = message
    for name, index in re.findall(r"(\w+)(?:\[(\d+)\])?", path):
        value = getattr(value, name)
        if index:
            value = value[int(index)]
    return value


def test_every_plotted_and_state_path_resolves_on_a_recording(layout: dict[str, Any], tmp_path: Path,
                                                              registry: Any) -> None:
    from robofollow_ros.monitoring.recorder import TrialRecorder
    from robofollow_ros.scoring.frame import frame_from_dict
    from robofollow_ros.scoring.monitor import StageMonitor
    from robofollow_ros.scoring.synthetic import Puppet

    task = registry.eval_task("L0_place_yellow_block_1_behind_red_cylinder")
    recorder = TrialRecorder(tmp_path, registry=registry)
    observer = recorder.for_trial("t")
    observer.on_start(task, 1, None)
    monitor = StageMonitor(task)
    for i, raw in enumerate(f.to_dict() for f in Puppet(task).pick("right", "yellow_block_1").frames):
        monitor.update(frame_from_dict(raw, i))
        observer.on_frame(i, raw, monitor.live())
    observer.on_end(monitor.result(), monitor.live())
    last: dict[str, Any] = {}
    with recorder.path_of("t").open("rb") as f:
        for _, channel, _, msg in make_reader(f, decoder_factories=[DecoderFactory()]).iter_decoded_messages():
            last[channel.topic] = msg
    panels = layout["configById"]
    plotted = [_resolve(last[p["value"].split(".")[0]], p["value"].split(".", 1)[1])
               for p in panels["Plot!scores"]["paths"]]
    assert all(isinstance(v, float) for v in plotted) and plotted[0] == monitor.result()["intent_score"]
    for series in panels["StateTransitions!stages"]["paths"]:
        topic, path = series["value"].split(".", 1)
        state = _resolve(last[topic], path)
        assert state in {s["value"] for s in series["customStates"]["states"]}, (series["label"], state)


def test_no_task_has_more_stages_than_the_plot_shows(registry: Any) -> None:
    from robofollow_ros.scoring.monitor import score_trajectory
    from robofollow_ros.scoring.synthetic import Puppet

    seen: set[tuple[str, str]] = set()
    for task in registry.eval_tasks():
        if (task.scene, task.action) not in seen:
            seen.add((task.scene, task.action))
            assert len(score_trajectory(task, Puppet(task).hold(2).frames)["phases"]) <= STAGE_SLOTS, task.task_id
