"""The action and observation specs both sides announce in ``hello`` (vla-eval's ``specs.DimSpec``).

A vla-eval model server says what it produces (``action_spec``) and what it consumes
(``observation_spec``) as ``{component: {"name", "dims", "format"[, "range", "accepts",
"description"]}}``; vla-eval's orchestrator only logs a warning when they disagree with the
benchmark's. We refuse instead, before the first episode, with one line naming both sides: a server
that produces end-effector deltas or wants an end-effector state would otherwise be fed our joints
and score garbage for hours.

Ours is the convention of vla-eval's own RoboTwin benchmark (``benchmarks/robotwin/benchmark.py``),
the same robot and the same cameras as this rig: action ``{"joints": 14-D joint_positions}``
(absolute targets in RoboFollow's joint order, grippers at 6 and 13 with 1 = open, 0 = closed), and
observation images ``head_camera`` / ``left_camera`` / ``right_camera`` (``rgb_hwc_uint8``), ``state``
(14 joint positions), ``language``. What a server may announce and we still accept:

- action: components whose format is ``joint_positions`` (dims adding up to 14 when all are given)
  or ``raw`` (no convention: the reply's shape is still checked on every call); no spec at all;
- observation: components we can fill: ``rgb_hwc_uint8`` images, ``language``, ``joint_positions``
  of 14 (or unstated) dims, ``raw``; a component with ``accepts`` needs one of ours in it.
"""

from __future__ import annotations

from typing import Any

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS
from robofollow_ros.policy.interface import PolicyError

JOINTS, IMAGE, LANGUAGE, RAW = "joint_positions", "rgb_hwc_uint8", "language", "raw"
_GRIPPERS = "absolute targets in RoboFollow's joint order; grippers at 6 and 13, 1 = open, 0 = closed"

#: What our client consumes and our server produces.
ACTION_SPEC: dict[str, dict[str, Any]] = {
    "joints": {"name": "joints", "dims": ACTION_DIM, "format": JOINTS, "description": _GRIPPERS},
}
#: What our client sends and our server consumes.
OBSERVATION_SPEC: dict[str, dict[str, Any]] = {
    **{camera: {"name": "image", "dims": 0, "format": IMAGE} for camera in CAMERA_OBS_KEYS.values()},
    "state": {"name": "state", "dims": ACTION_DIM, "format": JOINTS, "description": _GRIPPERS},
    "language": {"name": "language", "dims": 0, "format": LANGUAGE},
}


class SpecMismatchError(PolicyError, ValueError):
    """The server's announced specs disagree with RoboFollow's; the message names both."""


def describe(spec: Any) -> str:
    """``{joints: joint_positions 14-D}``, for error lines (tolerates anything a server sends)."""
    if not isinstance(spec, dict):
        return repr(spec)[:80]
    parts = []
    for key, value in list(spec.items())[:8]:
        value = value if isinstance(value, dict) else {}
        dims = value.get("dims")
        parts.append(f"{key}: {value.get('format')}" + (f" {dims}-D" if isinstance(dims, int) and dims > 0 else ""))
    return "{" + ", ".join(parts) + "}"


def _components(spec: Any, what: str, server: str) -> list[tuple[str, str, int, frozenset[str] | None]]:
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise SpecMismatchError(f"vla-eval server {server}: {what} is a {type(spec).__name__}, not a map of DimSpecs")
    out = []
    for key, value in spec.items():
        if not isinstance(value, dict) or not isinstance(value.get("format"), str):
            raise SpecMismatchError(f"vla-eval server {server}: {what}[{key!r}] is not a DimSpec map: "
                                    f"{str(value)[:80]}")
        dims = value.get("dims", 0)
        accepts = value.get("accepts")
        out.append((str(key), value["format"], dims if type(dims) is int else -1,
                    frozenset(map(str, accepts)) if isinstance(accepts, list) else None))
    return out


def check_action_spec(spec: Any, server: str) -> None:
    """Refuse a server whose actions are not (or might not be) our 14 absolute joint positions."""
    components = _components(spec, "action_spec", server)
    bad = [key for key, fmt, _, _ in components if fmt not in (JOINTS, RAW)]
    joints = [dims for _, fmt, dims, _ in components if fmt == JOINTS]
    if bad or (joints and all(d > 0 for d in joints) and sum(joints) != ACTION_DIM):
        raise SpecMismatchError(f"vla-eval server {server}: its action spec {describe(spec)} does not match ours "
                                f"{describe(ACTION_SPEC)} ({_GRIPPERS})")


def check_observation_spec(spec: Any, server: str) -> None:
    """Refuse a server that wants an observation component we cannot give it."""
    for key, fmt, dims, accepts in _components(spec, "observation_spec", server):
        ours = (IMAGE, LANGUAGE, JOINTS, RAW)
        if accepts is not None:
            fits = bool(accepts & set(ours))
        else:
            fits = fmt in ours and not (fmt == JOINTS and dims not in (0, ACTION_DIM))
        if not fits:
            wanted = sorted(accepts) if accepts is not None else fmt + (f" {dims}-D" if dims > 0 else "")
            raise SpecMismatchError(f"vla-eval server {server}: its observation spec asks for {key!r} as {wanted}, "
                                    f"which we do not send; ours is {describe(OBSERVATION_SPEC)}")
