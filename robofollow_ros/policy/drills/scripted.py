"""Scripted drills: each policy does one known thing (records its calls, fails in a chosen way, kills
its process, waits at a gate), plus :func:`make_observation`, the synthetic observation they are fed.

They exist so that a user (and the test suite) can check a whole serving stack end to end, e.g.
``robofollow serve --policy robofollow_ros.policy.drills.scripted:faulty --kwargs '{"mode": "nan"}'``
must give the evaluator a clean error, never a crash.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, CAMERA_OBS_KEYS, GRIPPER_INDEX
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.interface import Observation, PolicyError, declares_privileged


def make_observation(seed: int = 0, width: int = 320, height: int = 240, instruction: str = "") -> Observation:
    """A RoboFollow observation with random images and joints, as the simulator would send it."""
    rng = np.random.default_rng(seed)
    cameras = {key: {"rgb": rng.integers(0, 256, (height, width, 3), dtype=np.uint8)}
               for key in CAMERA_OBS_KEYS.values()}
    vector = rng.uniform(-1.0, 1.0, ACTION_DIM)
    vector[[GRIPPER_INDEX["left"], GRIPPER_INDEX["right"]]] = 1.0
    return {"observation": cameras, "joint_action": {"vector": vector}, "instruction": instruction}


FAULT_MODES = ("raise", "hang", "nan", "inf", "wrong_shape", "empty", "not_array")


class RecordingPolicy:
    """Remembers every call in order; ``predict`` returns ``chunk_size`` rows equal to the number
    of predict calls since the last reset, so a caller can tell chunks and episodes apart."""

    def __init__(self, chunk_size: int = 3, close_marker: str | None = None) -> None:
        self.chunk_size = chunk_size
        self.close_marker = close_marker
        self.calls: list[tuple[str, Any]] = []
        self.predicts_since_reset = 0
        self.closed = False

    def reset(self) -> None:
        self.calls.append(("reset", None))
        self.predicts_since_reset = 0

    def set_instruction(self, text: str) -> None:
        self.calls.append(("set_instruction", text))

    def predict(self, obs: Observation) -> np.ndarray:
        self.calls.append(("predict", obs))
        self.predicts_since_reset += 1
        return np.full((self.chunk_size, ACTION_DIM), float(self.predicts_since_reset), dtype=np.float32)

    def close(self) -> None:
        self.closed = True
        if self.close_marker:
            Path(self.close_marker).write_text("closed\n")


class FaultyPolicy:
    """``predict`` fails in one chosen way (``mode``); ``reset`` and ``set_instruction`` work.

    ``hang`` waits on :attr:`release` for at most ``hang_s`` seconds, so even a drill is bounded.
    """

    def __init__(self, mode: str = "raise", hang_s: float = 600.0) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"mode: {mode!r} is not one of {FAULT_MODES}")
        self.mode = mode
        self.hang_s = hang_s
        self.release = threading.Event()

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: Observation) -> Any:
        rows = np.zeros((4, ACTION_DIM), dtype=np.float32)
        if self.mode == "raise":
            raise PolicyError("drill: the model failed on purpose")
        if self.mode == "hang":
            self.release.wait(self.hang_s)
            return rows
        if self.mode in ("nan", "inf"):
            rows[2, 5] = np.nan if self.mode == "nan" else np.inf
            return rows
        if self.mode == "wrong_shape":
            return np.zeros((4, 7), dtype=np.float32)
        if self.mode == "empty":
            return np.zeros((0, ACTION_DIM), dtype=np.float32)
        return {"actions": "not an array"}


def recording(**kwargs: Any) -> RecordingPolicy:
    """Factory for ``module:function`` specs."""
    return RecordingPolicy(**kwargs)


def faulty(**kwargs: Any) -> FaultyPolicy:
    """Factory for ``module:function`` specs."""
    return FaultyPolicy(**kwargs)


DEATH_MODES = ("abort", "exit", "os_exit", "sigkill", "oom", "sleep", "freeze")


class DyingPolicy(HoldPolicy):
    """Holds still, except on ``task`` (every task when None) where ``predict`` ends badly:

    ``abort`` (SIGABRT), ``exit`` (``sys.exit(3)`` inside the policy), ``os_exit`` (the process exits
    with status 3), ``sigkill`` (the process kills itself), ``oom`` (moves itself into the memory
    cgroup ``cgroup`` when given, then allocates until the kernel's OOM killer ends it), ``sleep``
    (sleeps ``sleep_s``, past any sane policy timeout). With ``once_marker`` it misbehaves only while
    that file does not exist (it creates it first), so the worker that replaces it runs normally.
    """

    def __init__(self, mode: str = "abort", task: str | None = None, once_marker: str | None = None,
                 cgroup: str | None = None, sleep_s: float = 3600.0) -> None:
        if mode not in DEATH_MODES:
            raise ValueError(f"mode: {mode!r} is not one of {DEATH_MODES}")
        if mode == "oom" and not cgroup:  # never eat a shared machine's memory: only a bounded cgroup's
            raise ValueError("cgroup: mode 'oom' needs a memory cgroup directory with a limit")
        super().__init__()
        self.mode, self.task, self.once_marker, self.cgroup, self.sleep_s = mode, task, once_marker, cgroup, sleep_s
        #: It tells its task by ``privileged.task_id``: declared only when it has a task to tell.
        self.needs_privileged = task is not None

    def predict(self, obs: Observation) -> np.ndarray:
        task_id = (obs.get("privileged") or {}).get("task_id")
        if (self.task is None or task_id == self.task) and self._armed():
            self._misbehave()
        return super().predict(obs)

    def _armed(self) -> bool:
        if self.once_marker is None:
            return True
        try:
            fd = os.open(self.once_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.close(fd)
        return True

    def _misbehave(self) -> None:
        if self.mode == "abort":
            os.abort()
        if self.mode == "exit":
            sys.exit(3)
        if self.mode == "os_exit":
            os._exit(3)
        if self.mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.mode == "freeze":
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.mode == "sleep":
            time.sleep(self.sleep_s)
            return
        if self.cgroup:
            Path(self.cgroup, "cgroup.procs").write_text(f"{os.getpid()}\n")
        hog = []
        while True:  # touch every page, so the memory is really used
            hog.append(np.ones(16 * 1024 * 1024, dtype=np.uint8))


def dying(**kwargs: Any) -> DyingPolicy:
    """Factory for ``module:function`` specs."""
    return DyingPolicy(**kwargs)


class GatedPolicy:
    """Another policy (``inner`` SPEC) that waits at every ``predict`` until ``<gate>/open`` exists, leaving
    ``<gate>/<pid>.waiting`` meanwhile: a test (or an operator) can hold workers mid-trial, e.g. to take a
    cluster node away while it is running one, then let everything go on exactly as ``inner`` would.
    ``per_host``: ``<gate>/<hostname>.<pid>.waiting`` instead, for workers on several machines that share
    the gate's directory (PIDs repeat across machines, and across the test bed's PID namespaces)."""

    def __init__(self, gate: str, inner: str = "hold", timeout_s: float = 600.0, per_host: bool = False) -> None:
        from robofollow_ros.policy.spec import load_policy

        self.gate, self.timeout_s = Path(gate), timeout_s
        self.marker = f"{socket.gethostname()}.{os.getpid()}" if per_host else str(os.getpid())
        self.inner = load_policy(inner, validate=False)

    @property
    def needs_privileged(self) -> bool:
        """What ``inner`` declares (an ``oracle`` behind the gate still gets its privileged state)."""
        return declares_privileged(self.inner)

    def reset(self) -> None:
        self.inner.reset()

    def set_instruction(self, text: str) -> None:
        self.inner.set_instruction(text)

    def predict(self, obs: Observation) -> Any:
        opened = self.gate / "open"
        if not opened.exists():
            (self.gate / f"{self.marker}.waiting").touch()
            deadline = time.monotonic() + self.timeout_s
            while not opened.exists():
                if time.monotonic() > deadline:
                    raise PolicyError(f"gate: {opened} did not appear within {self.timeout_s:g} s")
                time.sleep(0.02)
        return self.inner.predict(obs)


def gated(**kwargs: Any) -> GatedPolicy:
    """Factory for ``module:function`` specs."""
    return GatedPolicy(**kwargs)
