"""The trial manager's controls: the start / stop / next / confirm_reset / pause / resume / abort / redo
services, the mark topic and keys on stdin (``confirm_with_key``).

Keys (``confirm_with_key``; ``rig.keys``: on a terminal a single key acts at once, from a pipe one key per
line): Enter confirms a layout, ``p`` pauses, ``r`` resumes, ``a`` aborts, ``d`` redoes, ``s`` / ``f`` mark
the trial a success / a failure (``KEYS``).

And what the controls do: ``pause`` / ``resume`` (mid-trial the arms hold and the trial's bounds stand
still), ``abort``, ``redo`` (``trial_redo``) and ``mark`` (``evaluation.operator_marks``).

A mixin of ``TrialManagerNode`` (it reads and sets the node's ``phase``, ``paused``, ``trial``, the redo
queue and the operator's pause, ends a running trial through ``interrupt`` and republishes through
``_announce``), kept apart so the node's file stays the protocol. A trial the operator ends (``stop``, ``next``) is an
``operator-stop`` fault: it is not the policy's result (``trial_faults``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from robofollow_ros.contract import SERVICE_TRIAL_NEXT, SERVICE_TRIAL_STOP
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.trial_faults import FAULT_ABORT, FAULT_OPERATOR, Fault
from robofollow_ros.nodes.trial_redo import Redo, find_trial, strip_attempt
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
    # the node's, read and set by the operator's controls below
    trial_paused_since: float | None  # monotonic time of the operator's mid-trial pause
    halted: dict[str, str] | None  # a failed health check's halt
    health_watch: Any
    records: Any
    _phase_since: float
    _key: TrialKey | None  # the trial under way
    _last_key: TrialKey | None  # the last recorded trial
    _recorded: list[TrialKey]
    _redos: list[Redo]
    _attempt: int
    _superseded: list[Any]
    _replaces: bool
    _redo_pending: bool
    _mark: Any
    _intervened: int
    #: Blinded runs (``--controls`` without ``--unblind``): the label the operator sees for each trial.
    blind_labels: dict[TrialKey, str]

    def shown_id(self, key: TrialKey) -> str:
        """The trial's id as the operator sees it: its blind label in a blinded run (the id names a control)."""
        return self.blind_labels.get(key, key.trial_id)

    def find_shown(self, keys: list[TrialKey], trial_id: str) -> TrialKey | None:
        """The trial of ``keys`` the operator names: by its id, or in a blinded run by its label."""
        found = find_trial(keys, trial_id)
        if found is None and self.blind_labels:
            label = strip_attempt(trial_id)
            found = next((k for k in keys if self.blind_labels.get(k) == label), None)
        return found

    def _announce(self, extra: dict[str, Any]) -> None:  # the node's
        raise NotImplementedError

    def interrupt(self, fault: Fault) -> None:  # the node's
        raise NotImplementedError

    def _lift_halt(self) -> None:  # the node's: a failed health check's halt ends with ``start``
        raise NotImplementedError

    def _publish(self, extra: dict[str, Any]) -> None:  # the node's
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

    # -- the operator's controls (the services, keys and topics above call them) ------------------
    def _under_way(self) -> bool:
        return self.index >= 0 and self.phase not in (tp.PHASE_IDLE, tp.PHASE_DONE, tp.PHASE_FINISHED)

    def pause(self) -> tuple[bool, str]:
        """Mid-trial: hold it where it is (no row is sent, the arms hold, its bounds stand still); between
        trials: the next one waits."""
        if self.finished.is_set():
            return False, "the run is finished"
        if self._under_way() and self.phase in tp.EXECUTING:
            if self.trial_paused_since is None:
                self.trial_paused_since = time.monotonic()
                self.health_watch.halt(True, f"paused by the operator ({tp.SERVICE_PAUSE})")
                self._announce({"operator_pause": True})
                self.get_logger().warning(f"trial {self.trial['id']} paused by the operator; arms holding; "
                                          f"{tp.SERVICE_RESUME} (r) goes on, {tp.SERVICE_ABORT} (a) fails it, "
                                          f"{tp.SERVICE_REDO} (d) runs it again")
            return True, f"trial {self.trial['id']} paused in phase {self.phase}; arms holding"
        self.paused = True
        self._announce({})
        return True, f"phase {self.phase}; the next trial waits for resume"

    def resume(self) -> tuple[bool, str]:
        if self.finished.is_set():
            return False, "the run is finished"
        resumed = self._end_trial_pause()
        self.paused = False
        self._announce({})
        if self.halted is not None:
            return False, f"halted by a health check: {self.halted['action']}"
        return True, (f"trial {self.trial.get('id')} resumed after {resumed:.1f} s" if resumed is not None else
                      f"phase {self.phase}; running the protocol")

    def _end_trial_pause(self) -> float | None:
        """Lift the operator's mid-trial pause (the arms may move again); how long it lasted, None if none."""
        if self.trial_paused_since is None:
            return None
        held = time.monotonic() - self.trial_paused_since
        self.trial_paused_since = None
        self._phase_since += held  # a paused trial's bounds stood still
        if self.halted is None:
            self.health_watch.halt(False)
        self._announce({"operator_pause": False})
        return held

    def abort(self) -> tuple[bool, str]:
        if not self._under_way():
            return False, f"no trial under way in phase {self.phase}"
        self._end_trial_pause()
        self.interrupt(Fault(FAULT_ABORT, f"aborted by the operator ({tp.SERVICE_ABORT})"))
        return True, f"aborting trial {self.trial['id']}; the run goes on"

    def redo(self, trial_id: str = "") -> tuple[bool, str]:
        """Run a trial again (``trial_redo``). ``trial_id`` empty: the trial under way once its rows began, else
        (between trials, or while the next one waits for its reset) the last recorded one; a trial id: that
        trial. A recorded trial runs at once if the trial under way has not begun its rows (which then waits
        until after it), else after the trial under way."""
        current = self._key if self._under_way() else None
        started = self.phase not in tp.NOT_STARTED
        if current is not None and (self.find_shown([current], trial_id) is not None or
                                    (not trial_id.strip() and (started or self._last_key is None))):
            return self._redo_under_way()
        if self.finished.is_set():
            return False, "the run is finished (to redo its last trial, pause during it, then redo)"
        key = self._last_key if not trial_id.strip() else self.find_shown(self._recorded, trial_id)
        if key is None:
            recorded = ", ".join(self.shown_id(k) for k in self._recorded[-5:]) or "none yet"
            return False, (f"trial {trial_id!r} is not a recorded trial of this run (last recorded: {recorded})"
                           if trial_id.strip() else "no trial recorded yet")
        if any(r.key == key for r in self._redos) or key == current:
            return False, f"trial {self.shown_id(key)} is already to run again"
        when = "when the run resumes" if self.paused else "now"
        if current is None:
            self._redos.insert(0, Redo(key, replaces=True))
        elif not started:  # the trial waiting for its reset goes after the redo, as it is
            self._redos[:0] = [Redo(key, replaces=True),
                               Redo(current, self._replaces, self._attempt, self._superseded)]
            when = f"now ({self.trial['id']} waits until after it)"
            self._publish({"phase": tp.PHASE_DONE, "set_aside_for_redo": True})
        else:
            self._redos.append(Redo(key, replaces=True))
            when = f"after {self.trial['id']}"
        return True, (f"recorded trial {self.shown_id(key)} runs again {when}; its entry is kept as superseded and "
                      "only the new attempt counts")

    def _redo_under_way(self) -> tuple[bool, str]:
        self._redo_pending = True
        self._end_trial_pause()
        self.interrupt(Fault(FAULT_ABORT, f"ended for a redo by the operator ({tp.SERVICE_REDO})"))
        return True, f"ending trial {self.trial['id']} (attempt {self._attempt}) and running it again"

    def mark(self, text: str) -> tuple[bool, str]:
        from robofollow_ros.evaluation.operator_marks import parse_mark

        try:
            mark = parse_mark(text)
        except ValueError as exc:
            return False, str(exc)
        if self._under_way() and (self.phase not in tp.NOT_STARTED or self._last_key is None):
            self._mark = mark
            return True, f"mark {mark} kept for trial {self.trial['id']} (beside its verdict)"
        if self.finished.is_set():
            return False, "the run is finished; a mark is taken until its last trial is recorded"
        if self._last_key is None:
            return False, "no trial to mark yet"
        self.records.annotate(self._last_key, {"operator_mark": mark})
        return True, f"mark {mark} added to trial {self.shown_id(self._last_key)} (beside its verdict)"

    def _on_intervention(self, msg: Bool) -> None:
        if msg.data and self.phase in (tp.PHASE_RUNNING, tp.PHASE_STOPPING):
            self._intervened += 1

    def _on_redo_trial(self, msg: String) -> None:
        ok, message = self.redo(msg.data)
        (self.get_logger().info if ok else self.get_logger().error)(f"{tp.TOPIC_REDO_TRIAL}: {message}")

    def _on_mark(self, msg: String) -> None:
        ok, message = self.mark(msg.data)
        (self.get_logger().info if ok else self.get_logger().error)(f"{tp.TOPIC_MARK}: {message}")
