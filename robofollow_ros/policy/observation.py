"""The observation contract: what an evaluated policy is handed, built and checked in one place.

Every path builds the observation with :func:`contract_observation` (the headless episode runner,
``policy_node``, the ``tcp://`` client for its request), and both servers check a request's
observation with :func:`validate_observation` before any policy sees it (the TCP server on the
decoded JSON, the openpi server after the ALOHA conversion), so a malformed observation fails with
one line naming the field and the value, never inside a model. The keys, exactly those the official
``remote_policy.py`` sends (docs/protocols.md cites the lines):

- ``observation.<camera>.rgb`` for ``head_camera``, ``left_camera``, ``right_camera``: each camera
  is optional and ``rgb`` may be ``None`` (the simulator's render-free mode); an image that is
  there is uint8 ``H × W × 3`` with ``1 ≤ H, W ≤`` :data:`MAX_IMAGE_SIDE`.
- ``joint_action.vector``: required; exactly 14 finite values (:data:`~robofollow_ros.contract.ACTION_DIM`),
  1-D, a float dtype (a JSON list of numbers counts as float64). The dtype is kept (the simulator's
  float64 travels as float64).
- ``instruction``: optional (``None`` counts as absent); a ``str`` of at most
  :data:`MAX_INSTRUCTION_CHARS` characters that is valid Unicode (no lone surrogates, which
  JSON's ``\\ud800`` escapes can carry and which break any later encoding).
- Anything else, at any level (``depth``, ``segmentation``, a reference client's whole simulator
  observation), is left out: the policy receives exactly the contract. A missing required key, or a
  known key with a wrong value, is refused.

One extension, never part of the contract: ``privileged`` (:func:`privileged_extension`: the
evaluation task id and every object's true pose). :func:`contract_observation` adds it only when its
caller passes it, and the callers pass it only to a policy that receives it
(``interface.receives_privileged``: a declaring built-in in process, or any policy of a run started
with ``--privileged``); the ``tcp://`` client forwards it only under ``--privileged``. A server passes
on a ``privileged`` mapping that a client sent (ours sends one only under ``--privileged``).

Both functions return a new dict; arrays are not copied. Checks are NumPy calls on whole arrays
(no per-element Python).
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


def joint_state(obs: Any) -> np.ndarray:
    """The observation's ``joint_action.vector`` as 14 float32 values, flat: what a wire client sends a peer.

    Looser than :func:`validate_vector` (any numeric sequence of 14 values), since the peer's own checks
    follow; what is not 14 numbers is refused here, naming the field, before anything is sent."""
    try:
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).reshape(-1)
    except (KeyError, TypeError, ValueError) as exc:
        raise ObservationError(f"observation: joint_action.vector is missing or not numeric ({exc})") from None
    if vector.shape != (ACTION_DIM,):
        raise ObservationError(f"joint_action.vector: {vector.size} values; expected {ACTION_DIM}")
    return vector


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


def contract_observation(source: Any, instruction: str | None = None, *,
                         privileged: Mapping[str, Any] | None = None) -> Observation:
    """The observation a policy is handed, built from ``source`` (a simulator's, a node's or a peer's
    observation): exactly the contract's keys, checked; ``instruction``, when given, is the one the
    observation carries (else ``source``'s own); ``privileged`` is added only when the caller passes it.
    """
    obs = _mapping(source, "observation")
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
    text = obs.get("instruction") if instruction is None else instruction
    if text is not None:
        clean["instruction"] = validate_instruction(text)
    if privileged is not None:
        clean["privileged"] = _mapping(privileged, "privileged")
    return clean


def validate_observation(obs: Any) -> Observation:
    """A server's check of a request's observation: :func:`contract_observation`, with the ``privileged``
    mapping the client sent passed on (a client sends one only when its run was started with
    ``--privileged``)."""
    clean = contract_observation(obs)
    if "privileged" in obs:
        clean["privileged"] = _mapping(obs["privileged"], "privileged")
    return clean


def privileged_extension(task_id: str, objects: Mapping[str, Any],
                         object_quats: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``obs["privileged"]``: the evaluation task id and every object's pose (world frame: ``objects``
    name → ``[x, y, z]``, ``object_quats`` name → ``[w, x, y, z]``). The headless evaluator takes them
    from the simulator, ``policy_node`` from ``/robofollow/objects``; docs/oracle.md."""
    return {"task_id": str(task_id), "objects": objects, "object_quats": object_quats or {}}
