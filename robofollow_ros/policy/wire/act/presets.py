"""Each ``/act`` peer's keys and conventions (a preset), a user key map over them, and the mapping.

Our observation (three uint8 HWC cameras, the 14 joints in ``JOINT_NAMES`` order with grippers
1 = open, the instruction) becomes the peer's request, and the peer's reply becomes a float32
``[T, 14]`` chunk of absolute joint targets. Facts behind the presets (read in the peers' code):

- ``openvla-oft-aloha`` (moojink/openvla-oft ``vla-scripts/deploy.py``,
  ``experiments/robot/aloha/run_aloha_eval.py:prepare_observation``, ``prismatic/vla/constants.py``):
  ``full_image`` / ``left_wrist_image`` / ``right_wrist_image`` uint8 224×224×3 (the client resizes
  the whole frame to a square, no padding), ``state`` = the 14-D qpos, ``instruction``; the reply is
  the chunk itself, (25, 14) absolute joint targets (ALOHA constants; ``use_relative_actions`` off).
  ALOHA's qpos and actions are ``[left arm 6, left gripper, right arm 6, right gripper]`` with
  grippers *normalised, 0 = closed, 1 = open* (``aloha/real_env.py``): our layout and our gripper
  convention, so nothing is converted (``gripper="open1"``).
- ``xvla`` (2toinf/X-VLA README): ``image0..2``, ``proprio``, ``language_instruction``, ``domain_id``,
  ``steps``, each array sent as ``json_numpy.dumps(array)`` *inside* a JSON string; the reply is
  ``{"action": [30, 20]}``. X-VLA's action space is **EE6D end-effector poses** (per arm xyz, a 6-D
  rotation, a gripper; 20 columns with padding), not joint targets. RoboFollow drives 14 joints
  and has no inverse kinematics on this path, so the preset refuses to start unless the user says
  the served checkpoint outputs our joints (``action_space=joints``: the first 14 columns are the 14
  joints in our order; ``proprio`` then carries the 14 joints zero-padded to 20) and names the
  checkpoint's ``domain_id``. Sending EE6D targets to joint controllers would move the arm at random.
- ``gr00t-http`` (NVIDIA/Isaac-GR00T ``gr00t/eval/http_server.py``): ``{"observation": {...}}`` with
  GR00T's flat modality keys, video with a time axis ``(1, H, W, 3)``, state per body part ``(1, D)``;
  the reply is ``{"action.<part>": [T, D], ...}``, concatenated here in ``reply_key`` order. The keys
  are embodiment-specific: the defaults assume a bimanual checkpoint fine-tuned on our 14 joints
  (``video.cam_high``..., ``state.left_arm`` 6 + ``state.left_gripper`` 1 + right) with grippers
  1 = open; override them with the key map for any other modality config.

The user key map: any field of :class:`ActPreset` given as a client keyword (URL query or
``--kwargs``) replaces the preset's. Strings from a URL are converted here: ``image_keys`` as
``head:full_image,left_wrist:left_wrist_image`` (or a JSON object), ``state_key`` as one key or
``key:start:stop,...`` slices of our 14-vector, ``reply_key`` as one key, a comma list to concatenate,
or empty for "the reply is the chunk", ``extra`` as a JSON object of constant fields.

Gripper conventions: ``gripper="open1"`` sends and receives ours (1 = open, 0 = closed);
``gripper="closed1"`` is ``1 - g`` both ways for peers trained with 1 = closed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
from PIL import Image

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS, GRIPPER_INDEX
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import ObservationError, joint_state
from robofollow_ros.policy.wire.act.codec import decode_value, field_string
from robofollow_ros.policy.wire.common import WireFormatError

CAMERAS = tuple(CAMERA_OBS_KEYS)  # head, left_wrist, right_wrist
_GRIPPERS = list(GRIPPER_INDEX.values())


@dataclass(frozen=True)
class ActPreset:
    """One peer's request and reply layout; every field can be replaced by the user's key map."""

    name: str = "custom"
    #: our camera (head / left_wrist / right_wrist) → the peer's key; a camera not named is not sent.
    image_keys: dict[str, str] = field(default_factory=dict)
    #: side of the square the images are resized to (whole frame, Lanczos); 0 sends them as they are.
    image_size: int = 0
    #: add a leading time axis of 1 to images and state (GR00T's ``(T, H, W, 3)`` / ``(T, D)``).
    time_axis: bool = False
    #: the peer's key → ``(start, stop)`` slice of our 14-vector (one key holding all 14: ``(0, 14)``).
    state_key: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: zero-pad the state to this many values (X-VLA's 20); 0: no padding.
    state_dim: int = 0
    instruction_key: str = "instruction"
    #: constant fields sent with every request (X-VLA's ``domain_id``, ``steps``).
    extra: dict[str, Any] = field(default_factory=dict)
    #: wrap the request as ``{wrap: request}`` (GR00T's ``observation``); empty: no wrapping.
    wrap: str = ""
    #: ``inline`` json_numpy maps, or ``string``: each array a json_numpy string (X-VLA).
    field_encoding: str = "inline"
    #: send ``{"encoded": ...}`` (the reply comes double-encoded too).
    encoded: bool = False
    #: the reply's key(s) holding the chunk, concatenated along the last axis; empty: the reply is the chunk.
    reply_key: tuple[str, ...] = ()
    #: ``joints``: the chunk's first 14 columns are absolute joint targets; anything else is refused.
    action_space: str = "joints"
    #: columns of the peer's chunk (the first 14 are used); 0: exactly 14.
    reply_dim: int = 0
    #: ``open1`` (1 = open, ours) or ``closed1`` (1 = closed): how the peer reads grippers.
    gripper: str = "open1"

    def __post_init__(self) -> None:
        if self.gripper not in ("open1", "closed1"):
            raise ValueError(f"gripper: {self.gripper!r}; expected open1 or closed1")
        if self.field_encoding not in ("inline", "string"):
            raise ValueError(f"field_encoding: {self.field_encoding!r}; expected inline or string")
        unknown = set(self.image_keys) - set(CAMERAS)
        if unknown:
            raise ValueError(f"image_keys: unknown cameras {sorted(unknown)}; expected {list(CAMERAS)}")
        if not self.image_keys or not self.state_key:
            raise ValueError(f"preset {self.name}: image_keys and state_key must name at least one key each")
        covered = sorted(i for start, stop in self.state_key.values() for i in range(start, stop))
        if covered != list(range(ACTION_DIM)):
            raise ValueError(f"state_key: slices {dict(self.state_key)} must cover joints 0..13 exactly once")
        if not 0 <= self.image_size <= 4096:
            raise ValueError(f"image_size: {self.image_size} is outside 0..4096")
        if self.state_dim and self.state_dim < ACTION_DIM:
            raise ValueError(f"state_dim: {self.state_dim} is below the {ACTION_DIM} joints")
        if self.reply_dim and self.reply_dim < ACTION_DIM:
            raise ValueError(f"reply_dim: {self.reply_dim} is below the {ACTION_DIM} joints")


PRESETS: dict[str, ActPreset] = {
    "openvla-oft-aloha": ActPreset(
        name="openvla-oft-aloha",
        image_keys={"head": "full_image", "left_wrist": "left_wrist_image", "right_wrist": "right_wrist_image"},
        image_size=224, state_key={"state": (0, ACTION_DIM)}, instruction_key="instruction"),
    "xvla": ActPreset(
        name="xvla", image_keys={"head": "image0", "left_wrist": "image1", "right_wrist": "image2"},
        state_key={"proprio": (0, ACTION_DIM)}, state_dim=20, instruction_key="language_instruction",
        extra={"steps": 10}, field_encoding="string", reply_key=("action",), action_space="ee6d", reply_dim=20),
    "gr00t-http": ActPreset(
        name="gr00t-http",
        image_keys={"head": "video.cam_high", "left_wrist": "video.cam_left_wrist",
                    "right_wrist": "video.cam_right_wrist"},
        time_axis=True,
        state_key={"state.left_arm": (0, 6), "state.left_gripper": (6, 7), "state.right_arm": (7, 13),
                   "state.right_gripper": (13, 14)},
        instruction_key="annotation.human.task_description", wrap="observation",
        reply_key=("action.left_arm", "action.left_gripper", "action.right_arm", "action.right_gripper")),
}
DEFAULT_PRESET = "openvla-oft-aloha"


def _pairs(text: str, what: str) -> list[list[str]]:
    """``a:b,c:d`` as ``[["a", "b"], ["c", "d"]]``."""
    return [item.split(":") for item in text.split(",") if item.strip()] if text.strip() else []


def _convert(name: str, value: Any) -> Any:
    """A key-map value as the field wants it; strings come from a URL, other types from ``--kwargs``."""
    if name == "image_keys":
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("{") else \
                {p[0].strip(): ":".join(p[1:]).strip() for p in _pairs(value, name)}
        if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
            raise ValueError(f"image_keys: {value!r}; expected camera:key pairs")
        return dict(value)
    if name == "state_key":
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = json.loads(value)
        if isinstance(value, str):
            parts = _pairs(value, name)
            if len(parts) == 1 and len(parts[0]) == 1:
                return {parts[0][0].strip(): (0, ACTION_DIM)}
            if not parts or any(len(p) != 3 for p in parts):
                _bad(name, value)
            value = {p[0].strip(): (p[1], p[2]) for p in parts}
        try:
            return {str(k): (int(v[0]), int(v[1])) for k, v in value.items()}
        except (AttributeError, TypeError, ValueError, IndexError):
            _bad(name, value)
    if name == "reply_key":
        if isinstance(value, str):
            return tuple(k.strip() for k in value.split(",") if k.strip())
        if isinstance(value, list | tuple) and all(isinstance(k, str) for k in value):
            return tuple(value)
        _bad(name, value)
    if name == "extra":
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if not isinstance(value, dict):
            _bad(name, value)
        return dict(value)
    kind = {"image_size": int, "state_dim": int, "reply_dim": int, "time_axis": bool, "encoded": bool}.get(name, str)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "0", "false", "no"):
            return value.lower() in ("1", "true", "yes")
        _bad(name, value)
    if kind is int:
        if isinstance(value, bool):
            _bad(name, value)
        try:
            return int(value)
        except (TypeError, ValueError):
            _bad(name, value)
    if not isinstance(value, str):
        _bad(name, value)
    return value


def _bad(name: str, value: Any) -> NoReturn:
    raise ValueError(f"{name}: {str(value)[:80]!r} is not a valid value (see docs/protocols.md, act+http)")


KEY_MAP_FIELDS = tuple(f.name for f in dataclasses.fields(ActPreset) if f.name != "name")


def build_preset(preset: str = DEFAULT_PRESET, overrides: dict[str, Any] | None = None,
                 domain_id: Any = None) -> ActPreset:
    """The preset named ``preset`` with the user's key map applied; ``ValueError`` naming the field.

    ``domain_id`` (X-VLA) is a shorthand for ``extra={"domain_id": ...}``.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset: {preset!r}; expected one of {sorted(PRESETS)}")
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(KEY_MAP_FIELDS))
    if unknown:
        raise ValueError(f"act+http: unknown option(s) {unknown}; the key map takes {list(KEY_MAP_FIELDS)}")
    try:
        changes = {name: _convert(name, value) for name, value in overrides.items()}
    except json.JSONDecodeError as exc:
        raise ValueError(f"act+http key map: a JSON value is invalid ({exc.msg})") from None
    base = PRESETS[preset]
    if domain_id is not None:
        try:
            changes["extra"] = {**changes.get("extra", base.extra), "domain_id": int(domain_id)}
        except (TypeError, ValueError):
            _bad("domain_id", domain_id)
    built = dataclasses.replace(base, **changes)
    if built.action_space != "joints":
        raise ValueError(
            f"preset {preset}: the peer's actions are {built.action_space} (X-VLA: EE6D end-effector poses, "
            "xyz + 6-D rotation + gripper per arm), not the 14 joint targets RoboFollow drives; nothing here "
            "converts poses to joints, so the arm would get garbage. Pass action_space=joints only if the "
            "served checkpoint outputs our 14 joints in its first columns")
    if preset == "xvla" and "domain_id" not in built.extra:
        raise ValueError("preset xvla: give domain_id=N, the embodiment id the served checkpoint was trained with")
    return built


# ------------------------------------------------------------------------------------- requests
def resize_square(image: np.ndarray, size: int) -> np.ndarray:
    """The whole frame resized to ``size × size`` (Lanczos), as openvla-oft's ``resize_image_for_policy``
    does with TensorFlow's lanczos3 (its JPEG round trip before resizing is not reproduced)."""
    if size == 0 or image.shape[:2] == (size, size):
        return image
    return np.asarray(Image.fromarray(image).resize((size, size), resample=Image.Resampling.LANCZOS))


def _gripper(vector: np.ndarray, convention: str) -> np.ndarray:
    if convention == "closed1":
        vector = vector.copy()
        vector[..., _GRIPPERS] = 1.0 - vector[..., _GRIPPERS]
    return vector


def to_request(preset: ActPreset, obs: Observation, instruction: str) -> dict[str, Any]:
    """The peer's request body (before json_numpy encoding) for one observation."""
    state = joint_state(obs)
    state = _gripper(state, preset.gripper)

    def pack(array: np.ndarray) -> Any:
        array = np.ascontiguousarray(array[None] if preset.time_axis else array)
        return field_string(array) if preset.field_encoding == "string" else array

    request: dict[str, Any] = {}
    cameras = obs.get("observation") or {}
    for camera, key in preset.image_keys.items():
        rgb = (cameras.get(CAMERA_OBS_KEYS[camera]) or {}).get("rgb")
        if rgb is None:
            raise ObservationError(f"observation.{CAMERA_OBS_KEYS[camera]}.rgb: missing; preset {preset.name} "
                                   f"sends it as {key!r} (run with rendering, or drop it from image_keys)")
        image = np.asarray(rgb)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ObservationError(f"observation.{CAMERA_OBS_KEYS[camera]}.rgb: {image.dtype} {image.shape}; "
                                   "expected uint8 HxWx3")
        request[key] = pack(resize_square(image, preset.image_size))
    for key, (start, stop) in preset.state_key.items():
        part = state[start:stop]
        if preset.state_dim and len(preset.state_key) == 1:
            part = np.concatenate([part, np.zeros(preset.state_dim - part.size, np.float32)])
        request[key] = pack(part)
    request[preset.instruction_key] = instruction
    request.update(preset.extra)
    return {preset.wrap: request} if preset.wrap else request


def from_reply(preset: ActPreset, reply: Any, server: str) -> np.ndarray:
    """The float32 ``[T, 14]`` chunk in a peer's reply; :class:`WireFormatError` naming what is wrong."""
    if preset.reply_key:
        if not isinstance(reply, dict):
            raise WireFormatError(f"{server}: reply is {_kind(reply)}; preset {preset.name} expects an object "
                                  f"with {list(preset.reply_key)}")
        missing = [k for k in preset.reply_key if k not in reply]
        if missing:
            raise WireFormatError(f"{server}: reply lacks {missing}; it has keys {sorted(map(str, reply))[:8]}")
        parts = [_rows(reply[k], f"{server}: reply[{k!r}]") for k in preset.reply_key]
        if len({p.shape[0] for p in parts}) != 1:
            raise WireFormatError(f"{server}: reply parts have different lengths "
                                  f"{[p.shape[0] for p in parts]} for {list(preset.reply_key)}")
        chunk = np.concatenate(parts, axis=1)
    else:
        chunk = _rows(reply, f"{server}: reply")
    want = preset.reply_dim or ACTION_DIM
    if chunk.shape[1] != want:
        raise WireFormatError(f"{server}: reply chunk has {chunk.shape[1]} columns; preset {preset.name} expects "
                              f"{want} (shape {chunk.shape})")
    if not np.all(np.isfinite(chunk)):
        raise WireFormatError(f"{server}: reply chunk holds non-finite values")
    return _gripper(np.ascontiguousarray(chunk[:, :ACTION_DIM], dtype=np.float32), preset.gripper)


def _rows(value: Any, what: str) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise WireFormatError(f"{what}: {_kind(value)} is not a numeric array ({str(exc)[:80]})") from exc
    if array.size == 0:
        raise WireFormatError(f"{what}: empty (shape {array.shape}); expected [T, D] actions with T >= 1")
    if array.ndim == 3 and array.shape[0] == 1:
        array = array[0]  # a batch of one
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or array.shape[0] < 1:
        raise WireFormatError(f"{what}: shape {array.shape}; expected [T, D] actions")
    return array


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value[:60]!r}"
    return f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__


# ------------------------------------------------------------------------------------- server side
def from_request(preset: ActPreset, request: Any) -> tuple[Observation, str]:
    """``(our observation, instruction)`` from a peer's request in ``preset``'s layout (our server)."""
    if preset.wrap:
        if not isinstance(request, dict) or not isinstance(request.get(preset.wrap), dict):
            raise ObservationError(f"request: expected an object with {preset.wrap!r}")
        request = request[preset.wrap]
    if not isinstance(request, dict):
        raise ObservationError(f"request: expected a JSON object, got {_kind(request)}")
    cameras: dict[str, Any] = {}
    for camera, key in preset.image_keys.items():
        if key in request:
            image = decode_value(request[key], key)
            if preset.time_axis and isinstance(image, np.ndarray) and image.ndim == 4 and image.shape[0] == 1:
                image = image[0]
            cameras[CAMERA_OBS_KEYS[camera]] = {"rgb": image}
    vector = np.zeros(ACTION_DIM, np.float32)
    for key, (start, stop) in preset.state_key.items():
        if key not in request:
            raise ObservationError(f"{key}: missing; expected {stop - start} joint values")
        part = np.asarray(decode_value(request[key], key)).reshape(-1)
        if part.dtype.kind not in "biuf" or part.size != stop - start:
            raise ObservationError(f"{key}: {part.size} values of {part.dtype}; expected {stop - start} numbers")
        vector[start:stop] = part
    instruction = request.get(preset.instruction_key, "")
    if instruction is None:
        instruction = ""
    if not isinstance(instruction, str):
        raise ObservationError(f"{preset.instruction_key}: expected a string, got {_kind(instruction)}")
    obs: Observation = {"observation": cameras, "joint_action": {"vector": _gripper(vector, preset.gripper)},
                        "instruction": instruction}
    return obs, instruction
