"""The Foxglove layout ``config/foxglove/robofollow_layout.json``, generated from the topic contract.

Written in the format the Foxglove app (and Lichtblick) export and *Import from file*: ``configById``
(panel id ``<PanelType>!<name>`` -> panel config), a mosaic ``layout`` tree of ``{first, second,
direction, splitPercentage}`` nodes whose leaves are panel ids, and ``globalVariables``,
``userNodes``, ``playbackConfig``. ``test_foxglove_layout`` checks it against public exported layouts
and against the recordings' topics and types. Every topic and service comes from
``monitoring.topics`` / ``monitoring.server``, so a renamed topic cannot leave the layout behind.
Regenerate: ``python -m robofollow_ros.monitoring.layout``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.contract import CAMERA_NAMES, TABLE_TOP_Z, WORLD_FRAME
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.server import TRIAL_SERVICES
from robofollow_ros.monitoring.stages import COMPLETION_STATES, STAGE_STATES, STAGE_VALUES, STATUS_NAMES, TRIAL_PHASES

LAYOUT_PATH = Path(__file__).resolve().parents[2] / "config" / "foxglove" / "robofollow_layout.json"

THREE_D = "3D!robofollow"
IMAGES = {camera: f"Image!{camera}" for camera in CAMERA_NAMES}
PLOT = "Plot!scores"
STATES = "StateTransitions!stages"
DETAILS = "RawMessages!status"
LOG = "RosOut!log"
BUTTONS = {service: f"CallService!{service.rsplit('/', 1)[-1]}" for service in TRIAL_SERVICES}
#: Colours of the enumerated states (green done, amber partly, red failed, grey waiting).
STATE_COLOURS = {"done": "#2e7d32", "complete": "#2e7d32", "intent": "#f9a825", "missed": "#c62828",
                 "incomplete": "#c62828", "pending": "#9e9e9e", "running": "#1565c0", "scoring": "#6a1b9a"}

_CAMERA_STATE = {"distance": 1.6, "perspective": True, "phi": 55, "target": [0, 0, 0],
                 "targetOffset": [0, 0.05, TABLE_TOP_Z], "targetOrientation": [0, 0, 0, 1], "thetaOffset": 90,
                 "fovy": 45, "near": 0.01, "far": 5000}
_PUBLISH = {"type": "point", "poseTopic": "/move_base_simple/goal", "pointTopic": "/clicked_point",
            "poseEstimateTopic": "/initialpose", "poseEstimateXDeviation": 0.5, "poseEstimateYDeviation": 0.5,
            "poseEstimateThetaDeviation": 0.26179939}


def _three_d() -> dict[str, Any]:
    """Robot (URDF from /robot_description, moved by TF), scene markers, camera images projected."""
    shown: dict[str, Any] = {topics.ROBOT_DESCRIPTION: {"visible": True}, topics.SCENE: {"visible": True},
                             topics.OBJECTS: {"visible": False}, topics.RESET_CHECK: {"visible": True}}
    for camera in CAMERA_NAMES:
        shown[topics.camera_topic(camera)] = {"visible": True, "cameraInfoTopic": topics.calibration_topic(camera),
                                              "distance": 0.12}
    grid = {"visible": True, "frameLocked": True, "label": "Grid", "instanceId": "robofollow-grid",
            "layerId": "foxglove.Grid", "size": 2, "divisions": 20, "lineWidth": 1, "color": "#248eff",
            "position": [0, 0, TABLE_TOP_Z], "rotation": [0, 0, 0]}
    return {"cameraState": dict(_CAMERA_STATE), "followMode": "follow-pose", "followTf": WORLD_FRAME,
            "scene": {"transforms": {"editable": False, "showLabel": False, "enablePreloading": True,
                                     "visible": False}, "meshUpAxis": "z_up"},
            "transforms": {}, "topics": shown, "layers": {"grid": grid}, "publish": dict(_PUBLISH),
            "imageMode": {}, "foxglovePanelTitle": "rig and scene"}


def _image(camera: str) -> dict[str, Any]:
    return {"cameraState": dict(_CAMERA_STATE), "followMode": "follow-pose", "scene": {}, "transforms": {},
            "topics": {}, "layers": {}, "publish": dict(_PUBLISH),
            "imageMode": {"imageTopic": topics.camera_topic(camera),
                          "calibrationTopic": topics.calibration_topic(camera),
                          "synchronize": False, "rotation": 0, "annotations": {}},
            "foxglovePanelTitle": f"{camera} camera"}


def _plot() -> dict[str, Any]:
    """The totals and the current task's stages 1..3: eight fixed series for any task."""
    series = [{"value": f"{topics.STAGES}.data[{i}]", "enabled": True, "timestampMethod": "receiveTime",
               "label": label} for i, label in enumerate(STAGE_VALUES)]
    return {"paths": series, "minYValue": 0, "maxYValue": 1, "showXAxisLabels": True, "showYAxisLabels": True,
            "showLegend": True, "legendDisplay": "floating", "showPlotValuesInLegend": True, "isSynced": True,
            "xAxisVal": "timestamp", "sidebarDimension": 240, "foxglovePanelTitle": "IS / ES (stage names: status)"}


def _states() -> dict[str, Any]:
    """Trial phase, each stage's state and completion, each keyed on its enumerated values."""
    choices = [TRIAL_PHASES, *([STAGE_STATES] * (len(STATUS_NAMES) - 2)), COMPLETION_STATES]
    paths = [{"value": f"{topics.STATUS}.status[{i}].message", "timestampMethod": "receiveTime", "label": name,
              "enabled": True,
              "customStates": {"type": "discrete", "states": [
                  {"value": v, "label": v, "color": STATE_COLOURS.get(v, "#78909c")} for v in states]}}
             for i, (name, states) in enumerate(zip(STATUS_NAMES, choices, strict=True))]
    return {"paths": paths, "isSynced": True, "showPoints": True, "foxglovePanelTitle": "trial and stage states"}


def _button(service: str) -> dict[str, Any]:
    name = service.rsplit("/", 1)[-1]
    return {"serviceName": service, "requestPayload": "{}", "layout": "vertical",
            "buttonText": name.replace("_", " "), "buttonTooltip": f"std_srvs/Trigger {service}",
            "editingMode": False, "timeoutSeconds": 10, "foxglovePanelTitle": name}


def _split(direction: str, *items: tuple[Any, float]) -> Any:
    """A mosaic tree over ``items`` (node, weight) in order: nested binary splits with the given weights."""
    if len(items) == 1:
        return items[0][0]
    (first, weight), rest = items[0], items[1:]
    total = weight + sum(w for _, w in rest)
    return {"first": first, "second": _split(direction, *rest), "direction": direction,
            "splitPercentage": round(100.0 * weight / total, 3)}


def build_layout() -> dict[str, Any]:
    """3-D rig and scene, three cameras, IS/ES plot, stage states, details, log and trial buttons."""
    config: dict[str, Any] = {THREE_D: _three_d(), PLOT: _plot(), STATES: _states(),
                              DETAILS: {"topicPath": topics.STATUS, "diffTopicPath": "", "diffMethod": "custom",
                                        "diffEnabled": False, "showFullMessageForDiff": False,
                                        "foxglovePanelTitle": "trial and stage details"},
                              LOG: {"searchTerms": [], "minLogLevel": 1, "topicToRender": topics.ROSOUT,
                                    "foxglovePanelTitle": "log"}}
    config.update({panel: _image(camera) for camera, panel in IMAGES.items()})
    config.update({panel: _button(service) for service, panel in BUTTONS.items()})
    left = _split("column", (THREE_D, 55), (PLOT, 27), (STATES, 18))
    cameras = _split("column", (IMAGES["head"], 1), (_split("row", (IMAGES["left_wrist"], 1),
                                                             (IMAGES["right_wrist"], 1)), 1))
    buttons = _split("row", *((panel, 1) for panel in BUTTONS.values()))
    right = _split("column", (cameras, 50), (DETAILS, 22), (LOG, 18), (buttons, 10))
    return {"configById": config, "globalVariables": {}, "userNodes": {}, "playbackConfig": {"speed": 1},
            "layout": _split("row", (left, 58), (right, 42))}


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:] or [str(LAYOUT_PATH)])[0])
    path.write_text(json.dumps(build_layout(), indent=2) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
