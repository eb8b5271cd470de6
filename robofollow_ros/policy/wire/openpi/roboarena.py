"""RoboArena's dialect of openpi's websocket protocol (``openpi://...?dialect=roboarena``).

Wire facts (robo-arena/roboarena ``policy_server.py``, ``policy_client.py``): the same msgpack codec
as openpi; on connect the server sends its ``PolicyServerConfig`` (``image_resolution``,
``needs_wrist_camera``, ``n_external_cameras`` 0-2, ``needs_stereo_camera``, ``needs_session_id``,
``action_space`` in joint_position / joint_velocity / cartesian_position / cartesian_velocity); every
request carries ``"endpoint": "infer" | "reset"`` (a plain openpi request, without it, is answered
with a traceback text frame and a close); ``infer`` is answered with msgpack of whatever the
policy's ``infer`` returned (a bare ``(N, D)`` ndarray in RoboArena's own ``DummyPolicy``, or
openpi's ``{"actions": ...}``),
``reset`` with the *text* frame ``"reset successful"`` (the one text frame that is not an error).

What works, honestly: RoboArena's own policies are DROID policies (one 7-joint arm + a gripper,
``observation/joint_position`` (7), ``observation/exterior_image_{i}_left``, replies ``(N, 8)``);
no mapping turns them into 14-joint bimanual targets, so such a reply is refused with one line
saying so. The dialect is for servers that speak RoboArena's framing with openpi's ALOHA keys
(openpi servers with an endpoint switch, vLLM-Omni's ``/v1/realtime/robot/openpi``): the request
is our ALOHA observation (``state`` (14), ``images.cam_high`` / ``cam_left_wrist`` /
``cam_right_wrist`` CHW uint8, ``prompt``) plus ``endpoint`` and ``session_id``. The handshake is
checked where it says something we can honour: an ``action_space`` other than ``joint_position``,
``needs_stereo_camera`` and two external cameras are refused with one line; ``image_resolution``
sets the resize; ``n_external_cameras: 0`` / ``needs_wrist_camera: false`` leave those cameras out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.interface import Observation
from robofollow_ros.policy.observation import joint_state
from robofollow_ros.policy.wire.common import WireFormatError
from robofollow_ros.policy.wire.openpi.observation import OPENPI_CAMERAS, ObservationError, resize_with_pad, to_uint8

DIALECTS = ("openpi", "roboarena")
RESET_REPLY = "reset successful"
ACTION_SPACES = ("joint_position", "joint_velocity", "cartesian_position", "cartesian_velocity")


class HandshakeRefused(WireFormatError):
    """The server's ``PolicyServerConfig`` asks for what this rig cannot give."""


def check_dialect(value: str) -> str:
    if value not in DIALECTS:
        raise ValueError(f"dialect: {value!r} is not one of {', '.join(DIALECTS)}")
    return value


def roboarena_settings(config: Any, uri: str, image_size: int) -> dict[str, Any]:
    """What the client sends, from the server's ``PolicyServerConfig``: ``image_size`` (height, width),
    ``cameras`` (which ALOHA images), ``session_id`` (whether it is needed); raises
    :class:`HandshakeRefused` naming the field and the value."""
    if not isinstance(config, dict):
        raise HandshakeRefused(f"roboarena server {uri}: handshake is {type(config).__name__}, "
                               "not a PolicyServerConfig")

    def refuse(field: str, why: str) -> HandshakeRefused:
        return HandshakeRefused(f"roboarena server {uri}: {field}={config.get(field)!r} {why}")

    space = config.get("action_space", "joint_position")
    if space != "joint_position":
        raise refuse("action_space", "is refused: the rig takes absolute joint positions only")
    if config.get("needs_stereo_camera"):
        raise refuse("needs_stereo_camera", "is refused: the rig has no stereo cameras")
    externals = config.get("n_external_cameras", 1)
    if externals not in (0, 1) or isinstance(externals, bool):
        raise refuse("n_external_cameras", "is refused: the rig has one external (head) camera")
    size: Any = config.get("image_resolution", (image_size, image_size))
    if size is None:
        resize = None
    elif (isinstance(size, list | tuple) and len(size) == 2
          and all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 4096 for n in size)):
        resize = (int(size[0]), int(size[1]))
    else:
        raise refuse("image_resolution", "is not (height, width)")
    cameras = {"cam_high"} if externals == 1 else set()
    if config.get("needs_wrist_camera", True):
        cameras |= {"cam_left_wrist", "cam_right_wrist"}
    return {"image_size": resize, "cameras": cameras, "needs_session_id": bool(config.get("needs_session_id"))}


def roboarena_request(obs: Observation, prompt: str, settings: dict[str, Any],
                      session_id: str | None) -> dict[str, Any]:
    """An ``infer`` request: the ALOHA observation with the handshake's cameras and resolution, the
    endpoint, and ``session_id`` when there is one to send."""
    state = joint_state(obs)
    cameras = obs.get("observation") or {}
    images = {}
    for key, name in OPENPI_CAMERAS.items():
        if name not in settings["cameras"]:
            continue
        entry = cameras.get(key)
        if not isinstance(entry, dict) or "rgb" not in entry:
            raise ObservationError(f"observation.{key}.rgb: missing; the roboarena server asks for {name}")
        image = to_uint8(np.asarray(entry["rgb"]))
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ObservationError(f"observation.{key}.rgb: shape {image.shape} is not an HWC RGB image")
        if settings["image_size"] is not None:
            image = resize_with_pad(image, *settings["image_size"])
        images[name] = np.ascontiguousarray(image.transpose(2, 0, 1))
    request: dict[str, Any] = {"state": state, "images": images, "prompt": obs.get("instruction") or prompt,
                               "endpoint": "infer"}
    if session_id is not None:
        request["session_id"] = session_id
    return request


def roboarena_actions(response: Any, uri: str) -> np.ndarray:
    """The ``[T, 14]`` chunk of an ``infer`` reply; a DROID ``(N, 8)`` / ``(N, 7)`` reply is refused.

    RoboArena's server packs whatever ``policy.infer(obs)`` returns: its ``DummyPolicy`` and
    ``scripts/test_policy_server.py`` use a bare 2-D ndarray, openpi-derived policies the map
    ``{"actions": ...}`` (which RoboArena's evaluator client indexes). Both are read."""
    if isinstance(response, np.ndarray):
        actions = response
    elif isinstance(response, dict) and isinstance(response.get("actions"), np.ndarray | list):
        actions = np.asarray(response["actions"])
    else:
        keys = f"keys {sorted(map(str, response))[:5]}" if isinstance(response, dict) else type(response).__name__
        raise WireFormatError(f"roboarena server {uri}: infer reply is {keys}; expected an [N, {ACTION_DIM}] "
                              "array or a map with 'actions'")
    if actions.dtype.kind not in "biuf" or actions.ndim != 2 or actions.shape[1] != ACTION_DIM:
        hint = (": a DROID policy (one 7-joint arm + gripper) cannot drive the 14-joint bimanual rig"
                if actions.ndim == 2 and actions.shape[1] in (7, 8) else "")
        raise WireFormatError(f"roboarena server {uri}: actions of shape {actions.shape} ({actions.dtype}); "
                              f"expected [N, {ACTION_DIM}]{hint}")
    return actions
