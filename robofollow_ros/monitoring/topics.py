"""The topics of a recording and of the live view: names, ROS 2 types and the QoS they are offered with.

One table, built from the ROS contract (``contract.py``), is the contract of a recording: every
channel is a ROS 2 type (``ros2msg`` schema, ``cdr`` messages), so a recording is a ROS 2 bag that
``ros2 bag info/play`` and ``rosbags`` read, and the live Foxglove view shows the same topics with
the same message paths. The only channels outside ROS types are the live view's
``foxglove.CameraCalibration`` (``camera_info`` of each camera, the viewer's own calibration type).

Derived topics exist because Foxglove cannot look inside the JSON of a ``std_msgs/String``:
``/robofollow/score/stages`` (numbers to plot) and ``/robofollow/status`` (enumerated states).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from robofollow_ros.contract import (
    CAMERA_NAMES,
    TOPIC_FRAME,
    TOPIC_INSTRUCTION,
    TOPIC_INTERVENTION,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_OBJECTS,
    TOPIC_ROBOT_DESCRIPTION,
    TOPIC_SCORE,
    TOPIC_TF,
    TOPIC_TF_STATIC,
    TOPIC_TRIAL,
    camera_info_topic,
)


@dataclass(frozen=True)
class Qos:
    """A publisher's offered QoS, as rosbag2 stores it (``offered_qos_profiles``)."""

    depth: int
    reliability: str = "reliable"  # or best_effort
    durability: str = "volatile"  # or transient_local
    history: str = "keep_last"


#: Per-row state and sensor streams (the graph's STATE_STREAM / camera publishers).
STREAM: Final = Qos(depth=100)
#: Latched state: a late subscriber (and ``ros2 bag play``) still gets the last value, and only that
#: (trial state and live score too: ``nodes.trial_protocol.LATCHED_STATE``).
LATCHED: Final = Qos(depth=1, durability="transient_local")
#: Latched, and a late subscriber needs the whole history (scorer frames, results, logs): topics of their own.
LATCHED_HISTORY: Final = Qos(depth=1024, durability="transient_local")


@dataclass(frozen=True)
class Topic:
    name: str
    type_name: str
    qos: Qos


SCENE: Final = "/robofollow/scene"
#: Before a rig trial: each object's place in the layout, where it is seen, what to move (``nodes.reset_watch``).
RESET_CHECK: Final = "/robofollow/reset_check"
#: Perception's status (JSON: doubts, depth age, camera rate, frames dropped; ``nodes.perception_node``).
PERCEPTION_STATUS: Final = "/robofollow/perception/status"
#: The results.json entry the live trial produced, logged once at the end of a trial.
RESULT: Final = "/robofollow/result"
#: ``[IS total, ES total, stage 1 IS, stage 1 ES, stage 2 IS, stage 2 ES, stage 3 IS, stage 3 ES]``.
STAGES: Final = "/robofollow/score/stages"
#: Trial phase, each stage's state and completion as a DiagnosticArray (see ``monitoring.stages``).
STATUS: Final = "/robofollow/status"
ROSOUT: Final = "/rosout"
JOINT_STATES: Final = TOPIC_JOINT_STATES
JOINT_COMMAND: Final = TOPIC_JOINT_COMMAND
#: True on each joint-state frame teleoperation drove (the arm bridge's takeover; ``contract``).
INTERVENTION: Final = TOPIC_INTERVENTION
TF: Final = TOPIC_TF
TF_STATIC: Final = TOPIC_TF_STATIC
ROBOT_DESCRIPTION: Final = TOPIC_ROBOT_DESCRIPTION
OBJECTS: Final = TOPIC_OBJECTS
SCORE: Final = TOPIC_SCORE
TRIAL: Final = TOPIC_TRIAL
INSTRUCTION: Final = TOPIC_INSTRUCTION
#: The scorer frames (trajectory-frame dicts, docs/scoring.md): what replay re-scores.
FRAME: Final = TOPIC_FRAME
#: TF child frame of each object: ``object/<name>`` (the sim's and the perception node's naming).
OBJECT_FRAME_PREFIX: Final = "object/"
STRING: Final = "std_msgs/msg/String"


def camera_topic(camera: str) -> str:
    """A camera's JPEG stream (image_transport's name for it), e.g. ``/cameras/head/image_raw/compressed``."""
    if camera not in CAMERA_NAMES:
        raise ValueError(f"camera: unknown camera {camera!r}; expected one of {CAMERA_NAMES}")
    return f"/cameras/{camera}/image_raw/compressed"


def calibration_topic(camera: str) -> str:
    """The camera's calibration: sensor_msgs/CameraInfo in a recording, foxglove.CameraCalibration live."""
    return camera_info_topic(camera)


def _table() -> dict[str, Topic]:
    rows = [
        Topic(JOINT_STATES, "sensor_msgs/msg/JointState", STREAM),
        Topic(JOINT_COMMAND, "sensor_msgs/msg/JointState", STREAM),
        Topic(INTERVENTION, "std_msgs/msg/Bool", STREAM),
        Topic(TF, "tf2_msgs/msg/TFMessage", STREAM),
        Topic(TF_STATIC, "tf2_msgs/msg/TFMessage", LATCHED_HISTORY),
        Topic(ROBOT_DESCRIPTION, STRING, LATCHED),
        Topic(OBJECTS, "visualization_msgs/msg/MarkerArray", STREAM),
        Topic(SCENE, "visualization_msgs/msg/MarkerArray", STREAM),
        Topic(RESET_CHECK, "visualization_msgs/msg/MarkerArray", LATCHED),
        Topic(INSTRUCTION, STRING, LATCHED),
        Topic(TRIAL, STRING, LATCHED),
        Topic(SCORE, STRING, LATCHED),
        Topic(FRAME, STRING, LATCHED_HISTORY),
        Topic(RESULT, STRING, LATCHED_HISTORY),
        Topic(STAGES, "std_msgs/msg/Float64MultiArray", STREAM),
        Topic(STATUS, "diagnostic_msgs/msg/DiagnosticArray", STREAM),
        Topic(PERCEPTION_STATUS, STRING, STREAM),
        Topic(ROSOUT, "rcl_interfaces/msg/Log", LATCHED_HISTORY),
    ]
    for camera in CAMERA_NAMES:
        rows.append(Topic(camera_topic(camera), "sensor_msgs/msg/CompressedImage", STREAM))
        rows.append(Topic(calibration_topic(camera), "sensor_msgs/msg/CameraInfo", STREAM))
    return {t.name: t for t in rows}


#: Every topic a trial recording holds, by name.
TOPICS: Final = _table()
#: Topics whose last message(s) every new recording and every new live subscriber must get.
LATCHED_TOPICS: Final = (ROBOT_DESCRIPTION, TF_STATIC)
#: Latched for a late live viewer only: each trial recording gets its own trial's instruction when it opens
#: (``LiveSession``, from the trial state; the headless recorder logs it), never the previous trial's.
LIVE_LATCHED_TOPICS: Final = (INSTRUCTION,)
#: Latched topics that keep only their newest message (the others keep one per distinct payload).
KEEP_LAST_ONE: Final = (ROBOT_DESCRIPTION, INSTRUCTION)
