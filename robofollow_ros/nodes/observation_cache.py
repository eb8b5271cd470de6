"""The policy node's view of the robot: the latest joint state, objects and images, with waits.

Subscription callbacks write here; the trial thread reads here and blocks on conditions ("a state
newer than S arrived") with a timeout, instead of sleeping. In lock-step the joint state and the
object poses of one sim stamp belong together, so a state is only "complete" when both carry it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RobotState:
    stamp_ns: int
    vector: np.ndarray
    received: float  # time.monotonic() of arrival
    objects: dict[str, list[float]] = field(default_factory=dict)
    object_quats: dict[str, list[float]] = field(default_factory=dict)


class ObservationCache:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._joints: tuple[int, np.ndarray, float] | None = None
        self._objects: dict[int, tuple[dict[str, list[float]], dict[str, list[float]]]] = {}
        self._latest_objects: tuple[int, dict[str, list[float]], dict[str, list[float]]] | None = None
        self._images: dict[str, np.ndarray] = {}
        self._image_stamps: dict[str, int] = {}

    def put_joints(self, stamp_ns: int, vector: np.ndarray) -> None:
        with self._changed:
            self._joints = (stamp_ns, vector, time.monotonic())
            self._changed.notify_all()

    def put_objects(self, stamp_ns: int, positions: dict[str, list[float]], quats: dict[str, list[float]]) -> None:
        with self._changed:
            self._objects[stamp_ns] = (positions, quats)
            while len(self._objects) > 64:  # only the last few stamps can still be waited for
                del self._objects[min(self._objects)]
            self._latest_objects = (stamp_ns, positions, quats)
            self._changed.notify_all()

    def put_image(self, camera: str, stamp_ns: int, rgb: np.ndarray) -> None:
        with self._changed:
            self._images[camera] = rgb
            self._image_stamps[camera] = stamp_ns
            self._changed.notify_all()

    def wait_images(self, stamp_ns: int, cameras: tuple[str, ...], timeout: float,
                    cancelled: threading.Event) -> bool:
        """Block until every camera's latest picture carries ``stamp_ns``; False on timeout/cancel."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not cancelled.is_set():
                if all(self._image_stamps.get(c) == stamp_ns for c in cameras):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.1))
        return False

    def images(self, since_ns: int) -> dict[str, np.ndarray]:
        """The latest picture of each camera taken at or after ``since_ns`` (older ones are another trial's)."""
        with self._changed:
            return {c: img for c, img in self._images.items() if self._image_stamps[c] >= since_ns}

    def latest(self, with_objects: bool) -> RobotState | None:
        """The newest joint state with the newest objects (rig: perception runs at its own rate)."""
        with self._changed:
            if self._joints is None:
                return None
            stamp, vector, received = self._joints
            if with_objects and self._latest_objects is not None:
                return RobotState(stamp, vector, received, self._latest_objects[1], self._latest_objects[2])
            return RobotState(stamp, vector, received)

    def wait_state(self, min_stamp_ns: int, with_objects: bool, timeout: float,
                   cancelled: threading.Event) -> RobotState | None:
        """Block until a joint state stamped ≥ ``min_stamp_ns`` (and, if asked, the objects of that very
        stamp) is here; None on timeout or cancellation."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not cancelled.is_set():
                if self._joints is not None and self._joints[0] >= min_stamp_ns:
                    stamp, vector, received = self._joints
                    if not with_objects:
                        return RobotState(stamp, vector, received)
                    if stamp in self._objects:
                        positions, quats = self._objects[stamp]
                        return RobotState(stamp, vector, received, positions, quats)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(min(remaining, 0.1))
        return None

    def wait_any_objects(self, timeout: float, cancelled: threading.Event, since_ns: int = 0) -> bool:
        """Rig: block until perception has published objects stamped at or after ``since_ns``."""
        deadline = time.monotonic() + timeout

        def seen() -> bool:
            return self._latest_objects is not None and self._latest_objects[0] >= since_ns

        with self._changed:
            while not seen() and not cancelled.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.1))
            return seen()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()
