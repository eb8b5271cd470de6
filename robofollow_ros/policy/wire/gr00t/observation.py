"""RoboFollow ↔ GR00T modality keys: presets for bimanual ALOHA-style embodiments and a user key map.

A GR00T model is post-trained for one embodiment; its modality config names the video, state, action
and language keys (``get_modality_config``). The rig's observation maps onto them as:

- ``video.<key>``: one camera each (head, left_wrist, right_wrist → the key the map names), uint8
  ``(B=1, T=1, H, W, 3)``, resized to ``image_size`` when the map gives one (GR00T's processor
  resizes again to what the model wants; sending a smaller frame only saves bytes);
- ``state.<key>``: consecutive slices of the 14 joints in contract order (``JOINT_NAMES``: left arm 6,
  left gripper, right arm 6, right gripper), float32 ``(1, 1, D)``; grippers optionally rescaled from
  ours (0 closed, 1 open) to the model's ``gripper_range`` ``[closed, open]``;
- ``language.<key>``: exactly one, ``[[instruction]]``.

The reply's action keys are joined back, in the map's order, into the ``[T, 14]`` chunk of absolute
joint targets (grippers rescaled back). N1.6 servers take the nested form (``{"video": {key: ...}}``)
and answer ``[action, info]``; N1.5 servers (and N1.6's ``Gr00tSimPolicyWrapper``) the flat one
(``{"video.key": ...}``, actions ``action.key``); ``api`` picks, and replies of either form are read.

Presets (the key map a user would otherwise write; ``--kwargs`` overrides any field):

- ``aloha_agilex`` (default): the ALOHA-AgileX dual-arm of RoboTwin, as a public GR00T N1.6 fine-tune
  registers it: Choiyoonji/Isaac-GR00T ``robotwin/robotwin_modality_config.py`` @a5f9c0bd
  (video ``head``/``left_wrist``/``right_wrist``; state and action ``left_arm`` 6, ``left_gripper`` 1,
  ``right_arm`` 6, ``right_gripper`` 1; language ``annotation.human.action.task_description``).
- ``arx``: NVIDIA/Isaac-GR00T ``examples/arx/arx_config.py`` @6544dc32 (the bimanual example in
  GR00T's own tree: video ``head``/``left_wrist``/``right_wrist``; ``arm_left`` 6, ``gripper_left`` 1,
  ``arm_right`` 6, ``gripper_right`` 1; language ``annotation.human.task_description``).

GR00T's built-in embodiments (``gr00t/configs/data/embodiment_configs.py``: G1, LIBERO, SimplerEnv)
are single-arm or humanoid, so no preset maps onto them; a model of another embodiment needs a key map.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS, GRIPPER_INDEX
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import ObservationError, joint_state

__all__ = ["PRESETS", "Gr00tKeyMap", "ObservationError", "key_map"]

CAMERA_ROLES = tuple(CAMERA_OBS_KEYS)  # head, left_wrist, right_wrist
APIS = ("n1.6", "n1.5")


@dataclass(frozen=True)
class Gr00tKeyMap:
    """Which GR00T key each part of the rig's observation and action travels under.

    ``video``: camera role → video key; ``state`` / ``action``: ``[key, width]`` pairs that split the
    14 joints in contract order (widths sum to 14); ``language``: the one language key;
    ``image_size``: ``[H, W]`` or None (frames travel at their own size); ``gripper_range``: the model's
    ``[closed, open]`` gripper values (ours are ``[0, 1]``).
    """

    video: dict[str, str]
    state: tuple[tuple[str, int], ...]
    action: tuple[tuple[str, int], ...]
    language: str
    image_size: tuple[int, int] | None = None
    gripper_range: tuple[float, float] = (0.0, 1.0)
    preset: str = field(default="", compare=False)

    def describe(self) -> dict[str, Any]:
        """JSON-able form for run.json."""
        out = asdict(self)
        out["state"] = [list(p) for p in self.state]
        out["action"] = [list(p) for p in self.action]
        return out


_ALOHA = (("left_arm", 6), ("left_gripper", 1), ("right_arm", 6), ("right_gripper", 1))
_ARX = (("arm_left", 6), ("gripper_left", 1), ("arm_right", 6), ("gripper_right", 1))
_CAMS = {"head": "head", "left_wrist": "left_wrist", "right_wrist": "right_wrist"}
PRESETS: dict[str, Gr00tKeyMap] = {
    "aloha_agilex": Gr00tKeyMap(dict(_CAMS), _ALOHA, _ALOHA, "annotation.human.action.task_description",
                                preset="aloha_agilex"),
    "arx": Gr00tKeyMap(dict(_CAMS), _ARX, _ARX, "annotation.human.task_description", preset="arx"),
}


def _pairs(value: Any, name: str) -> tuple[tuple[str, int], ...]:
    if isinstance(value, dict):
        value = list(value.items())
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"{name}: expected [[key, width], ...] splitting the {ACTION_DIM} joints, got {value!r}")
    pairs = []
    for item in value:
        if not (isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)
                and type(item[1]) is int and item[1] > 0):
            raise ValueError(f"{name}: {item!r} is not a [key, width] pair with a positive integer width")
        pairs.append((item[0], item[1]))
    if sum(w for _, w in pairs) != ACTION_DIM:
        raise ValueError(f"{name}: widths {[w for _, w in pairs]} sum to {sum(w for _, w in pairs)}, "
                         f"not the {ACTION_DIM} joints")
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError(f"{name}: a key appears twice in {value!r}")
    return tuple(pairs)


def _size(value: Any) -> tuple[int, int] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        parts = value.lower().split("x")
        try:
            value = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"image_size: {value!r} is not N or HxW") from None
    if isinstance(value, int):
        value = [value, value]
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int and 1 <= v <= 4096
                                                                         for v in value)):
        raise ValueError(f"image_size: {value!r} is not [H, W] with sides 1..4096")
    return (value[0], value[1])


def key_map(preset: str = "aloha_agilex", *, video: Any = None, state: Any = None, action: Any = None,
            language: Any = None, image_size: Any = None, gripper_range: Any = None) -> Gr00tKeyMap:
    """A preset with the user's overrides; ``ValueError`` naming the field on a bad one."""
    if preset not in PRESETS:
        raise ValueError(f"preset: {preset!r} is not one of {', '.join(PRESETS)}")
    base = PRESETS[preset]
    if video is not None and (not isinstance(video, dict) or not video or set(video) - set(CAMERA_ROLES) \
                or not all(isinstance(v, str) and v for v in video.values())):
        raise ValueError(f"video: expected {{camera: key}} with cameras from {list(CAMERA_ROLES)}, got {video!r}")
    if language is not None and (not isinstance(language, str) or not language):
        raise ValueError(f"language: expected a key string, got {language!r}")
    if gripper_range is not None and not (isinstance(gripper_range, list | tuple) and len(gripper_range) == 2
            and all(isinstance(v, int | float) for v in gripper_range) and gripper_range[0] != gripper_range[1]):
        raise ValueError(f"gripper_range: expected [closed, open] (two different numbers), got {gripper_range!r}")
    return Gr00tKeyMap(
        video=dict(video) if video is not None else dict(base.video),
        state=_pairs(state, "state") if state is not None else base.state,
        action=_pairs(action, "action") if action is not None else base.action,
        language=language if language is not None else base.language,
        image_size=_size(image_size) if image_size is not None else base.image_size,
        gripper_range=(float(gripper_range[0]), float(gripper_range[1])) if gripper_range is not None
        else base.gripper_range,
        preset=preset)


# ------------------------------------------------------------------------------------------ grippers
_GRIPPERS = list(GRIPPER_INDEX.values())


def _to_model_grippers(vector: np.ndarray, keys: Gr00tKeyMap) -> np.ndarray:
    closed, opened = keys.gripper_range
    if (closed, opened) != (0.0, 1.0):
        vector = vector.copy()
        vector[..., _GRIPPERS] = closed + vector[..., _GRIPPERS] * (opened - closed)
    return vector


def _from_model_grippers(chunk: np.ndarray, keys: Gr00tKeyMap) -> np.ndarray:
    closed, opened = keys.gripper_range
    if (closed, opened) != (0.0, 1.0):
        chunk[..., _GRIPPERS] = (chunk[..., _GRIPPERS] - closed) / (opened - closed)
    return chunk


# ------------------------------------------------------------------------------ client: rig → GR00T
def _resize(image: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    if size is None or image.shape[:2] == size:
        return image
    return np.asarray(Image.fromarray(image).resize((size[1], size[0]), resample=Image.Resampling.BILINEAR))


def to_gr00t_observation(obs: Observation, instruction: str, keys: Gr00tKeyMap, api: str = "n1.6") -> dict[str, Any]:
    """The observation a GR00T server's ``get_action`` takes, nested (N1.6) or flat (N1.5)."""
    vector = joint_state(obs)
    vector = _to_model_grippers(vector, keys)
    cameras = obs.get("observation") or {}
    video: dict[str, np.ndarray] = {}
    for role, key in keys.video.items():
        obs_key = CAMERA_OBS_KEYS[role]
        rgb = (cameras.get(obs_key) or {}).get("rgb")
        if rgb is None:
            raise ObservationError(f"observation.{obs_key}.rgb: missing; the GR00T model wants it as video.{key} "
                                   "(run with rendering on, or map fewer cameras with --kwargs video)")
        image = np.asarray(rgb)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
            raise ObservationError(f"observation.{obs_key}.rgb: {image.dtype} {image.shape} is not uint8 HxWx3")
        video[key] = np.ascontiguousarray(_resize(image, keys.image_size))[None, None]
    state: dict[str, np.ndarray] = {}
    start = 0
    for key, width in keys.state:
        state[key] = vector[start:start + width].reshape(1, 1, width)
        start += width
    text = obs.get("instruction") or instruction or ""
    if api == "n1.5":
        flat: dict[str, Any] = {f"video.{k}": v for k, v in video.items()}
        flat.update({f"state.{k}": v for k, v in state.items()})
        flat[keys.language] = [text]
        return flat
    return {"video": video, "state": state, "language": {keys.language: [[text]]}}


def _action_arrays(reply: Any) -> dict[str, Any]:
    """The action dict of an N1.6 ``[action, info]`` or an N1.5 bare reply, keys without ``action.``."""
    if isinstance(reply, list | tuple) and len(reply) == 2 and isinstance(reply[0], dict):
        reply = reply[0]
    if not isinstance(reply, dict):
        raise ObservationError(f"get_action reply: expected an action map or [action, info], got "
                               f"{type(reply).__name__}")
    return {str(k).removeprefix("action."): v for k, v in reply.items()}


def from_gr00t_action(reply: Any, keys: Gr00tKeyMap) -> np.ndarray:
    """The ``[T, 14]`` chunk from a ``get_action`` reply; one line naming the key that is missing or wrong."""
    actions = _action_arrays(reply)
    parts = []
    horizon: int | None = None
    for key, width in keys.action:
        if key not in actions:
            raise ObservationError(f"get_action reply: no action key {key!r}; the reply has "
                                   f"{sorted(actions)[:8]} (fix the key map: --kwargs action)")
        value = actions[key]
        if not isinstance(value, np.ndarray):
            raise ObservationError(f"action.{key}: expected an array, got {type(value).__name__}")
        if value.ndim == 3:
            if value.shape[0] != 1:
                raise ObservationError(f"action.{key}: batch of {value.shape[0]}; expected 1")
            value = value[0]
        if value.ndim == 1 and width == 1:
            value = value[:, None]
        if value.ndim != 2 or value.shape[1] != width:
            raise ObservationError(f"action.{key}: shape {value.shape}; expected (1, T, {width}) or (T, {width})")
        if horizon is not None and value.shape[0] != horizon:
            raise ObservationError(f"action.{key}: {value.shape[0]} steps; other keys have {horizon}")
        horizon = value.shape[0]
        parts.append(value.astype(np.float32))
    return _from_model_grippers(np.concatenate(parts, axis=1), keys)


def check_modality_config(config: Any, keys: Gr00tKeyMap, server: str) -> None:
    """Refuse, in one line, a key map that does not match what the server's model says it takes."""
    if not isinstance(config, dict) or not config:
        return  # a server whose policy has no get_modality_config answers {}: nothing to check against

    def keys_of(modality: str) -> list[str] | None:
        entry = config.get(modality)
        found = entry.get("modality_keys") if isinstance(entry, dict) else None
        return [str(k) for k in found] if isinstance(found, list) else None

    ours = {"video": list(keys.video.values()), "state": [k for k, _ in keys.state],
            "action": [k for k, _ in keys.action], "language": [keys.language]}
    problems = []
    for modality, mine in ours.items():
        theirs = keys_of(modality)
        if theirs is None:
            continue
        strip = f"{modality}." if modality != "language" else ""
        theirs = [k.removeprefix(strip) for k in theirs]  # N1.5 names keys "video.head"
        if modality == "video":
            missing = sorted(set(theirs) - set(mine))
            extra = sorted(set(mine) - set(theirs))
            if missing or extra:
                problems.append(f"video wants {theirs}, the key map sends {mine}")
        elif theirs != mine:
            problems.append(f"{modality} wants {theirs}, the key map has {mine}")
        entry = config.get(modality)
        delta = entry.get("delta_indices") if isinstance(entry, dict) else None
        if modality in ("video", "state") and isinstance(delta, list) and len(delta) != 1:
            problems.append(f"{modality} wants {len(delta)} frames of history (delta_indices {delta}); "
                            "the bridge sends the current frame only")
    if problems:
        raise ObservationError(f"GR00T server {server}: its modality config does not match the key map "
                               f"(preset {keys.preset!r}): " + "; ".join(problems)
                               + " — pass the model's keys with --kwargs")


def modality_config(keys: Gr00tKeyMap, horizon: int, form: str = "n1.6") -> dict[str, Any]:
    """What our server answers to ``get_modality_config``: one ``ModalityConfig`` per modality in the class
    form GR00T's ``MsgSerializer`` writes, so its client decodes each into its own ``ModalityConfig``.

    ``n1.6`` (also N1.7, ``gr00t/policy/server_client.py``): ``as_json`` is the dataclass as a map
    (``to_json_serializable``: every field, enums by name); the action keys carry ``action_configs`` saying
    what our rows are (absolute joint targets). ``n1.5`` (``gr00t/eval/service.py``): ``as_json`` is JSON
    text of the pydantic model (``delta_indices``, ``modality_keys``). ``horizon``: the action rows a
    ``get_action`` answers (``delta_indices`` 0..horizon-1)."""
    if horizon < 1:
        raise ValueError(f"horizon: {horizon} action rows; at least 1")
    fields = {"video": ([0], list(keys.video.values())), "state": ([0], [k for k, _ in keys.state]),
              "action": (list(range(horizon)), [k for k, _ in keys.action]), "language": ([0], [keys.language])}
    out: dict[str, Any] = {}
    for modality, (delta, names) in fields.items():
        config: dict[str, Any] = {"delta_indices": delta, "modality_keys": names}
        if form == "n1.5":
            out[modality] = {"__ModalityConfig_class__": True, "as_json": json.dumps(config)}
            continue
        absolute = {"rep": "ABSOLUTE", "type": "NON_EEF", "format": "DEFAULT", "state_key": None}
        config.update(sin_cos_embedding_keys=None, mean_std_embedding_keys=None,
                      action_configs=[dict(absolute) for _ in names] if modality == "action" else None)
        out[modality] = {"__ModalityConfig_class__": True, "as_json": config}
    return out


# ------------------------------------------------------------------------------ server: GR00T → rig
def from_gr00t_observation(obs: Any, keys: Gr00tKeyMap) -> tuple[Observation, str, bool]:
    """``(RoboFollow observation, instruction, batched)`` from a GR00T ``get_action`` observation,
    nested or flat; ``batched`` says whether arrays carried the batch axis (the reply mirrors it)."""
    if not isinstance(obs, dict):
        raise ObservationError(f"observation: expected a map, got {type(obs).__name__}")
    nested = isinstance(obs.get("video"), dict)

    def get(modality: str, key: str) -> Any:
        if nested:
            group = obs.get(modality)
            return group.get(key) if isinstance(group, dict) else None
        return obs.get(key if modality == "language" else f"{modality}.{key}")

    cameras: dict[str, dict[str, Any]] = {}
    batched: bool | None = None
    for role, key in keys.video.items():
        value = get("video", key)
        if value is None:
            raise ObservationError(f"video.{key}: missing; this server maps {sorted(keys.video.values())}")
        if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.ndim not in (4, 5) \
                or value.shape[-1] != 3:
            raise ObservationError(f"video.{key}: expected uint8 (B, T, H, W, 3), got {_describe(value)}")
        batched = value.ndim == 5
        frames = value[0] if batched else value
        if frames.shape[0] != 1 or (batched and value.shape[0] != 1):
            raise ObservationError(f"video.{key}: shape {value.shape}; this server takes one robot, one frame "
                                   "(B = T = 1)")
        cameras[CAMERA_OBS_KEYS[role]] = {"rgb": frames[0]}
    parts = []
    for key, width in keys.state:
        value = get("state", key)
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f" or value.shape[-1:] != (width,) \
                or value.size != width:
            raise ObservationError(f"state.{key}: expected float32 (1, 1, {width}), got {_describe(value)}")
        parts.append(value.reshape(width).astype(np.float32))
    vector = _from_model_grippers(np.concatenate(parts), keys)
    text = get("language", keys.language)
    while isinstance(text, list | tuple) and len(text) == 1:
        text = text[0]
    if not isinstance(text, str):
        raise ObservationError(f"language.{keys.language}: expected [[str]], got {_describe(text)}")
    observation = {"observation": cameras, "joint_action": {"vector": vector}, "instruction": text}
    return observation, text, bool(batched)


def to_gr00t_action(chunk: np.ndarray, keys: Gr00tKeyMap, batched: bool, flat: bool) -> dict[str, np.ndarray]:
    """Our ``[T, 14]`` chunk as GR00T action arrays, ``(1, T, D)`` (or ``(T, D)`` unbatched)."""
    chunk = _to_model_grippers(np.asarray(chunk, dtype=np.float32), keys)
    out: dict[str, np.ndarray] = {}
    start = 0
    for key, width in keys.action:
        part = np.ascontiguousarray(chunk[:, start:start + width])
        out[f"action.{key}" if flat else key] = part[None] if batched else part
        start += width
    return out


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__
