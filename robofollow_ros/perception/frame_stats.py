"""What perception kept up with: camera rate, frames processed and dropped, depth age — never silent.

A camera at 30 Hz and a perception step slower than 33 ms cannot both be served: frames are lost
somewhere (the sensor-data queue keeps the newest few, a picture waiting for its depth partner is
trimmed). ``FrameStats`` counts what it can see of that and says so on the status topic:

- ``camera_hz``: the camera's rate: the nominal one when the node is told it (``nominal_hz``, the rig's 30 Hz),
  else learned from the pictures' stamps (exponential average of their regular intervals; an interval shorter
  than ``1 / GAP_FACTOR`` of the rate learned means the rate was learned from gaps, and it starts again from
  there). Without a nominal rate a consumer that from its first picture on only ever sees every k-th one
  (one picture queued, each step slower than k − 1 intervals) learns k × the interval and counts no drops:
  the rig gives the nominal rate;
- ``processed_hz``: pictures perception finished per second of picture time;
- ``dropped``: pictures that never reached perception, by cause — ``gap`` (the stamps jump by more
  than ``GAP_FACTOR`` nominal intervals: the queue or the camera lost the ones between), ``unpaired``
  (a picture or depth map trimmed while waiting for its partner);
- ``depth_age_s``: how much older the newest depth is than the picture processed (colour only when
  it exceeds the node's 1 s limit).
"""

from __future__ import annotations

from typing import Any

#: A stamp interval longer than this many nominal intervals means frames in between were lost.
GAP_FACTOR = 1.5
#: Weight of a new interval in the rate's exponential average.
RATE_WEIGHT = 0.1


class FrameStats:
    """Counters of one camera stream's pictures (stamps in ns)."""

    def __init__(self, nominal_hz: float | None = None) -> None:
        if nominal_hz is not None and not nominal_hz > 0:
            raise ValueError(f"nominal_hz: expected a rate > 0 (or None: learn it), got {nominal_hz}")
        self.nominal_hz = nominal_hz
        self.received = 0
        self.processed = 0
        self.dropped: dict[str, int] = {"gap": 0, "unpaired": 0}
        self._last_stamp: int | None = None
        self._interval_s: float | None = None if nominal_hz is None else 1.0 / nominal_hz
        self._first_processed: int | None = None
        self._last_processed: int | None = None
        self.depth_age_s: float | None = None

    def on_picture(self, stamp_ns: int) -> None:
        """A picture arrived (before any pairing or processing)."""
        self.received += 1
        if self._last_stamp is not None and stamp_ns > self._last_stamp:
            dt = (stamp_ns - self._last_stamp) / 1e9
            if self._interval_s is not None and dt > GAP_FACTOR * self._interval_s:
                self.dropped["gap"] += max(0, round(dt / self._interval_s) - 1)
            elif self.nominal_hz is not None:
                pass  # the camera's rate is known
            elif self._interval_s is not None and dt * GAP_FACTOR < self._interval_s:
                self._interval_s = dt  # the rate so far was learned from gaps: a camera is never faster than it is
            else:  # only regular intervals teach the rate (a gap is a loss, not a slower camera)
                self._interval_s = dt if self._interval_s is None else (
                    (1 - RATE_WEIGHT) * self._interval_s + RATE_WEIGHT * dt)
        self._last_stamp = stamp_ns if self._last_stamp is None else max(self._last_stamp, stamp_ns)

    def on_unpaired(self, count: int = 1) -> None:
        """Pictures or depth maps trimmed while waiting for their partner."""
        self.dropped["unpaired"] += count

    def on_processed(self, stamp_ns: int, depth_stamp_ns: int | None) -> None:
        """Perception finished the picture of ``stamp_ns``; ``depth_stamp_ns``: the newest depth's (None: none)."""
        self.processed += 1
        self._first_processed = stamp_ns if self._first_processed is None else self._first_processed
        self._last_processed = stamp_ns
        self.depth_age_s = None if depth_stamp_ns is None else max(0.0, (stamp_ns - depth_stamp_ns) / 1e9)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def as_dict(self) -> dict[str, Any]:
        span = None if self._first_processed is None or self._last_processed is None else (
            (self._last_processed - self._first_processed) / 1e9)
        return {
            "camera_hz": None if not self._interval_s else round(1.0 / self._interval_s, 2),
            "camera_hz_source": "nominal" if self.nominal_hz is not None else "stamps",
            "processed_hz": round((self.processed - 1) / span, 2) if span else None,
            "received": self.received, "processed": self.processed,
            "dropped": self.dropped_total, "dropped_by_cause": dict(self.dropped),
            "depth_age_s": None if self.depth_age_s is None else round(self.depth_age_s, 3),
        }
