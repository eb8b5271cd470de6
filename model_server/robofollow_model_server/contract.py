"""RoboFollow's observation and action contract, checked on both sides of the policy.

What a policy receives (benchmark integrity: nothing else, whatever the client sent): three RGB
images ``observation.{head_camera,left_camera,right_camera}.rgb`` (uint8 HWC), the 14-joint vector
``joint_action.vector`` (float32, RoboFollow's joint order: left arm 6, left gripper, right arm 6,
right gripper; grippers 1 = open) and ``instruction``. What it must return: a finite ``[T, 14]``
chunk of absolute joint targets in the same order, sent back as float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ACTION_DIM = 14
#: RoboFollow camera keys, in the order head, left wrist, right wrist.
CAMERAS = ("head_camera", "left_camera", "right_camera")
MAX_IMAGE_SIDE = 4096
MAX_INSTRUCTION_CHARS = 4096
MAX_CHUNK_ROWS = 10_000


class ContractError(ValueError):
    """An observation or an action chunk outside the contract; the message names the field and value."""


def check_instruction(value: Any, field: str = "instruction") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ContractError(f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > MAX_INSTRUCTION_CHARS:
        raise ContractError(f"{field}: {len(value)} characters exceed the limit of {MAX_INSTRUCTION_CHARS}")
    return value


def check_image(value: Any, field: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ContractError(f"{field}: expected an encoded array, got {type(value).__name__}")
    if value.ndim != 3 or value.shape[2] != 3 or not 0 < value.shape[0] <= MAX_IMAGE_SIDE \
            or not 0 < value.shape[1] <= MAX_IMAGE_SIDE:
        raise ContractError(f"{field}: shape {value.shape} is not an HWC RGB image")
    if value.dtype != np.uint8:
        raise ContractError(f"{field}: dtype {value.dtype}; expected uint8")
    return value


def check_vector(value: Any, field: str = "joint_action.vector") -> np.ndarray:
    try:
        vector = np.asarray(value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ContractError(f"{field}: {str(value)[:60]} is not a list of numbers") from exc
    if vector.shape != (ACTION_DIM,):
        raise ContractError(f"{field}: {vector.size} values; expected {ACTION_DIM}")
    if not np.isfinite(vector).all():
        raise ContractError(f"{field}: non-finite value at index {int(np.flatnonzero(~np.isfinite(vector))[0])}")
    return vector


def check_observation(obs: Any) -> dict[str, Any]:
    """The contract part of a TCP request's observation; everything else (depth, privileged...) is dropped."""
    if not isinstance(obs, dict):
        raise ContractError(f"observation: expected an object, got {type(obs).__name__}")
    cameras = obs.get("observation")
    if not isinstance(cameras, dict):
        raise ContractError("observation: missing the 'observation' object with the three cameras")
    images = {}
    for key in CAMERAS:
        entry = cameras.get(key)
        if not isinstance(entry, dict) or "rgb" not in entry:
            raise ContractError(f"observation.{key}.rgb: missing")
        images[key] = {"rgb": check_image(entry["rgb"], f"observation.{key}.rgb")}
    joints = obs.get("joint_action")
    if not isinstance(joints, dict) or "vector" not in joints:
        raise ContractError("joint_action.vector: missing")
    return {"observation": images, "joint_action": {"vector": check_vector(joints["vector"])},
            "instruction": check_instruction(obs.get("instruction"))}


def check_actions(result: Any) -> np.ndarray:
    """The policy's answer as a float32 ``[T, 14]`` chunk, or :class:`ContractError` naming what is wrong."""
    try:
        actions = np.asarray(result, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ContractError(f"policy output: {type(result).__name__} is not an array of numbers") from exc
    if actions.ndim == 1 and actions.shape[0] == ACTION_DIM:
        actions = actions[None]
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or not 0 < actions.shape[0] <= MAX_CHUNK_ROWS:
        raise ContractError(f"policy output: shape {actions.shape}; expected [T, {ACTION_DIM}] with "
                            f"1 <= T <= {MAX_CHUNK_ROWS}")
    if not np.isfinite(actions).all():
        row, col = map(int, np.argwhere(~np.isfinite(actions))[0])
        raise ContractError(f"policy output: non-finite value at row {row}, joint {col}")
    return np.ascontiguousarray(actions)
