"""How the nodes hand one trial to each other: the trial JSON, the status topics and their QoS.

The handshake keeps the ROS trial step-for-step equal to the headless episode
(``evaluation/episode.py``):

1. trial_manager publishes ``/robofollow/trial`` phase ``resetting`` (task, seed, budget).
2. sim_node rebuilds the world, publishes the state at sim time S0 (joint states, TF, objects,
   cameras) and then ``/robofollow/sim/status`` ``{"trial_id", "state": "ready", "stamp_ns": S0,
   "renderer_startup_s"}``.
   On the rig, the operator sets the layout up and confirms instead (phase ``awaiting_confirm``).
3. trial_manager publishes phase ``starting`` with ``start_stamp_ns`` = S0; stage_monitor_node scores
   frame 0 (the joints *and* the objects stamped S0) and publishes its live score (``frames`` 1).
   That score is the scorer's acknowledgement: only then does trial_manager publish phase
   ``running`` (same ``start_stamp_ns``), so no row can execute before the scorer holds the start.
   A subscription matched only after S0 was published (discovery is slow under load, and a node
   being seen on ``/robofollow/trial`` says nothing about its other endpoints) gets the start state
   again: sim_node republishes it when a reader of its state matches before the first row, and
   arm_bridge_node republishes its last ``/joint_states`` to a reader that matches late.
   (On the rig, or without a stage monitor, ``running`` follows at once.)
4. policy_node: ``reset`` → ``set_instruction`` → up to ``max_steps`` × (observation at the latest
   state → ``predict`` → first ``actions_per_step`` rows). In lock-step (sim) it sends a row only
   after the state that follows the previous row arrived; sim_node executes each command as one row
   and publishes the state with a new, strictly later stamp. Then it publishes
   ``/robofollow/policy/status`` ``{"trial_id", "state": "done", "steps", "rows", "last_stamp_ns",
   "error"}``.
5. trial_manager publishes phase ``scoring`` with ``end_stamp_ns``; stage_monitor_node scores one
   frame per state stamp in [S0, end] and publishes the final ``/robofollow/score`` (``"final": true``,
   with the full results entry under ``"result"``); trial_manager records it (phase ``done``).
"""

from __future__ import annotations

import json
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from robofollow_ros.contract import TOPIC_CLOCK as TOPIC_CLOCK  # re-exported beside the protocol's topics

TOPIC_SIM_STATUS = "/robofollow/sim/status"
TOPIC_POLICY_STATUS = "/robofollow/policy/status"
SERVICE_CONFIRM_RESET = "/robofollow/trial/confirm_reset"
#: Start the trial although the table does not match the layout (recorded in its results entry).
SERVICE_OVERRIDE_RESET = "/robofollow/trial/override_reset"
#: The operator's controls (``trial_services``): hold the trial in place and go on; fail it and go on; run it again.
SERVICE_PAUSE = "/robofollow/trial/pause"
SERVICE_RESUME = "/robofollow/trial/resume"
SERVICE_ABORT = "/robofollow/trial/abort"
SERVICE_REDO = "/robofollow/trial/redo"
#: The operator's mark (``std_msgs/String`` JSON ``{"verdict", "progress", "note"}``, ``evaluation.operator_marks``).
TOPIC_MARK = "/robofollow/trial/mark"
#: Run a recorded trial again (``std_msgs/String``: its trial id; empty: the last recorded), ``trial_redo``.
TOPIC_REDO_TRIAL = "/robofollow/trial/redo_trial"
#: sim_node renders and publishes the cameras at the current state (policy_node, before ``predict``).
SERVICE_SIM_RENDER = "/robofollow/sim/render"
#: policy_node connects to its policy and resets it once (trial_manager_node, before the first trial).
SERVICE_POLICY_CHECK = "/robofollow/policy/check"

PHASE_IDLE = "idle"
PHASE_RESETTING = "resetting"
PHASE_AWAITING_CONFIRM = "awaiting_confirm"
#: The table is compared with the layout (``rig.reset_check``) until it matches or the operator overrides.
PHASE_VERIFYING_RESET = "verifying_reset"
#: The health checks before the trial (``rig.health``).
PHASE_CHECKING = "checking"
PHASE_STARTING = "starting"
PHASE_RUNNING = "running"
PHASE_STOPPING = "stopping"
PHASE_SCORING = "scoring"
PHASE_DONE = "done"
PHASE_FINISHED = "finished"
PHASES = (PHASE_IDLE, PHASE_RESETTING, PHASE_AWAITING_CONFIRM, PHASE_VERIFYING_RESET, PHASE_CHECKING, PHASE_STARTING,
          PHASE_RUNNING, PHASE_STOPPING,
          PHASE_SCORING, PHASE_DONE, PHASE_FINISHED)
#: Phases in which the trial's rows may move the arm: an e-stop here ends the trial as a fault.
EXECUTING = (PHASE_STARTING, PHASE_RUNNING, PHASE_STOPPING)
#: Phases before any row: a fault here ends the trial at once (nothing to stop or score).
BEFORE_ROWS = (PHASE_RESETTING, PHASE_AWAITING_CONFIRM, PHASE_VERIFYING_RESET, PHASE_CHECKING, PHASE_STARTING)
#: Phases of a trial whose rows have not begun: a redo of a recorded trial runs at once, this one after it.
NOT_STARTED = (PHASE_RESETTING, PHASE_AWAITING_CONFIRM, PHASE_VERIFYING_RESET, PHASE_CHECKING)

#: Latched state (trial, score, statuses, instruction), as its publishers offer it: a reader that matches
#: late gets the writer's history, so depth 1 gives it the current state alone (``ros2 topic echo --once
#: /robofollow/trial`` prints the running phase, not ``idle``), the ROS convention for latched topics.
#: A tool that needs a trial's history reads it from a topic of its own (``FRAME_STREAM``, the result).
LATCHED_STATE = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
#: How the nodes read latched state: transient local (compatible with ``LATCHED_STATE``), and a queue of
#: 10 so that a quick ``running`` → ``scoring`` waiting in the reader's own queue does not lose ``running``
#: to a busy executor (a late match still gets one message: the writer keeps one).
LATCHED = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     history=HistoryPolicy.KEEP_LAST)
#: Per-row state in lock-step: every sample must reach the scorer, so reliable and deep.
STATE_STREAM = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)

#: A measured state that only its newest sample matters for: the arm bridge's reading of the drivers, the
#: position its step clamp is taken around. Depth 1: a reader that falls behind (a loaded machine) takes the
#: newest state, never a backlog (with ``STATE_STREAM`` the bridge of a loaded mock graph clamped against
#: states 2.9 s old, p50). Best effort, as ROS's sensor-data profile (it matches a reliable driver): a
#: reliable depth-1 reader stalled for over a second in 2 of 7 ``bringup mock`` runs, best effort in 0 of 6
#: (issue 30). Not for lock-step, where each state answers one command (arm_bridge_node's ``driver_states``).
LATEST_STATE = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)

#: Scored frames: a recorder that matched late (its own process, slow discovery) still gets the whole
#: trial from the writer's history, so every recording replays exactly (a trial has at most 501 frames).
FRAME_STREAM = QoSProfile(depth=1024, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


def encode(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, allow_nan=False)


def decode_or_log(text: str, what: str, logger: Any) -> dict[str, Any] | None:
    """:func:`decode`, or None after logging the one-line reason (another publisher's garbage must not
    stop a node)."""
    try:
        return decode(text, what)
    except ValueError as exc:
        logger.error(str(exc), throttle_duration_sec=5.0)
        return None


def decode(text: str, what: str) -> dict[str, Any]:
    """A JSON object from a String message; anything else is a clear error naming the topic."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(payload).__name__}")
    return payload
