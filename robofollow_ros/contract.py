"""The rig's interface contract: joint order, frames and topic names, defined once.

Everything that names a joint, a frame or a topic imports it from here, so the simulator, the
policy adapters, the scorer and the ROS nodes cannot drift apart (see DESIGN.md, "ROS interface").
"""

from __future__ import annotations

from typing import Final

ARMS: Final = ("left", "right")

#: Joints of one arm, in the order of RoboFollow's 14-value vector.
ARM_JOINTS: Final = tuple(f"joint{i}" for i in range(1, 7))

#: The 14 joint names of ``/joint_states`` and of every action row:
#: ``[left joints 1-6, left gripper, right joints 1-6, right gripper]``.
JOINT_NAMES: Final = tuple(name for arm in ARMS for name in (*(f"{arm}_{j}" for j in ARM_JOINTS), f"{arm}_gripper"))
ACTION_DIM: Final = len(JOINT_NAMES)  # 14

#: Index of each arm's gripper in the 14-vector (RoboFollow's ``vector[6]`` and ``vector[13]``).
GRIPPER_INDEX: Final = {"left": 6, "right": 13}
#: Slice of each arm's six arm joints in the 14-vector.
ARM_SLICE: Final = {"left": slice(0, 6), "right": slice(7, 13)}

#: Normalised gripper values: 1 is fully open, 0 fully closed.
GRIPPER_OPEN: Final = 1.0
GRIPPER_CLOSED: Final = 0.0

# Frames (RoboTwin table frame: +x robot's right, +y away from the robot, +z up, metres).
WORLD_FRAME: Final = "world"
TABLE_TOP_Z: Final = 0.74
TABLE_SIZE_XY: Final = (1.2, 0.7)
BASE_FRAMES: Final = {arm: f"{arm}_base" for arm in ARMS}
TCP_FRAMES: Final = {arm: f"{arm}_tcp" for arm in ARMS}
CAMERA_NAMES: Final = ("head", "left_wrist", "right_wrist")
CAMERA_FRAMES: Final = {name: f"{name}_camera" for name in CAMERA_NAMES}
#: Each camera's optical frame (REP 103: +z forward, +x right, +y down); images carry this frame id.
CAMERA_OPTICAL_FRAMES: Final = {name: f"{frame}_optical" for name, frame in CAMERA_FRAMES.items()}
#: RoboFollow's observation keys for each camera (``observation.<key>.rgb``).
CAMERA_OBS_KEYS: Final = {"head": "head_camera", "left_wrist": "left_camera", "right_wrist": "right_camera"}
DEFAULT_IMAGE_SIZE: Final = (320, 240)  # width, height

# Topics (DESIGN.md, "ROS interface (contract)").
TOPIC_JOINT_STATES: Final = "/joint_states"
TOPIC_JOINT_COMMAND: Final = "/robofollow/joint_command"
TOPIC_INSTRUCTION: Final = "/robofollow/instruction"
TOPIC_OBJECTS: Final = "/robofollow/objects"
#: A pose on ``TOPIC_OBJECTS`` below this confidence is not believed: the stage monitor does not score it, the
#: reset check does not count the object as present, oracle agreement ignores it. Perception builds the
#: confidence from evidence (``perception/confidence.py``); this is the one threshold all readers share.
MIN_POSE_CONFIDENCE: Final = 0.5
TOPIC_SCORE: Final = "/robofollow/score"
TOPIC_TRIAL: Final = "/robofollow/trial"
#: The field of the ``/robofollow/trial`` JSON that names the trial: the trial manager and the headless
#: recorder write it, every reader of a trial state (recorders, replay, ``export-lerobot``) reads it.
TRIAL_ID_KEY: Final = "id"
#: Every frame the stage monitor scored (JSON ``{"trial", "task", "index", "frame"}``): replay re-scores these.
TOPIC_FRAME: Final = "/robofollow/frame"
#: The rig's URDF as a latched ``std_msgs/String`` (robot_state_publisher's topic), for RViz and Foxglove.
TOPIC_ROBOT_DESCRIPTION: Final = "/robot_description"
TOPIC_TF: Final = "/tf"
TOPIC_TF_STATIC: Final = "/tf_static"
#: Simulated time (``rosgraph_msgs/Clock``) published by the sim; nodes run with ``use_sim_time``.
TOPIC_CLOCK: Final = "/clock"
#: The arm bridge's e-stop input (``std_msgs/Bool``, true = engaged) and its status (JSON ``{"hold", "clamped",
#: "reasons"}``); the trial manager reads both (arm_bridge_node defines the same names for itself).
TOPIC_ESTOP: Final = "/robofollow/estop"
TOPIC_BRIDGE_STATUS: Final = "/robofollow/arm_bridge/status"
SERVICE_TRIAL_START: Final = "/robofollow/trial/start"
SERVICE_TRIAL_STOP: Final = "/robofollow/trial/stop"
SERVICE_TRIAL_NEXT: Final = "/robofollow/trial/next"
#: Takeover: a teleoperation source (a leader arm's driver) commands the arms on its own topic
#: (``sensor_msgs/JointState``, contract names) once ``take_over`` is called on the arm bridge, until
#: ``hand_back``; meanwhile the policy's commands are refused. The bridge tags every ``/joint_states`` frame
#: with ``/robofollow/intervention`` (``std_msgs/Bool``, true while teleoperation holds), recorded in the bag
#: and exported as the LeRobot ``intervention`` feature.
TOPIC_TELEOP_COMMAND: Final = "/robofollow/teleop/joint_command"
TOPIC_INTERVENTION: Final = "/robofollow/intervention"
SERVICE_TELEOP_TAKE_OVER: Final = "/robofollow/teleop/take_over"
SERVICE_TELEOP_HAND_BACK: Final = "/robofollow/teleop/hand_back"


def camera_image_topic(camera: str) -> str:
    """Topic of a camera's RGB stream, e.g. ``/cameras/head/image_raw``."""
    if camera not in CAMERA_NAMES:
        raise ValueError(f"camera: unknown camera {camera!r}; expected one of {CAMERA_NAMES}")
    return f"/cameras/{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    """Topic of a camera's ``sensor_msgs/CameraInfo``."""
    return camera_image_topic(camera).replace("/image_raw", "/camera_info")
