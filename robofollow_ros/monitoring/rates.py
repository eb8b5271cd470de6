"""At which rate a recording samples its trial, and how the bag says so (its rosbag2 ``custom_data``).

- **policy** (``robofollow eval --record``): the cameras when the policy receives them (once per policy
  call), the joint states after every executed row, the policy's rows on ``/robofollow/joint_command``.
  What the policy saw and did, cheap to record; not a dataset (frames between two policy calls would all
  show the same pictures, and the actions would be far waypoints): ``export-lerobot`` refuses it.
- **control** at N Hz (``robofollow eval --record --record-rate N``): every 1/N s of robot time from the
  trial's start, the joint states, the set-point the simulator's stepper drove the arms to, and the three
  cameras rendered at that state, all with the same stamp: what ``robofollow collect`` keeps for a frame.
  N divides the simulator's 250 Hz physics rate, so samples fall on physics steps.

Bags recorded elsewhere (the graph's ``foxglove_node``, ``ros2 bag record`` on the rig) say nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

POLICY: Final = "policy"
CONTROL: Final = "control"
#: The control rates a recording can sample at (Hz): divisors of the 250 Hz physics, as ``collect --fps``.
CONTROL_HZ: Final = (5, 10, 25, 50)
#: ``--record-rate control``: export-lerobot's default ``--fps``.
DEFAULT_CONTROL_HZ: Final = 10
#: The bag's ``custom_data`` keys (``ros2 bag info`` lists them): ``policy`` or ``control``, and the Hz of a
#: control-rate recording.
RATE_KEY: Final = "robofollow.record_rate"
HZ_KEY: Final = "robofollow.record_hz"


def parse_record_rate(text: str) -> int | None:
    """``--record-rate``: ``policy`` → None, ``control`` → 10 Hz, or N (Hz) out of ``CONTROL_HZ``."""
    value = str(text).strip().lower()
    if value == POLICY:
        return None
    if value == CONTROL:
        return DEFAULT_CONTROL_HZ
    if value.isdigit() and int(value) in CONTROL_HZ:
        return int(value)
    raise ValueError(f"--record-rate: {text!r} is not policy, control or one of {', '.join(map(str, CONTROL_HZ))} "
                     f"(Hz)")


def control_hz_for(fps: int) -> int:
    """The lowest control rate that a dataset at ``fps`` can be exported from (the highest one past 50)."""
    return min((hz for hz in CONTROL_HZ if hz >= fps), default=CONTROL_HZ[-1])


def custom_data(hz: int | None) -> dict[str, str]:
    """What a recording sampled at ``hz`` (None: the policy rate) says in its bag's ``custom_data``."""
    return {RATE_KEY: POLICY} if hz is None else {RATE_KEY: CONTROL, HZ_KEY: str(int(hz))}


def recorded_rate(custom: Mapping[str, str] | None) -> tuple[str | None, int | None]:
    """(``policy`` / ``control`` / None when the bag does not say, control Hz or None) from ``custom_data``."""
    custom = custom or {}
    rate = custom.get(RATE_KEY)
    hz = custom.get(HZ_KEY)
    return (str(rate) if rate is not None else None,
            int(hz) if rate == CONTROL and hz is not None and str(hz).isdigit() else None)
