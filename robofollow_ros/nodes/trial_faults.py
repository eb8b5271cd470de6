"""What ends a ROS trial other than its policy, and how long each phase of a trial may last (ROS-free).

The trial manager's rule (docs/ros.md "Faults"): a trial is the policy's result only when nothing
else ended it. A **fault** — an e-stop, an operator's stop, a node that died, a phase that overran its
bound, a graph error (the sim's reset failed, the scorer scored nothing) — marks the trial *not
executed*: its results.json entry has ``fault`` (the kind) and ``fault_reason`` (one line) instead of
``policy_error``, zero scores with the scorer's own verdict so far kept in ``partial_result`` (the
shape of a failed trial, so results.json stays RoboFollow-compatible), and the run exits
``EXIT_TRIALS_FAILED`` like a run with policy errors. A policy that fails (raises, overruns
``policy_timeout_s``, answers garbage) is still ``policy_error``, as in ``robofollow eval``.

The arm bridge's holds are counted per trial (``safety_holds``) but are not faults: the watchdog holds
whenever commands pause longer than its timeout, which in rate mode happens whenever a ``predict``
outlasts it (the arm waits while the model thinks) and after every trial's last row; workspace and
command holds are the policy's own doing. Only the e-stop is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robofollow_ros.rig.health import FAILURE_CLASSES, HALT, RECORD_AND_CONTINUE

#: The e-stop was engaged between the trial's reset and its last row (``/robofollow/estop`` true).
FAULT_ESTOP = "e-stop"
#: The operator ended the trial (``/robofollow/trial/stop`` or ``/next``).
FAULT_OPERATOR = "operator-stop"
#: The operator aborted the trial (``/robofollow/trial/abort``, key ``a``): it fails and the run goes on.
FAULT_ABORT = "operator-abort"
#: A node of the graph died (or froze) while the run was under way.
FAULT_NODE = "node-died"
#: A phase of the trial overran its bound (:class:`PhaseBounds`).
FAULT_TIMEOUT = "timeout"
#: The graph failed the trial: the sim's reset failed, the stage monitor scored no frame.
FAULT_GRAPH = "graph-error"
#: The table was not verified against the layout within ``reset_check_timeout_s`` (``rig.reset_check``).
FAULT_RESET = "reset-not-verified"
#: A health check failed before or after the trial (``rig.health``); its class says whether the run halts.
FAULT_HEALTH = "health"
#: Rate mode: the joint states went stale (older than policy_node's ``stale_s``), so policy_node held the
#: arms and ended the trial. The drivers or a loaded machine fell behind, not the policy: on mock hardware
#: this is what machine load did (issue 30), and it must not score the policy zero.
FAULT_STALE = "stale-state"
FAULTS = (FAULT_ESTOP, FAULT_OPERATOR, FAULT_ABORT, FAULT_NODE, FAULT_TIMEOUT, FAULT_GRAPH, FAULT_RESET, FAULT_HEALTH,
          FAULT_STALE)

#: Every fault's class in results.json (``failure_class``, beside ``fault``): ``halt`` — the run pauses (or
#: ends) and needs a person; ``record_and_continue`` — the trial fails with its reason and the run goes on.
#: A health fault carries its check's class (``rig.health``).
FAILURE_CLASS = {FAULT_ESTOP: HALT, FAULT_NODE: HALT, FAULT_OPERATOR: RECORD_AND_CONTINUE,
                 FAULT_ABORT: RECORD_AND_CONTINUE, FAULT_TIMEOUT: RECORD_AND_CONTINUE, FAULT_GRAPH: RECORD_AND_CONTINUE,
                 FAULT_RESET: RECORD_AND_CONTINUE, FAULT_HEALTH: HALT, FAULT_STALE: RECORD_AND_CONTINUE}

#: What a running trial may take beyond its policy calls (rows, observations), as ``robofollow eval``'s
#: trial deadline allows: policy timeout × (max steps + 2) + this.
RUNNING_ALLOWANCE_S = 900.0
#: What a stopped trial may take beyond the policy call in flight (which answers or times out after a
#: stop by the time budget): the state of the last row sent (lock-step ``state_timeout_s``: 60 s in sim).
STOPPING_ALLOWANCE_S = 60.0


@dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULTS
    reason: str  # one line
    failure_class: str = ""  # one of FAILURE_CLASSES; "" takes the kind's (FAILURE_CLASS)

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"fault kind: {self.kind!r} is not one of {', '.join(FAULTS)}")
        if not self.failure_class:
            object.__setattr__(self, "failure_class", FAILURE_CLASS[self.kind])
        if self.failure_class not in FAILURE_CLASSES:
            raise ValueError(f"failure class: {self.failure_class!r} is not one of {', '.join(FAILURE_CLASSES)}")


def fault_result(result: dict[str, Any], fault: Fault) -> dict[str, Any]:
    """The results entry of a trial a fault ended: not executed, so it scores zero and does not complete;
    what the scorer had scored so far is kept aside in ``partial_result``."""
    entry = dict(result)
    entry["partial_result"] = {k: result[k] for k in ("intent_score", "exec_score", "completion_ok") if k in result}
    entry.update(intent_score=0.0, exec_score=0.0, intent_ok=False, exec_ok=False, completion_ok=False,
                 fault=fault.kind, fault_reason=fault.reason, failure_class=fault.failure_class)
    entry["phases"] = [dict(p, intent_score=0.0, exec_score=0.0, intent_reason=f"not executed: {fault.kind}",
                            exec_reason=f"not executed: {fault.kind}") for p in result.get("phases", [])]
    return entry


def could_not_execute(entry: dict[str, Any]) -> str | None:
    """Why a recorded trial could not be executed (its policy failed, or a fault ended it); None if it ran."""
    if entry.get("fault"):
        return f"{entry['fault']}: {entry.get('fault_reason', '')}"
    if entry.get("policy_error"):
        return str(entry["policy_error"])
    return None


@dataclass(frozen=True)
class PhaseBounds:
    """The longest each phase of a trial may last (seconds; 0 where noted means no bound).

    ``resetting`` (sim: the sim's reset), ``awaiting_confirm`` (rig: the operator; 0 = wait for them),
    ``starting`` (the scorer's acknowledgement of frame 0), ``running`` (the policy node's ``done``; the
    trial's own time budget ``trial_timeout_s`` is not a bound but the protocol: it stops the trial and
    scores it), ``stopping`` (the policy node's ``done`` after a stop: after the time budget the call in
    flight may still answer or time out), ``scoring`` (the final score).
    """

    reset_s: float
    confirm_s: float
    start_s: float
    running_s: float
    stop_s: float
    score_s: float
    verify_s: float = 0.0  # ``verifying_reset`` (the table against the layout; 0: no bound)

    @classmethod
    def derive(cls, *, reset_s: float, confirm_s: float, score_s: float, running_s: float, stop_s: float,
               policy_timeout_s: float, max_steps: int, verify_s: float = 0.0) -> PhaseBounds:
        """``running_s`` 0 takes ``robofollow eval``'s trial deadline: every policy call may take its timeout;
        ``stop_s`` 0: the call in flight may take its timeout, then the last row its state."""
        running = running_s or policy_timeout_s * (max_steps + 2) + RUNNING_ALLOWANCE_S
        stopping = stop_s or policy_timeout_s + STOPPING_ALLOWANCE_S
        return cls(reset_s=reset_s, confirm_s=confirm_s, start_s=score_s, running_s=running, stop_s=stopping,
                   score_s=score_s, verify_s=verify_s)

    def overrun(self, phase: str, waited_s: float, rig_mode: bool) -> Fault | None:
        """The fault of a trial that has been in ``phase`` for ``waited_s``, once past its bound."""
        limits = {
            "resetting": (0.0 if rig_mode else self.reset_s, "the sim did not reset within {} s"),
            "awaiting_confirm": (self.confirm_s, "the layout was not confirmed within {} s"),
            "verifying_reset": (self.verify_s, "the table did not match the layout within {} s"),
            "starting": (self.start_s, "the stage monitor did not score the start state within {} s"),
            "running": (self.running_s, "policy_node did not end the trial within {} s"),
            "stopping": (self.stop_s, "policy_node did not end the trial within {} s of the stop"),
            "scoring": (self.score_s, "no final score within {} s"),
        }
        limit, words = limits.get(phase, (0.0, ""))
        if not limit or waited_s <= limit:
            return None
        return Fault(FAULT_RESET if phase == "verifying_reset" else FAULT_TIMEOUT,
                     f"{phase}: {words.format(f'{limit:g}')}")


def hold_kind(reason: str) -> str:
    """The kind of one of the arm bridge's hold reasons (``rig/safety.py``'s words)."""
    text = reason.strip().lower()
    if text.startswith("e-stop"):
        return "e-stop"
    if text.startswith("watchdog"):
        return "watchdog"
    if "workspace" in text:
        return "workspace"
    if "limit" in text:
        return "limits"
    if text.startswith("command"):
        return "command"
    return "other"


class SafetyWatch:
    """The arm bridge's e-stop and holds, as the trial manager needs them.

    The e-stop's state is the last message on the bridge's e-stop input (``/robofollow/estop``), the
    command it obeys; its status topic (JSON ``{"hold", "clamped", "reasons"}``) gives the holds, counted
    per kind while a trial is :meth:`watch`\\ ed.
    """

    def __init__(self) -> None:
        self.estop = False
        self._watching = False
        self._holds: dict[str, int] = {}

    def on_estop(self, engaged: bool) -> bool:
        """The e-stop input changed to ``engaged``; True when that is news."""
        changed = engaged != self.estop
        self.estop = engaged
        return changed

    def on_bridge_status(self, status: dict[str, Any]) -> None:
        if not self._watching or status.get("hold") is not True:
            return
        reasons = status.get("reasons")
        kinds = {hold_kind(str(r)) for r in reasons} if isinstance(reasons, list) and reasons else {"other"}
        for kind in kinds:
            self._holds[kind] = self._holds.get(kind, 0) + 1

    def watch(self, on: bool) -> None:
        """Count holds (a trial's execution began) or stop counting (its last row is done)."""
        self._watching = on

    def take_holds(self) -> dict[str, int]:
        """The holds counted since the last call, by kind (sorted)."""
        holds, self._holds = dict(sorted(self._holds.items())), {}
        return holds
