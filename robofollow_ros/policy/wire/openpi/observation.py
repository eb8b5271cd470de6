"""Observation conversion between RoboFollow and openpi's ALOHA contract (peers-bridge.md 1.2).

RoboFollow → openpi: ``state`` = ``joint_action.vector`` (float32, 14), cameras
head/left/right → ``images.cam_high`` / ``cam_left_wrist`` / ``cam_right_wrist`` as CHW uint8 after
the same resize-with-pad to 224×224 that openpi's clients do, and ``prompt`` = the instruction.
openpi → RoboFollow is the inverse (used by our openpi server): CHW back to HWC, missing wrist
cameras filled with black frames the size of ``cam_high``, unknown camera names rejected. Errors are
the contract's :class:`~robofollow_ros.policy.observation.ObservationError` (re-exported here); the
server then checks the converted observation against the contract like every other path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import ObservationError, joint_state

__all__ = ["ObservationError", "from_openpi_observation", "resize_with_pad", "to_openpi_observation", "to_uint8"]

#: RoboFollow observation key → openpi ALOHA image name.
OPENPI_CAMERAS = {
    CAMERA_OBS_KEYS["head"]: "cam_high",
    CAMERA_OBS_KEYS["left_wrist"]: "cam_left_wrist",
    CAMERA_OBS_KEYS["right_wrist"]: "cam_right_wrist",
}
#: Accepted by openpi's ALOHA policy but not fed to the model; accepted and ignored here too.
IGNORED_OPENPI_CAMERAS = frozenset({"cam_low"})
OPENPI_IMAGE_SIZE = 224


def to_uint8(image: np.ndarray) -> np.ndarray:
    """Float images in [0, 1] become uint8 as openpi's ``convert_to_uint8`` does; uint8 passes."""
    if np.issubdtype(image.dtype, np.floating):
        return (255 * image).astype(np.uint8)
    return image.astype(np.uint8, copy=False)


def resize_with_pad(image: np.ndarray, height: int = OPENPI_IMAGE_SIZE, width: int = OPENPI_IMAGE_SIZE) -> np.ndarray:
    """Fit an HWC image into ``height × width`` keeping its aspect ratio; pad with black, centred.

    Same arithmetic as openpi's client (scale by the larger ratio, truncate the new size, bilinear
    resampling with Pillow, offsets truncated), so a model sees the pixels it was trained on.
    """
    cur_h, cur_w = image.shape[:2]
    if (cur_h, cur_w) == (height, width):
        return image
    ratio = max(cur_w / width, cur_h / height)
    new_w, new_h = int(cur_w / ratio), int(cur_h / ratio)
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), resample=Image.Resampling.BILINEAR))
    out = np.zeros((height, width, *image.shape[2:]), dtype=image.dtype)
    top, left = max(0, int((height - new_h) / 2)), max(0, int((width - new_w) / 2))
    out[top:top + new_h, left:left + new_w] = resized
    return out


def _hwc_image(value: Any, field: str) -> np.ndarray:
    image = np.asarray(value)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ObservationError(f"{field}: shape {image.shape} is not an HWC RGB image")
    return to_uint8(image)


def to_openpi_observation(obs: Observation, prompt: str, image_size: int = OPENPI_IMAGE_SIZE) -> dict[str, Any]:
    """The ALOHA request openpi servers expect, from a RoboFollow observation."""
    state = joint_state(obs)
    cameras = obs.get("observation") or {}
    images = {}
    for key, name in OPENPI_CAMERAS.items():
        if isinstance(cameras.get(key), dict) and "rgb" in cameras[key]:
            image = _hwc_image(cameras[key]["rgb"], f"observation.{key}.rgb")
            images[name] = np.ascontiguousarray(resize_with_pad(image, image_size, image_size).transpose(2, 0, 1))
    if "cam_high" not in images:
        raise ObservationError("observation.head_camera.rgb: missing; openpi's ALOHA policy needs cam_high")
    return {"state": state, "images": images, "prompt": obs.get("instruction") or prompt}


def _chw_to_hwc(value: Any, field: str) -> np.ndarray:
    image = np.asarray(value)
    if image.ndim != 3:
        raise ObservationError(f"{field}: shape {image.shape} is not a 3-D image")
    if image.shape[0] == 3 and image.shape[-1] != 3:
        image = image.transpose(1, 2, 0)
    if image.shape[-1] != 3:
        raise ObservationError(f"{field}: shape {image.shape} is neither CHW nor HWC RGB")
    return to_uint8(image)  # a transposed view: copying three images would double the server's overhead


def from_openpi_observation(request: Any) -> tuple[Observation, str]:
    """``(RoboFollow observation, prompt)`` from an ALOHA request; raises :class:`ObservationError`.

    Images become HWC *views* of the received CHW buffers (read-only, not C-contiguous); a policy
    that needs contiguous memory calls ``np.ascontiguousarray`` itself.
    """
    if not isinstance(request, dict):
        raise ObservationError(f"request: expected a map, got {type(request).__name__}")
    state = request.get("state")
    if not isinstance(state, np.ndarray | list) or np.asarray(state).size != ACTION_DIM:
        raise ObservationError(f"state: expected {ACTION_DIM} values, got {_describe(state)}")
    images = request.get("images")
    if not isinstance(images, dict) or "cam_high" not in images:
        raise ObservationError("images.cam_high: missing; it is mandatory")
    by_name = {name: key for key, name in OPENPI_CAMERAS.items()}
    unknown = set(images) - set(by_name) - IGNORED_OPENPI_CAMERAS
    if unknown:
        raise ObservationError(f"images: unknown camera names {sorted(map(str, unknown))}; "
                               f"expected {sorted(by_name)}")
    head = _chw_to_hwc(images["cam_high"], "images.cam_high")
    cameras = {}
    for name, key in by_name.items():
        cameras[key] = {"rgb": _chw_to_hwc(images[name], f"images.{name}") if name in images
                        else np.zeros_like(head)}
    prompt = request.get("prompt", "")
    if prompt is None:
        prompt = ""
    if not isinstance(prompt, str):
        raise ObservationError(f"prompt: expected a string, got {type(prompt).__name__}")
    vector = np.asarray(state, dtype=np.float32).reshape(-1)
    return {"observation": cameras, "joint_action": {"vector": vector}, "instruction": prompt}, prompt


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    return type(value).__name__
