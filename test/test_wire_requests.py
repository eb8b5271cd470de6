"""Every wire client reads the joints it sends a peer the same way (``policy.observation.joint_state``): a vector
that is not 14 numbers is refused with an ObservationError naming ``joint_action.vector`` before anything is
sent, never a bare ``ValueError`` from NumPy, and a good one reaches each protocol's request unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.observation import ObservationError
from robofollow_ros.policy.wire.act.presets import DEFAULT_PRESET, PRESETS, to_request
from robofollow_ros.policy.wire.gr00t.observation import key_map, to_gr00t_observation
from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation
from robofollow_ros.policy.wire.openpi.roboarena import roboarena_request
from robofollow_ros.policy.wire.vlaeval.observation import to_vlaeval_observation
from robofollow_ros.policy.wire.xpolicylab.observation import DEFAULT_CAMERAS, to_xpolicylab_observation

MISSING = object()  # an observation without joint_action.vector
REQUESTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "openpi": lambda obs: to_openpi_observation(obs, "pick it"),
    "roboarena": lambda obs: roboarena_request(obs, "pick it", {"cameras": ("cam_high",), "image_size": None},
                                               None),
    "act": lambda obs: to_request(PRESETS[DEFAULT_PRESET], obs, "pick it"),
    "gr00t": lambda obs: to_gr00t_observation(obs, "pick it", key_map()),
    "vla-eval": lambda obs: to_vlaeval_observation(obs, "pick it"),
    "xpolicylab": lambda obs: to_xpolicylab_observation(obs, "pick it", DEFAULT_CAMERAS),
}


def _with_vector(vector: Any) -> dict[str, Any]:
    obs = make_observation(seed=1, width=64, height=48)
    obs["joint_action"] = {} if vector is MISSING else {"vector": vector}
    return obs


@pytest.mark.parametrize("protocol", REQUESTS)
@pytest.mark.parametrize(("vector", "message"), [
    (["a"] * 14, "joint_action.vector is missing or not numeric"),
    (np.zeros(13), "joint_action.vector: 13 values; expected 14"),
    (MISSING, "joint_action.vector is missing or not numeric"),
])
def test_a_bad_joint_vector_is_refused_naming_the_field(protocol: str, vector: Any, message: str) -> None:
    with pytest.raises(ObservationError, match=message):
        REQUESTS[protocol](_with_vector(vector))


def _numbers(value: Any) -> list[float]:
    """Every number in a request, in order (the joints sit in different places in each protocol)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return [float(x) for x in value.reshape(-1)]
    return []


@pytest.mark.parametrize("protocol", REQUESTS)
def test_a_good_joint_vector_reaches_the_request(protocol: str) -> None:
    joints = np.linspace(-0.5, 0.8, 14)
    joints[[6, 13]] = [0.25, 0.75]  # grippers: some protocols rescale them, so only the arm joints are compared
    sent = np.asarray(_numbers(REQUESTS[protocol](_with_vector(list(joints)))), dtype=np.float32)
    arm = np.concatenate([joints[:6], joints[7:13]]).astype(np.float32)
    assert any(np.array_equal(sent[i:i + 6], arm[:6]) for i in range(len(sent) - 5)), protocol
    assert any(np.array_equal(sent[i:i + 6], arm[6:]) for i in range(len(sent) - 5)), protocol
