"""Echo drills for serving many clients: the chunk says which instruction and step produced it.

``echo`` is stateful like a real policy (instruction from ``set_instruction``, a step counter that
``reset`` clears), so a server that mixed two connections' sessions gives itself away in the
numbers. ``shared_echo`` declares itself shareable (reads ``obs["instruction"]``, keeps no state)
and offers ``predict_batch``, for dynamic batching. Row layout of both: column 0 the instruction's
code (:func:`instruction_code`), column 1 the step since reset (echo) or 0, columns 2-13 the first
twelve joint values of the observation.
"""

from __future__ import annotations

import threading
import time
import zlib
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.interface import Observation


def instruction_code(text: str) -> float:
    """A small integer (exact in float32) that differs between typical instructions."""
    return float(zlib.crc32(text.encode("utf-8")) % 100_000)


def _rows(code: float, step: int, obs: Observation, chunk_size: int) -> np.ndarray:
    vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).reshape(-1)
    row = np.concatenate([[code, float(step)], vector[:ACTION_DIM - 2]]).astype(np.float32)
    return np.tile(row, (chunk_size, 1))


class EchoPolicy:
    """Stateful echo; ``delay_s`` makes each predict take that long (to overlap concurrent clients)."""

    def __init__(self, chunk_size: int = 2, delay_s: float = 0.0) -> None:
        self.chunk_size = chunk_size
        self.delay_s = delay_s
        self.instruction = ""
        self.step = 0

    def reset(self) -> None:
        self.instruction, self.step = "", 0

    def set_instruction(self, text: str) -> None:
        self.instruction = text

    def predict(self, obs: Observation) -> np.ndarray:
        if self.delay_s:
            time.sleep(self.delay_s)
        self.step += 1
        return _rows(instruction_code(self.instruction), self.step, obs, self.chunk_size)


class SharedEchoPolicy:
    """Shareable, batch-capable echo; records the size of every batch it was given."""

    shareable = True

    def __init__(self, chunk_size: int = 2, delay_s: float = 0.0) -> None:
        self.chunk_size = chunk_size
        self.delay_s = delay_s
        self.batch_sizes: list[int] = []
        self.single_calls = 0
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Never called by a server: a shareable policy has no episode state."""

    def set_instruction(self, text: str) -> None:
        """Never called by a server: the instruction arrives in ``obs["instruction"]``."""

    def predict(self, obs: Observation) -> np.ndarray:
        with self._lock:
            self.single_calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        return _rows(instruction_code(obs.get("instruction") or ""), 0, obs, self.chunk_size)

    def predict_batch(self, observations: list[Observation]) -> np.ndarray:
        with self._lock:
            self.batch_sizes.append(len(observations))
        if self.delay_s:
            time.sleep(self.delay_s)  # one model call for the whole batch
        return np.stack([_rows(instruction_code(o.get("instruction") or ""), 0, o, self.chunk_size)
                         for o in observations])


def echo(**kwargs: Any) -> EchoPolicy:
    """Factory for ``robofollow_ros.policy.drills.echo:echo``."""
    return EchoPolicy(**kwargs)


def shared_echo(**kwargs: Any) -> SharedEchoPolicy:
    """Factory for ``robofollow_ros.policy.drills.echo:shared_echo``."""
    return SharedEchoPolicy(**kwargs)
