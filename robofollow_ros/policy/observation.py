"""The observation contract, checked in one place: what a policy may be handed (issue 23).

Every server checks a request's observation here before any policy sees it (the TCP server on the
decoded JSON, the openpi server after the ALOHA conversion), so a malformed observation fails with
one line naming the field and the value, never inside a model. The rules:

- ``joint_action.vector``: required; exactly 14 finite values (:data:`~robofollow_ros.contract.ACTION_DIM`),
  1-D, a float dtype (a JSON list of numbers counts as float64). The dtype is kept (the simulator's
  float64 travels as float64).
- ``observation.<camera>.rgb`` for ``head_camera``, ``left_camera``, ``right_camera``: each camera
  is optional and ``rgb`` may be ``None`` (the simulator's render-free mode); an image that is
  there is uint8 ``H × W × 3`` with ``1 ≤ H, W ≤`` :data:`MAX_IMAGE_SIDE`.
- ``instruction``: optional (``None`` counts as absent); a ``str`` of at most
  :data:`MAX_INSTRUCTION_CHARS` characters that is valid Unicode (no lone surrogates, which
  JSON's ``\\ud800`` escapes can carry and which break any later encoding).
- ``privileged``: optional; a mapping, passed on as it is (the expert's extension, checked by the
  policies that read it, see docs/oracle.md).
- Unexpected keys: anything else, at any level (``depth``, ``segmentation``, a reference client's
  whole simulator observation), is dropped: the policy receives exactly the contract. A missing
  required key, or a known key with a wrong value, is refused.

:func:`validate_observation` returns a new dict holding only the contract's keys; arrays are not
copied. Checks are NumPy calls on whole arrays (no per-element Python).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS
from robofollow_ros.policy.interface import Observation, PolicyError

#: Largest height or width of a camera image, in pixels (a 4096² RGB image is 48 MiB).
MAX_IMAGE_SIDE = 4096
#: Longest instruction, in characters (task instructions are one sentence).
MAX_INSTRUCTION_CHARS = 4096
#: The cameras of the contract, in ``observation.<camera>.rgb`` order.
CAMERAS = tuple(CAMERA_OBS_KEYS.values())


class ObservationError(PolicyError, ValueError):
    """An observation outside the contract; the message names the field and the value."""


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of {value.dtype} with shape {value.shape}"
    return type(value).__name__


def validate_instruction(value: Any, field: str = "instruction") -> str:
    """``value`` if it is a valid instruction, else :class:`ObservationError` naming ``field``."""
    if not isinstance(value, str):
        raise ObservationError(f"{field}: expected a string, got {type(value).__name__}")
    if len(value) > MAX_INSTRUCTION_CHARS:
        raise ObservationError(f"{field}: {len(value)} characters exceed the limit of {MAX_INSTRUCTION_CHARS}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ObservationError(f"{field}: a lone surrogate {value[exc.start]!r} at character {exc.start}; "
                               "expected valid Unicode text") from None
    return value


def validate_vector(value: Any, field: str = "joint_action.vector") -> np.ndarray:
    """The joint vector as an array: exactly 14 finite float values, 1-D."""
    if isinstance(value, list | tuple):  # a JSON list of numbers, as a hand-written peer may send
        if len(value) != ACTION_DIM:
            raise ObservationError(f"{field}: {len(value)} values in a list; expected exactly {ACTION_DIM}, 1-D")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            raise ObservationError(f"{field}: {_short(value)} is not a list of {ACTION_DIM} numbers")
        value = np.asarray(value, dtype=np.float64)
    if not isinstance(value, np.ndarray):
        raise ObservationError(f"{field}: expected {ACTION_DIM} float values, got {_kind(value)}")
    if value.ndim != 1 or value.shape[0] != ACTION_DIM:
        raise ObservationError(f"{field}: {value.size} values of shape {value.shape}; "
                               f"expected exactly {ACTION_DIM} values, 1-D")
    if value.dtype.kind != "f":
        raise ObservationError(f"{field}: dtype {value.dtype}; expected {ACTION_DIM} float values")
    finite = np.isfinite(value)
    if not finite.all():
        index = int(np.argmin(finite))
        raise ObservationError(f"{field}: value {value[index]} at index {index}; every value must be finite")
    return value


def validate_image(value: Any, field: str) -> np.ndarray:
    """A camera image: uint8 ``H × W × 3`` within :data:`MAX_IMAGE_SIDE` pixels a side."""
    if not isinstance(value, np.ndarray):
        raise ObservationError(f"{field}: expected a uint8 HxWx3 image, got {_kind(value)}")
    if value.dtype != np.uint8:
        raise ObservationError(f"{field}: dtype {value.dtype} of shape {value.shape}; expected uint8 HxWx3")
    if value.ndim != 3 or value.shape[2] != 3:
        raise ObservationError(f"{field}: shape {value.shape}; expected uint8 HxWx3")
    if not (1 <= value.shape[0] <= MAX_IMAGE_SIDE and 1 <= value.shape[1] <= MAX_IMAGE_SIDE):
        raise ObservationError(f"{field}: shape {value.shape} is outside 1..{MAX_IMAGE_SIDE} pixels a side")
    return value


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ObservationError(f"{field}: expected an object, got {_kind(value)}")
    return value


def validate_observation(obs: Any) -> Observation:
    """A new observation holding exactly the contract's keys, each checked; see the module docstring."""
    obs = _mapping(obs, "observation")
    if "joint_action" not in obs:
        raise ObservationError(f"joint_action: missing; the observation has keys {_short(sorted(map(str, obs)))}")
    joints = _mapping(obs["joint_action"], "joint_action")
    if "vector" not in joints:
        raise ObservationError("joint_action.vector: missing")
    clean: Observation = {"observation": {}, "joint_action": {"vector": validate_vector(joints["vector"])}}
    if "observation" not in obs:
        raise ObservationError("observation: missing (the cameras' object; it may hold no camera)")
    cameras = _mapping(obs["observation"], "observation")
    for key in CAMERAS:
        if key not in cameras:
            continue
        camera = _mapping(cameras[key], f"observation.{key}")
        rgb = camera.get("rgb")
        clean["observation"][key] = {"rgb": None if rgb is None else validate_image(rgb, f"observation.{key}.rgb")}
    if obs.get("instruction") is not None:
        clean["instruction"] = validate_instruction(obs["instruction"])
    if "privileged" in obs:
        clean["privileged"] = _mapping(obs["privileged"], "privileged")
    return clean
