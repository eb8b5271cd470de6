"""Foxglove topic names and JSON schemas of the monitoring channels (the contract of a recording).

Where a ROS topic carries the same data (DESIGN.md, "ROS interface"), the Foxglove topic has the
same name, so a layout works against this server and against a ROS-native foxglove_bridge alike.
"""

from __future__ import annotations

from typing import Any, Final

from robofollow_ros.contract import (
    CAMERA_NAMES,
    TOPIC_FRAME,
    TOPIC_JOINT_STATES,
    TOPIC_SCORE,
    TOPIC_TRIAL,
)

SCENE: Final = "/robofollow/scene"
TF: Final = "/tf"
LOG: Final = "/robofollow/log"
JOINT_STATES: Final = TOPIC_JOINT_STATES
SCORE: Final = TOPIC_SCORE
TRIAL: Final = TOPIC_TRIAL
#: The scorer frames (trajectory-frame dicts, docs/scoring.md): what replay re-scores.
FRAME: Final = TOPIC_FRAME
#: The results.json entry the live trial produced, logged once at the end of a trial.
RESULT: Final = "/robofollow/result"


def camera_topic(camera: str) -> str:
    """Foxglove topic of a camera's JPEG stream, e.g. ``/cameras/head/compressed``."""
    if camera not in CAMERA_NAMES:
        raise ValueError(f"camera: unknown camera {camera!r}; expected one of {CAMERA_NAMES}")
    return f"/cameras/{camera}/compressed"


def _object(title: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"title": title, "type": "object", "properties": properties, "required": required}


_NUMBER = {"type": "number"}
_STRING = {"type": "string"}
_VEC3 = {"type": "array", "items": _NUMBER, "minItems": 3, "maxItems": 3}

JOINT_STATES_SCHEMA: Final = _object("robofollow.JointStates", {
    "name": {"type": "array", "items": _STRING},
    "position": {"type": "array", "items": _NUMBER},
    "by_name": {"type": "object", "additionalProperties": _NUMBER},
}, ["name", "position"])

_STAGE = _object("robofollow.StageScore", {
    "intent": _NUMBER, "exec": _NUMBER, "intent_max": _NUMBER, "exec_max": _NUMBER,
    "intent_reason": _STRING, "exec_reason": _STRING,
}, ["intent", "exec"])

SCORE_SCHEMA: Final = _object("robofollow.LiveScore", {
    "task": _STRING, "scene": _STRING, "level": _STRING, "frame": {"type": "integer"},
    "final": {"type": "boolean"}, "intent": _NUMBER, "exec": _NUMBER, "complete": {"type": "boolean"},
    "stages": {"type": "object", "additionalProperties": _STAGE},
}, ["task", "frame", "intent", "exec", "stages"])

TRIAL_SCHEMA: Final = _object("robofollow.TrialState", {
    "trial": _STRING, "scene": _STRING, "level": _STRING, "task": _STRING, "instruction": _STRING,
    "round": {"type": "integer"}, "seed": {"type": "integer"}, "phase": _STRING,
}, ["task", "phase"])

FRAME_SCHEMA: Final = _object("robofollow.ScorerFrame", {
    "trial": _STRING, "task": _STRING, "index": {"type": "integer"},
    "frame": _object("robofollow.TrajectoryFrame", {
        "ee_left": _VEC3, "ee_right": _VEC3, "gripper_left": _NUMBER, "gripper_right": _NUMBER,
        "objects": {"type": "object", "additionalProperties": _VEC3},
        "object_quats": {"type": "object"},
    }, ["ee_left", "ee_right", "gripper_left", "gripper_right", "objects"]),
}, ["task", "index", "frame"])

RESULT_SCHEMA: Final = _object("robofollow.TrialResult", {
    "trial": _STRING, "result": {"type": "object"},
}, ["result"])
