"""RoboFollow ↔ XPolicyLab's observation contract (v1.0) and its action chunks.

XPolicyLab's environment side (``debug_env_client.py``, the RoboTwin integration) sends every model
the same observation, which its per-policy adapters (``policy/<NAME>/model.py``, e.g. ``Pi_05``'s
``encode_obs``) map onto their own inputs::

    {"vision": {"cam_head" | "cam_left_wrist" | "cam_right_wrist": {"color": uint8 HWC}},
     "state": {"left_arm_joint_state": (6,), "left_ee_joint_state": (1,),
               "right_arm_joint_state": (6,), "right_ee_joint_state": (1,)},
     "instruction": str, "data_format_version": "v1.0", "env_idx": 0}

That is the dual-arm ``joint`` layout of their ``arx_x5`` / ``piper`` robots (``arm_dim [6, 6]``,
``ee_dim [1, 1]``, RoboTwin's aloha-agilex), packed by their ``pack_robot_state`` in exactly our
contract order ``[left 1-6, left gripper, right 1-6, right gripper]``; grippers are RoboTwin's
normalised 0 (closed) … 1 (open), ours too, so values pass unchanged. Only the three RGB images, the
14 joints and the instruction are sent: their optional depth, intrinsics, ``ee_pose`` / ``tcp_pose``
fields are not part of what an evaluated policy may see, so ``action_type: ee`` models cannot be
driven. Images travel at the rig's resolution (their models resize, as their environment sends raw
480×640 frames). ``cameras`` renames them (a user key map; ``""`` leaves a camera out).

Actions come back as their adapters return them: a ``[T, 14]`` array (no ``env_cfg_type`` on the
model side) or ``unpack_robot_state``'s list of per-step dicts with the four state keys; both become
our float32 ``[T, 14]`` chunk of absolute joint targets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import ObservationError, joint_state

#: Our camera name → XPolicyLab's ``vision`` key (their v1.0 contract's names).
DEFAULT_CAMERAS = {"head": "cam_head", "left_wrist": "cam_left_wrist", "right_wrist": "cam_right_wrist"}
#: Their dual-arm joint state keys and sizes, in the packing order of ``pack_robot_state``.
STATE_LAYOUT = (("left_arm_joint_state", 6), ("left_ee_joint_state", 1),
                ("right_arm_joint_state", 6), ("right_ee_joint_state", 1))
DATA_FORMAT_VERSION = "v1.0"


def camera_map(value: Mapping[str, str] | str | None) -> dict[str, str]:
    """The camera key map from ``--kwargs`` (a map) or a URL option (``head=cam_high,left_wrist=...``)."""
    cameras = dict(DEFAULT_CAMERAS)
    if value is None:
        return cameras
    if isinstance(value, str):
        pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"cameras: {value!r} is not OURS=THEIRS[,OURS=THEIRS...]")
        value = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(value, Mapping):
        raise ValueError(f"cameras: expected a map of our camera names to theirs, got {type(value).__name__}")
    unknown = sorted(set(value) - set(DEFAULT_CAMERAS))
    if unknown:
        raise ValueError(f"cameras: unknown camera names {unknown}; ours are {sorted(DEFAULT_CAMERAS)}")
    for ours, theirs in value.items():
        if not isinstance(theirs, str):
            raise ValueError(f"cameras.{ours}: expected a string, got {type(theirs).__name__}")
        cameras[ours] = theirs
    named = [v for v in cameras.values() if v]
    if len(set(named)) != len(named):
        raise ValueError(f"cameras: two cameras share a name in {cameras}")
    return cameras


def to_xpolicylab_observation(obs: Observation, instruction: str, cameras: Mapping[str, str]) -> dict[str, Any]:
    """The v1.0 observation XPolicyLab models expect, from a RoboFollow observation."""
    vector = joint_state(obs)
    state, offset = {}, 0
    for key, size in STATE_LAYOUT:
        state[key] = vector[offset:offset + size].copy()
        offset += size
    images = obs.get("observation") or {}
    vision = {}
    for ours, theirs in cameras.items():
        if not theirs:
            continue
        field = f"observation.{CAMERA_OBS_KEYS[ours]}.rgb"
        entry = images.get(CAMERA_OBS_KEYS[ours])
        if not isinstance(entry, dict) or "rgb" not in entry:
            raise ObservationError(f"{field}: missing; XPolicyLab models take {theirs} (run with --render, "
                                   f"or leave it out with cameras={ours}=)")
        image = np.asarray(entry["rgb"])
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ObservationError(f"{field}: shape {image.shape} is not an HWC RGB image")
        if image.dtype != np.uint8:
            raise ObservationError(f"{field}: dtype {image.dtype}; expected uint8")
        vision[theirs] = {"color": np.ascontiguousarray(image)}
    return {"vision": vision, "state": state, "instruction": obs.get("instruction") or instruction,
            "data_format_version": DATA_FORMAT_VERSION, "env_idx": 0}


def _row(step: Any, index: int) -> np.ndarray:
    if isinstance(step, Mapping):
        missing = [key for key, _ in STATE_LAYOUT if key not in step]
        if missing:
            raise ValueError(f"actions[{index}]: missing {missing}; got keys {sorted(map(str, step))[:8]}")
        parts = []
        for key, size in STATE_LAYOUT:
            part = np.asarray(step[key], dtype=np.float32).reshape(-1)
            if part.size != size:
                raise ValueError(f"actions[{index}].{key}: {part.size} values; expected {size}")
            parts.append(part)
        return np.concatenate(parts)
    row = np.asarray(step, dtype=np.float32).reshape(-1)
    if row.size != ACTION_DIM:
        raise ValueError(f"actions[{index}]: {row.size} values; expected {ACTION_DIM} (or the four state keys)")
    return row


def from_xpolicylab_actions(actions: Any) -> np.ndarray:
    """Our float32 ``[T, 14]`` chunk from an INFER_RESULT's ``actions``; ``ValueError`` names what is wrong."""
    if isinstance(actions, list | tuple) and actions and not any(isinstance(a, Mapping) for a in actions):
        try:
            actions = np.asarray(actions, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"actions: not a numeric [T, {ACTION_DIM}] array ({exc})") from exc
    if isinstance(actions, np.ndarray):
        if actions.dtype.kind not in "biuf":
            raise ValueError(f"actions: dtype {actions.dtype} is not numeric")
        if actions.ndim == 1:
            actions = actions[None]
        if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or actions.shape[0] == 0:
            raise ValueError(f"actions: shape {actions.shape}; expected [T, {ACTION_DIM}]")
        return actions.astype(np.float32)
    if isinstance(actions, Mapping):  # one step's dict
        return _row(actions, 0)[None]
    if not isinstance(actions, list | tuple) or not actions:
        raise ValueError(f"actions: expected a non-empty array or list, got {type(actions).__name__}")
    try:
        return np.stack([_row(step, i) for i, step in enumerate(actions)])
    except TypeError as exc:
        raise ValueError(f"actions: not numeric ({exc})") from exc
