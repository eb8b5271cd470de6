"""The Foxglove layout ``config/foxglove/robofollow_layout.json``, generated from the topic contract.

Written in the format the Foxglove app (and Lichtblick) export and *Import from file*: ``configById``
(panel id ``<PanelType>!<name>`` -> panel config), a mosaic ``layout`` tree of ``{first, second,
direction, splitPercentage}`` nodes whose leaves are panel ids, and ``globalVariables``,
``userNodes``, ``playbackConfig``. ``test_foxglove_layout`` checks it against public exported layouts
and against the recordings' topics and types. Every topic and service comes from
``monitoring.topics`` / ``monitoring.server``, so a renamed topic cannot leave the layout behind.
Regenerate: ``python -m robofollow_ros.monitoring.layout``.

One file serves both apps (``test_lichtblick_layout`` loads it in Lichtblick 1.24): each panel's title
is set under both apps' keys; the 3-D panel hides frame axes per frame (``transforms.frame:<name>``,
read by both; Foxglove 2.x also reads ``scene.transforms.visible``, Lichtblick does not), the frames
being the rig URDF's links, the cameras' optical frames and every registry object's ``object/<name>``;
State Transitions colours (``customStates``) are Foxglove's, Lichtblick draws its own colours with the
same state names; the plot's legend sits left of the data; and the trial buttons sit in a tab panel, a
row of horizontal Call Service tiles per tab, tall enough for Lichtblick, which always draws the
request and response editors above the button (Foxglove hides them with ``editingMode: false``).
Lichtblick's response editor is two text rows of a tile's half-width, where the pretty-printed answer
shows ``{`` and ``"success": ...``: the answer is read in the log instead, where ``foxglove_node`` writes
every answer of the trial manager as ``<service>: <message>`` (a warning when it did not succeed).
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
CONTROLS = "Tab!controls"
#: Geometry, in percent, for 1280 x 720 in Lichtblick 1.24 with its panel sidebar open as it opens:
#: 960 x 676 px for the layout live, 960 x 598 above a recording's playback bar (measured there;
#: ``test_lichtblick_layout`` asserts what each panel shows). The left column (``LEFT_PERCENT`` of the
#: width) holds the state rows over the plot: the app draws 64 px per State Transitions row, so five rows
#: need ~400 px (``STATES_PERCENT``) and the plot's eight legend rows of 30 px need ~270 px. The right
#: part holds the 3-D view and the cameras (``VIEWS_PERCENT``), the details and the log, and the trial
#: buttons (``CONTROLS_PERCENT``): a Lichtblick Call Service tile always draws request and response
#: editors of two text rows above its button, ~155 px in all with its title bar, and the tab bar adds 30:
#: 31 % is ~185 px on a recording, ~210 px live; less cuts the buttons.
LEFT_PERCENT = 36
STATES_PERCENT = 59
VIEWS_PERCENT = 36
CONTROLS_PERCENT = 31
#: Width asked for the plot's legend, px: beside the data (``legendDisplay: left``), not over it; the
#: app shrinks it with the panel (~130 px at 960 px).
LEGEND_WIDTH = 240
#: The trial buttons by tab (service base names), at most four per tab so that each button's text fits
#: its tile: running a trial (and confirming the operator's reset), holding and redoing one, and the
#: operator taking over (a start without a verified reset, teleoperation).
CONTROL_TABS = {"trial": ("start", "stop", "next", "confirm_reset"),
                "hold / redo": ("pause", "resume", "abort", "redo"),
                "override / teleop": ("override_reset", "take_over", "hand_back")}
#: The panel title keys: Foxglove's, and Lichtblick's (which does not read Foxglove's).
TITLE_KEYS = ("foxglovePanelTitle", "lichtblickPanelTitle")
#: Colours of the enumerated states (green done, amber partly, red failed, grey waiting).
STATE_COLOURS = {"done": "#2e7d32", "complete": "#2e7d32", "intent": "#f9a825", "missed": "#c62828",
                 "incomplete": "#c62828", "pending": "#9e9e9e", "running": "#1565c0", "scoring": "#6a1b9a"}

_CAMERA_STATE = {"distance": 1.6, "perspective": True, "phi": 55, "target": [0, 0, 0],
                 "targetOffset": [0, 0.05, TABLE_TOP_Z], "targetOrientation": [0, 0, 0, 1], "thetaOffset": 90,
                 "fovy": 45, "near": 0.01, "far": 5000}
_PUBLISH = {"type": "point", "poseTopic": "/move_base_simple/goal", "pointTopic": "/clicked_point",
            "poseEstimateTopic": "/initialpose", "poseEstimateXDeviation": 0.5, "poseEstimateYDeviation": 0.5,
            "poseEstimateThetaDeviation": 0.26179939}


def _titled(config: dict[str, Any], title: str) -> dict[str, Any]:
    """``config`` with ``title`` under each app's title key."""
    return {**config, **{key: title for key in TITLE_KEYS}}


def hidden_frames() -> list[str]:
    """Every TF frame a recording or the graph publishes: the rig URDF's links, the frames the camera
    mounts add (``robot.cameras.optical_mounts``) and each registry object's ``object/<name>``."""
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.robot.cameras import optical_mounts
    from robofollow_ros.robot.rig_config import load_rig_config
    from robofollow_ros.robot.urdf_model import UrdfModel

    rig = load_rig_config()
    frames = list(UrdfModel.from_file(rig.urdf_path).links)
    frames += [child for _, child, _, _ in optical_mounts(rig.camera_links) if child not in frames]
    objects = {name for scene in default_registry().layouts.values() for layout in scene.values()
               for name in layout.names}
    return frames + [f"{topics.OBJECT_FRAME_PREFIX}{name}" for name in sorted(objects)]


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
            "transforms": {f"frame:{frame}": {"visible": False} for frame in hidden_frames()},
            "topics": shown, "layers": {"grid": grid}, "publish": dict(_PUBLISH), "imageMode": {}}


def _image(camera: str) -> dict[str, Any]:
    return {"cameraState": dict(_CAMERA_STATE), "followMode": "follow-pose", "scene": {}, "transforms": {},
            "topics": {}, "layers": {}, "publish": dict(_PUBLISH),
            "imageMode": {"imageTopic": topics.camera_topic(camera),
                          "calibrationTopic": topics.calibration_topic(camera),
                          "synchronize": False, "rotation": 0, "annotations": {}}}


def _plot() -> dict[str, Any]:
    """The totals and the current task's stages 1..3: eight fixed series for any task."""
    series = [{"value": f"{topics.STAGES}.data[{i}]", "enabled": True, "timestampMethod": "receiveTime",
               "label": label} for i, label in enumerate(STAGE_VALUES)]
    return {"paths": series, "minYValue": 0, "maxYValue": 1, "showXAxisLabels": True, "showYAxisLabels": True,
            "showLegend": True, "legendDisplay": "left", "showPlotValuesInLegend": False, "isSynced": True,
            "xAxisVal": "timestamp", "sidebarDimension": LEGEND_WIDTH}


def _states() -> dict[str, Any]:
    """Trial phase, each stage's state and completion, each keyed on its enumerated values."""
    choices = [TRIAL_PHASES, *([STAGE_STATES] * (len(STATUS_NAMES) - 2)), COMPLETION_STATES]
    paths = [{"value": f"{topics.STATUS}.status[{i}].message", "timestampMethod": "receiveTime", "label": name,
              "enabled": True,
              "customStates": {"type": "discrete", "states": [
                  {"value": v, "label": v, "color": STATE_COLOURS.get(v, "#78909c")} for v in states]}}
             for i, (name, states) in enumerate(zip(STATUS_NAMES, choices, strict=True))]
    return {"paths": paths, "isSynced": True, "showPoints": True}


def _button(service: str) -> dict[str, Any]:
    name = service.rsplit("/", 1)[-1]
    return _titled({"serviceName": service, "requestPayload": "{}", "layout": "horizontal",
                    "buttonText": name.replace("_", " "), "buttonTooltip": f"std_srvs/Trigger {service}",
                    "editingMode": False, "timeoutSeconds": 10}, name.replace("_", " "))


def _controls() -> dict[str, Any]:
    """The Call Service tiles, one row per tab (``CONTROL_TABS``); every trial service on exactly one tab."""
    by_name = {service.rsplit("/", 1)[-1]: service for service in TRIAL_SERVICES}
    placed = [name for names in CONTROL_TABS.values() for name in names]
    if sorted(placed) != sorted(by_name):
        raise ValueError(f"CONTROL_TABS: services {sorted(set(by_name) ^ set(placed))} are not on exactly one tab")
    return {"activeTabIdx": 0, "tabs": [{"title": title, "layout": _split("row", *((BUTTONS[by_name[n]], 1)
                                                                                    for n in names))}
                                        for title, names in CONTROL_TABS.items()]}


def _split(direction: str, *items: tuple[Any, float]) -> Any:
    """A mosaic tree over ``items`` (node, weight) in order: nested binary splits with the given weights."""
    if len(items) == 1:
        return items[0][0]
    (first, weight), rest = items[0], items[1:]
    total = weight + sum(w for _, w in rest)
    return {"first": first, "second": _split(direction, *rest), "direction": direction,
            "splitPercentage": round(100.0 * weight / total, 3)}


def build_layout() -> dict[str, Any]:
    """Stage states over the IS/ES plot on the left; on the right the 3-D rig and scene beside the three
    cameras, the details beside the log, and the trial buttons' tab strip at the bottom."""
    config: dict[str, Any] = {
        THREE_D: _titled(_three_d(), "rig and scene"), PLOT: _titled(_plot(), "IS / ES (stage names: status)"),
        STATES: _titled(_states(), "trial and stage states"),
        DETAILS: _titled({"topicPath": topics.STATUS, "diffTopicPath": "", "diffMethod": "custom",
                          "diffEnabled": False, "showFullMessageForDiff": False}, "trial and stage details"),
        LOG: _titled({"searchTerms": [], "minLogLevel": 1, "topicToRender": topics.ROSOUT}, "log"),
        CONTROLS: _controls()}
    config.update({panel: _titled(_image(camera), f"{camera} camera") for camera, panel in IMAGES.items()})
    config.update({panel: _button(service) for service, panel in BUTTONS.items()})
    left = _split("column", (STATES, STATES_PERCENT), (PLOT, 100 - STATES_PERCENT))
    cameras = _split("column", (IMAGES["head"], 1), (_split("row", (IMAGES["left_wrist"], 1),
                                                             (IMAGES["right_wrist"], 1)), 1))
    views = _split("row", (THREE_D, 45), (cameras, 55))
    text = _split("row", (DETAILS, 38), (LOG, 62))
    right = _split("column", (views, VIEWS_PERCENT), (text, 100 - VIEWS_PERCENT - CONTROLS_PERCENT),
                   (CONTROLS, CONTROLS_PERCENT))
    return {"configById": config, "globalVariables": {}, "userNodes": {}, "playbackConfig": {"speed": 1},
            "layout": _split("row", (left, LEFT_PERCENT), (right, 100 - LEFT_PERCENT))}


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:] or [str(LAYOUT_PATH)])[0])
    path.write_text(json.dumps(build_layout(), indent=2) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
