"""RoboFollow observations and action chunks ↔ vla-eval's observation/action convention.

vla-eval's convention (``vla_eval/types.py``): an observation is ``{"images": {camera: HWC uint8},
"task_description": str, "state": vector}``, an action ``{"actions": (D,) or (chunk, D)}``. Its own
RoboTwin benchmark (this rig's robot) names the cameras ``head_camera`` / ``left_camera`` /
``right_camera``, exactly our observation keys, sends the joints as ``joint_state`` and steps
``actions`` as 14 absolute joint positions with grippers 1 = open, exactly our contract. So the
mapping is one-to-one and nothing is resized or flipped: a vla-eval model server that serves a
RoboTwin model gets what its benchmark would give it. We send the joints under both ``state`` (the
general convention) and ``joint_state`` (RoboTwin's), and read either.

Only contract data crosses: three RGB images, the 14 joints, the instruction. A camera without an
image (the simulator's render-free mode) is left out of ``images``; on the way in it becomes
``rgb = None``, which the contract allows. Errors are the contract's
:class:`~robofollow_ros.policy.observation.ObservationError` or a
:class:`~robofollow_ros.policy.wire.common.WireFormatError` for a reply, naming the field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import ObservationError, joint_state
from robofollow_ros.policy.wire.common import WireFormatError

#: Our cameras, under the names vla-eval's RoboTwin benchmark gives them (the same).
VLAEVAL_CAMERAS = tuple(CAMERA_OBS_KEYS.values())
STATE_KEYS = ("state", "joint_state")


def to_vlaeval_observation(obs: Observation, instruction: str) -> dict[str, Any]:
    """The ``observation`` payload for a vla-eval model server."""
    state = joint_state(obs)
    cameras = obs.get("observation") or {}
    images = {}
    for camera in VLAEVAL_CAMERAS:
        rgb = cameras.get(camera, {}).get("rgb") if isinstance(cameras.get(camera), dict) else None
        if rgb is not None:
            image = np.asarray(rgb)
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise ObservationError(f"observation.{camera}.rgb: {image.dtype} {image.shape} is not HWC uint8 RGB")
            images[camera] = image
    return {"images": images, "task_description": obs.get("instruction") or instruction,
            "state": state, "joint_state": state}


def from_vlaeval_observation(payload: dict[str, Any]) -> tuple[Observation, str | None]:
    """``(RoboFollow observation, task_description or None)`` from an ``observation`` payload."""
    state = next((payload[k] for k in STATE_KEYS if payload.get(k) is not None), None)
    if not isinstance(state, np.ndarray | list) or np.asarray(state).size != ACTION_DIM:
        raise ObservationError(f"state: expected {ACTION_DIM} joint positions (state or joint_state), got "
                               f"{_describe(state)}")
    images = payload.get("images", {})
    if not isinstance(images, dict):
        raise ObservationError(f"images: expected a map of camera name to image, got {type(images).__name__}")
    unknown = set(images) - set(VLAEVAL_CAMERAS)
    if unknown:
        raise ObservationError(f"images: unknown camera names {sorted(map(str, unknown))[:5]}; "
                               f"expected {list(VLAEVAL_CAMERAS)}")
    task = payload.get("task_description")
    if task is not None and not isinstance(task, str):
        raise ObservationError(f"task_description: expected a string, got {type(task).__name__}")
    vector = np.asarray(state).reshape(-1)
    if vector.dtype.kind != "f":
        vector = vector.astype(np.float64)
    obs: Observation = {"observation": {camera: {"rgb": images.get(camera)} for camera in VLAEVAL_CAMERAS},
                        "joint_action": {"vector": vector}}
    if task is not None:
        obs["instruction"] = task
    return obs, task


def actions_from_reply(payload: dict[str, Any], server: str) -> np.ndarray:
    """The float32 ``[T, 14]`` chunk in an ``action`` payload (``actions``, or RoboTwin's ``action``)."""
    raw = payload.get("actions", payload.get("action"))
    if not isinstance(raw, np.ndarray | list):
        raise WireFormatError(f"vla-eval server {server}: action payload has no 'actions' array "
                              f"(keys {sorted(map(str, payload))[:6]})")
    try:
        actions = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise WireFormatError(f"vla-eval server {server}: actions are not numbers ({exc})") from exc
    if actions.ndim == 1:
        actions = actions[None, :]
    if actions.ndim != 2 or actions.shape[1] != ACTION_DIM or actions.shape[0] < 1:
        raise WireFormatError(f"vla-eval server {server}: actions of shape {list(np.shape(raw))}; expected "
                              f"({ACTION_DIM},) or (chunk, {ACTION_DIM}) joint positions")
    return actions


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    return type(value).__name__
