"""When a peer's client starts an episode, on protocols that have no message saying so (issue 36).

openpi's clients keep one ``WebsocketClientPolicy`` for every episode and send only observations;
openvla-oft's ``run_aloha_eval`` posts observations to ``/act`` with no session and no reset. So a
served policy must tell a new episode from what arrives. The signals, per connection (openpi) or per
session (act):

- the first request of a connection or session (a new ``WebsocketClientPolicy``; a new
  ``X-Session-ID``; after ``POST /reset``);
- a new instruction (``prompt`` / ``instruction``);
- with ``auto`` (the default), **the joints back at the start pose**: the request's 14 joints equal,
  within :data:`START_POSE_TOL` rad, those of the episode's first request, while the previous
  request's did not. The simulator (and an operator's reset) puts the arms back at the same home pose
  before every trial, so round 2 of the same task starts over where before it continued round 1. A
  policy that brings every joint back to exactly where it started, in the middle of an episode, would
  restart there: serve it with ``--episode-per signals``.

``--episode-per`` (``robofollow serve``, openpi and act only): ``auto`` (the signals and the start-pose
rule) or ``signals`` (the connection, session, instruction and ``/reset`` only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: ``--episode-per`` values.
EPISODE_RULES = ("auto", "signals")
#: Largest difference (rad, and gripper units) on any joint that still counts as "at the start pose":
#: the simulator resets to the same home pose exactly; float32 on the wire keeps ~1e-7 of it.
START_POSE_TOL = 1e-4


def check_episode_rule(value: str) -> str:
    if value not in EPISODE_RULES:
        raise ValueError(f"episode_per: {value!r} is not one of {', '.join(EPISODE_RULES)}")
    return value


class EpisodeStarts:
    """One connection's (or session's) episode tracker: :meth:`starts` says whether a request begins an
    episode, and remembers what it needs for the next one."""

    def __init__(self, rule: str = "auto") -> None:
        self.rule = check_episode_rule(rule)
        self.instruction: str | None = None
        self._start: np.ndarray | None = None  # the episode's first joints
        self._away = False  # a request of this episode had left the start pose
        self.episodes = 0

    def starts(self, instruction: str | None, obs: Any) -> bool:
        """True when the request with ``instruction`` and observation ``obs`` (the contract's) starts an episode."""
        joints = _joints(obs)
        new = self.episodes == 0 or instruction != self.instruction
        if not new and self.rule == "auto" and joints is not None and self._start is not None:
            at_start = bool(np.max(np.abs(joints - self._start)) <= START_POSE_TOL)
            new = at_start and self._away
            self._away = self._away or not at_start
        if new:
            self.instruction = instruction
            self._start = joints
            self._away = False
            self.episodes += 1
        return new


def _joints(obs: Any) -> np.ndarray | None:
    try:
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        return None
    return vector.copy() if vector.shape == (14,) else None
