"""``hold``: the smoke-test policy that asks every joint to stay where it is (spec section e)."""

from __future__ import annotations

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.interface import Observation, PolicyError


class HoldPolicy:
    """Returns ``chunk_size`` copies of the current ``joint_action.vector``.

    Useful to test plumbing (transport, timing, recording) without a model: the robot must not move.
    Stateless, so a server may share one object among all its connections.
    """

    shareable = True

    def __init__(self, chunk_size: int = 5) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size: expected an integer >= 1, got {chunk_size!r}")
        self.chunk_size = chunk_size

    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def set_instruction(self, text: str) -> None:
        """Hold ignores language by design."""

    def predict(self, obs: Observation) -> np.ndarray:
        try:
            vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).reshape(-1)
        except (KeyError, TypeError) as exc:
            raise PolicyError("observation: joint_action.vector is missing; hold needs the current joints") from exc
        if vector.shape != (ACTION_DIM,):
            raise PolicyError(f"observation: joint_action.vector has {vector.size} values; expected {ACTION_DIM}")
        return np.tile(vector, (self.chunk_size, 1))
