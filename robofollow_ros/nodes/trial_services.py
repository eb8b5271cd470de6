"""The trial manager's controls: the start / stop / next / confirm_reset / pause / resume / abort / redo
services, the mark topic and keys on stdin (``confirm_with_key``).

Keys (``confirm_with_key``; ``rig.keys``: on a terminal a single key acts at once, from a pipe one key per
line): Enter confirms a layout, ``p`` pauses, ``r`` resumes, ``a`` aborts, ``d`` redoes, ``s`` / ``f`` mark
the trial a success / a failure (``KEYS``).

A mixin of ``TrialManagerNode`` (it reads and sets the node's ``phase``, ``paused``, ``trial`` and
``_confirmed``, ends a running trial through ``interrupt`` and republishes through ``_announce``), kept
apart so the node's file stays the protocol. A trial the operator ends (``stop``, ``next``) is an
``operator-stop`` fault: it is not the policy's result (``trial_faults``).
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from std_srvs.srv import Trigger

from robofollow_ros.contract import SERVICE_TRIAL_NEXT, SERVICE_TRIAL_STOP
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.trial_faults import FAULT_OPERATOR, Fault
from robofollow_ros.rig.keys import KeyReader

#: The bringup terminal's keys and what they do.
KEYS = {"": "confirm the layout", "p": "pause", "r": "resume", "a": "abort the trial", "d": "redo the trial",
        "s": "mark the trial a success", "f": "mark the trial a failure"}


class TrialServices:
    phase: str
    paused: bool
    trial: dict[str, Any]
    index: int  # the plan's trial now (-1 before the first)
    plan: Any  # its length is the run's number of trials
    finished: threading.Event
    _confirmed: threading.Event
    _override: threading.Event

    def _announce(self, extra: dict[str, Any]) -> None:  # the node's
        raise NotImplementedError

    def interrupt(self, fault: Fault) -> None:  # the node's
        raise NotImplementedError

    def _lift_halt(self) -> None:  # the node's: a failed health check's halt ends with ``start``
        raise NotImplementedError

    def pause(self) -> tuple[bool, str]:  # the node's
        raise NotImplementedError

    def resume(self) -> tuple[bool, str]:  # the node's
        raise NotImplementedError

    def abort(self) -> tuple[bool, str]:  # the node's
        raise NotImplementedError

    def redo(self) -> tuple[bool, str]:  # the node's
        raise NotImplementedError

    def mark(self, text: str) -> tuple[bool, str]:  # the node's
        raise NotImplementedError

    if TYPE_CHECKING:  # Node's (a stub here would hide it: the mixin comes first in the node's bases)
        def get_logger(self) -> Any: ...

    # -- operator --------------------------------------------------------------------------------
    def _read_keys(self) -> KeyReader:
        """Take keys on stdin (single keys on a terminal); the caller closes the reader (the terminal's settings)."""
        return KeyReader(sys.stdin, self.key).start()

    def key(self, key: str) -> None:
        """One key typed in the bringup terminal (``KEYS``); the answer is logged."""
        if key == "":
            if self.phase == tp.PHASE_AWAITING_CONFIRM:
                self._confirmed.set()
            return
        actions = {"p": self.pause, "r": self.resume, "a": self.abort, "d": self.redo,
                   "s": lambda: self.mark('{"verdict": "success"}'), "f": lambda: self.mark('{"verdict": "failure"}')}
        if key not in actions:
            self.get_logger().warning(f"key {key!r}: not one of " + ", ".join(
                f"{k or 'Enter'} ({what})" for k, what in KEYS.items()))
            return
        ok, message = actions[key]()
        (self.get_logger().info if ok else self.get_logger().warning)(f"key {key!r}: {message}")

    # -- services --------------------------------------------------------------------------------
    def _srv_start(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self._lift_halt()
        self.paused = False
        self._announce({})
        res.success, res.message = not self.finished.is_set(), f"phase {self.phase}; running the protocol"
        return res

    def _srv_stop(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self.paused = True
        if self.phase == tp.PHASE_RUNNING:
            self.interrupt(Fault(FAULT_OPERATOR, f"stopped by the operator ({SERVICE_TRIAL_STOP})"))
            res.success, res.message = True, f"stopping trial {self.trial['id']}; paused after it"
        else:
            self._announce({})
            res.success, res.message = True, f"phase {self.phase}; paused"
        return res

    def _srv_next(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        """End the current trial and go on; on the last trial (or after it) the answer says there is no next one."""
        total = len(self.plan)
        if self.finished.is_set():
            res.success, res.message = False, f"there is no next trial: the run has finished (all {total} trials)"
            return res
        current = self.trial.get("id")
        if self.phase == tp.PHASE_RUNNING:
            self.interrupt(Fault(FAULT_OPERATOR, f"ended by the operator ({SERVICE_TRIAL_NEXT})"))
        self.paused = False
        self._announce({})
        if self.index >= 0 and self.index >= total - 1:
            res.success, res.message = True, (f"phase {self.phase}; trial {current} is the last of {total}: there is "
                                              "no next trial, the run finishes after it")
        else:
            res.success, res.message = True, f"phase {self.phase}; going on to the next trial"
        return res

    def _srv_confirm(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if self.phase != tp.PHASE_AWAITING_CONFIRM:
            res.success, res.message = False, f"nothing to confirm in phase {self.phase}"
            return res
        self._confirmed.set()
        res.success, res.message = True, f"layout of {self.trial['id']} confirmed; starting"
        return res

    def _srv_override_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if self.phase != tp.PHASE_VERIFYING_RESET:
            res.success, res.message = False, f"nothing to override in phase {self.phase}"
            return res
        self._override.set()
        res.success, res.message = True, (f"starting {self.trial['id']} without a verified reset "
                                          "(recorded in its results entry)")
        return res

    def _srv_pause(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self.pause()
        return res

    def _srv_resume(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self.resume()
        return res

    def _srv_abort(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self.abort()
        return res

    def _srv_redo(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self.redo()
        return res
