"""trial_manager_node: runs a protocol (tasks × rounds) over the graph and writes the results.

Per trial: phase ``resetting`` (the sim resets; on the rig the operator is shown the layout and
confirms through ``/robofollow/trial/confirm_reset`` or Enter) → ``starting`` until the stage monitor
has scored the start state (its acknowledgement: no row runs before the scorer holds frame 0, on the
rig as in the sim; a scorer starved of CPU that learned of a trial only at its end scored no frame at
all) → ``running`` → the policy node's
``done`` after ``max_steps`` policy calls (the step budget) or a stop → ``scoring`` → the stage
monitor's final score → recorded with ``RunWriter`` (run.json, results.json, summary.json, SQLite)
exactly as the headless evaluator records it → ``done``. The handshake is in ``trial_protocol``.
Services: ``start`` (run / resume), ``stop`` (end the current trial now and pause; the trial is an
``operator-stop`` fault), ``next`` (end the current trial if any, as a fault too, and go on), ``pause`` /
``resume`` (hold the trial where it is: policy_node sends no row, the arm bridge holds; its bounds stand
still), ``abort`` (the trial fails as ``operator-abort``, the run goes on), ``redo`` (the trial under way
ends and runs again; between trials the last recorded one runs again; ``trial_redo``: the earlier attempt
is kept inside the redo's results entry, ``superseded_attempts``), the ``/robofollow/trial/redo_trial``
topic (a recorded trial named by its id runs again next) and the ``/robofollow/trial/mark`` topic
(``evaluation.operator_marks``: kept beside the verdict).

Every phase is bounded (``trial_faults.PhaseBounds``: ``reset_timeout_s``, ``confirm_timeout_s``,
``score_timeout_s``, ``running_timeout_s``, ``stop_timeout_s``), and anything but the policy that ends
a trial is recorded as the fault it is (``trial_faults``): an e-stop on ``/robofollow/estop`` (the trial
ends, the run pauses until the e-stop is released), the operator's stop, a node of the graph that dies
(``graph_peers.AliveWatch``: the trial is recorded and the run ends), a phase past its bound, a graph
error. The arm bridge's holds (``/robofollow/arm_bridge/status``) are counted per trial.

The first trial begins once the graph is connected: every awaited node is seen here, and each of
the package's nodes reports that it sees all the others (``graph_peers``: DDS discovers pair by
pair). Before it, the trial manager has ``policy_node`` reach the policy (``/robofollow/policy/check``:
connect + reset); an unreachable policy ends the run at once with one line naming the address.
The executable exits when the trials end — with ``EXIT_TRIALS_FAILED`` when some trial could not
be executed (a policy error or a fault) or a node died, ``EXIT_POLICY_UNREACHABLE`` when the
policy was never reached — and the launch files shut the graph down with it. Its timer runs on
the steady clock, so under ``use_sim_time`` (where sim time stands still between commands) the
protocol still advances.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from robofollow_ros.contract import (
    MIN_POSE_CONFIDENCE,
    SERVICE_TRIAL_NEXT,
    SERVICE_TRIAL_START,
    SERVICE_TRIAL_STOP,
    TOPIC_BRIDGE_STATUS,
    TOPIC_ESTOP,
    TOPIC_INSTRUCTION,
    TOPIC_INTERVENTION,
    TOPIC_SCORE,
    TOPIC_TRIAL,
)
from robofollow_ros.evaluation.execution_mode import RESULT_KEY, counters_record
from robofollow_ros.evaluation.progress import QUIET_S
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.exit_status import EXIT_INTERNAL, EXIT_OK, EXIT_POLICY_UNREACHABLE, EXIT_TRIALS_FAILED
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import build_node, leave_after_stop, stop_on_signals
from robofollow_ros.nodes._params import Bounds, ParameterSet, non_negative, one_of, positive
from robofollow_ros.nodes.graph_peers import AliveWatch, GraphWait
from robofollow_ros.nodes.health_watch import HealthWatch
from robofollow_ros.nodes.rclpy_compat import ros_init
from robofollow_ros.nodes.reset_watch import ResetWatch
from robofollow_ros.nodes.trial_faults import (
    FAULT_ESTOP,
    FAULT_GRAPH,
    FAULT_HEALTH,
    FAULT_NODE,
    FAULT_STALE,
    Fault,
    PhaseBounds,
    SafetyWatch,
    fault_result,
)
from robofollow_ros.nodes.trial_records import PolicyGate, TrialRecords, empty_result, ros_run_arguments
from robofollow_ros.nodes.trial_redo import Redo, superseding
from robofollow_ros.nodes.trial_services import TrialServices
from robofollow_ros.policy.guard import DEFAULT_POLICY_TIMEOUT_S
from robofollow_ros.rig.health import HALT, HealthFailure, HealthSettings, check_health, worst_class
from robofollow_ros.rig.reset_check import ResetBlockers
from robofollow_ros.robot.calibration import rig_calibration_dir

#: How often a table that does not match the layout is shown again (view), and told again (terminal).
RESET_VIEW_PERIOD_S = 0.5
#: How long a peer that left cleanly waits to be judged: time for this node's own Ctrl-C to arrive (_on_node_lost).
PEER_LEFT_GRACE_S = 1.0
#: How long the manager waits, once its run ended, for every subscriber to have the last trial state (``finished``)
#: before it exits: a DDS writer destroyed at once can take its last sample with it (a viewer on another host,
#: behind the Foxglove node, never saw the run end on a loaded machine).
FINISHED_ACK_S = 3.0
RESET_TELL_PERIOD_S = 10.0
#: How often the wait for the simulator's reset is told.
SIM_RESET_TELL_PERIOD_S = QUIET_S
#: How often a trial under way is told (a real-time trial runs on the wall clock: a minute or more), and the
#: waits after it (the last row, the final score).
TRIAL_TELL_PERIOD_S = QUIET_S


_non_negative = non_negative

#: The phases of a trial under way that _tell_trial tells, and what each waits for.
_TOLD_PHASES = {
    tp.PHASE_STARTING: "waiting for the stage monitor's first frame",
    tp.PHASE_RUNNING: "running",
    tp.PHASE_STOPPING: "stopping (waiting for policy_node's last row)",
    tp.PHASE_SCORING: "waiting for the stage monitor's final score",
}


def _not_empty(value: Any) -> str | None:
    return None if str(value).strip() else "must not be empty"


def _json_or_empty(value: Any) -> str | None:
    if value == "":
        return None
    try:
        return None if isinstance(json.loads(value), dict) else "must be a JSON object or empty"
    except (TypeError, json.JSONDecodeError) as exc:
        return f"must be a JSON object or empty ({exc})"


def _checks(value: Any) -> str | None:
    from robofollow_ros.rig.health import CHECKS

    unknown = [c for c in _words(value) if c not in CHECKS]
    return f"{unknown[0]!r} is not one of {', '.join(CHECKS)}" if unknown else None


def _controls(value: Any) -> str | None:
    from robofollow_ros.evaluation.controls import parse_controls

    try:
        parse_controls(str(value))
    except ValueError as exc:
        return str(exc).removeprefix("--controls: ")
    return None


def _words(value: Any) -> list[str]:
    return [w for w in str(value).replace(",", " ").split() if w]


_seconds = Bounds(low=0, low_open=True, rule="must be a positive number of seconds")


class TrialManagerNode(TrialServices, Node):
    #: Set by a stop signal to this node's process (``main``). ``ros2 launch`` signals every node at once: a peer
    #: that leaves the graph after it left because of the same Ctrl-C, and the run is "interrupted", not ended by
    #: that node (a peer that stops within 0.1 s left before this node's spin loop saw its own signal).
    stop_signal: threading.Event | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("trial_manager_node", **kwargs)
        params = ParameterSet(self)
        trials = params.declare("trials", "scene=scene1 levels=L0 limit=1 rounds=1",
                                "trials SPEC: scene=.. levels=.. limit=.. tasks=.. rounds=..", _not_empty)
        self.max_steps = params.declare("max_steps", 10, "policy calls per trial (the step budget)", positive)
        self.actions_per_step = params.declare("actions_per_step", 50, "rows executed per policy call", positive)
        output = params.declare("output", "", "new or empty run directory (default runs/ros-<UTC time>)")
        self.policy_label = params.declare("policy_label", "", "policy SPEC recorded in run.json as the model")
        privileged = params.declare("privileged", False, "recorded in run.json's arguments: policy_node hands any "
                                    "policy privileged state (--privileged; bringup copies policy_node's)")
        self.rig_mode = params.declare("mode", "sim", "sim: the sim resets; rig: the operator sets up and confirms",
                                       one_of("sim", "rig")) == "rig"
        self.auto_start = params.declare("auto_start", True, "start the protocol as soon as the graph is up")
        self.wait_for_nodes = params.declare("wait_for_nodes", ["sim_node", "policy_node", "stage_monitor_node"],
                                             "nodes that must be up before the first trial")
        self.graph_timeout_s = params.declare("graph_timeout_s", 300.0, "longest wait for the awaited nodes before "
                                              "the first trial, s (0: wait until they come)", _non_negative)
        self.reset_timeout_s = params.declare("reset_timeout_s", 300.0, "longest sim reset, s", positive)
        self.score_timeout_s = params.declare("score_timeout_s", 60.0, "longest wait for the scorer (its start "
                                              "acknowledgement, the final score), s", positive)
        self.trial_timeout_s = params.declare("trial_timeout_s", 0.0, "stop a running trial after this long and "
                                              "score it, s (0: only the step budget)", _non_negative)
        confirm_timeout_s = params.declare("confirm_timeout_s", 0.0, "rig: longest wait for the operator to confirm "
                                           "a layout before the trial fails, s (0: wait for them)", _non_negative)
        policy_timeout_s = params.declare("policy_timeout_s", DEFAULT_POLICY_TIMEOUT_S, "policy_node's bound on one "
                                          "policy call, s (sets the default running_timeout_s)", _seconds)
        running_timeout_s = params.declare("running_timeout_s", 0.0, "longest `running` before the trial fails, s "
                                           "(0: policy_timeout_s x (max_steps + 2) + 900, eval's trial deadline)",
                                           _non_negative)
        stop_timeout_s = params.declare("stop_timeout_s", 0.0, "longest wait for policy_node to end a stopped "
                                        "trial before it fails, s (0: policy_timeout_s + 60: a call in flight "
                                        "answers or times out, then the last row's state)", _non_negative)
        self.confirm_with_key = params.declare("confirm_with_key", False, "take the operator's keys on stdin (a "
                                               "terminal: single keys; Enter confirms a layout, p r a d s f)")
        self.auto_confirm = params.declare("auto_confirm", False, "rig: confirm every layout at once (mock hardware "
                                                                  "lays the table out itself)")
        check_policy = params.declare("check_policy", True, "reach the policy (connect + reset through "
                                                                 "policy_node) before the first trial")
        policy_check_timeout_s = params.declare("policy_check_timeout_s", 60.0, "longest wait for that check, s",
                                                     positive)
        self.print_summary = params.declare("print_summary", True, "log the IS/ES/CR table when the trials end")
        stepper = params.declare("stepper", "topp", "recorded in run.json (the sim node's stepper)")
        live_view = params.declare("live_view", "", "recorded in run.json: where the live Foxglove view binds and "
                                   "whether it offers the operator's services (bringup copies foxglove_node's)")
        policy_kwargs = params.declare("policy_kwargs", "{}", "recorded in run.json: policy_node's policy_kwargs, "
                                       "JSON (bringup copies it)", _json_or_empty)
        render = params.declare("render", "", "recorded in run.json: sim_node's render (bringup copies it); "
                                "empty: not known (the rig)", one_of("", "true", "false"))
        execution = params.declare("execution", "", "recorded in run.json: how policy_node paces rows and sim_node "
                                   "steps, a JSON object (bringup copies it from those nodes)", _json_or_empty)
        # -- reset verification (rig.reset_check) and health checks (rig.health) --------------------------------
        self.reset_check = params.declare("reset_check", False, "before each trial, compare /robofollow/objects with "
                                          "the layout; the trial starts when they match or the operator overrides")
        reset_tolerance = params.declare("reset_tolerance_m", 0.015, "largest distance of an object from its place, m",
                                         positive)
        reset_yaw = params.declare("reset_yaw_tolerance_deg", 10.0, "largest yaw error where yaw matters, deg",
                                   positive)
        reset_yaw_shapes = params.declare("reset_yaw_shapes", "box", "shapes whose yaw is checked (comma list; "
                                          "box: the Scene 3 bars, scored on yaw)")
        reset_confidence = params.declare("reset_min_confidence", MIN_POSE_CONFIDENCE,
                                          "a pose with less confidence (or not visible) does not show an object "
                                          "present (default: contract.MIN_POSE_CONFIDENCE)", _non_negative)
        reset_check_timeout_s = params.declare("reset_check_timeout_s", 600.0, "longest wait for a matching table "
                                               "before the trial fails as reset-not-verified, s", positive)
        health = params.declare("health_checks", "", "health checks before and after each trial (comma list of "
                                "limits, home, drivers, cameras, calibration; empty: none)", _checks)
        home_tolerance = params.declare("home_tolerance_rad", 0.1, "health: largest distance of an arm joint from "
                                        "home before a trial, rad", positive)
        limit_tolerance = params.declare("limit_tolerance_rad", 0.01, "health: a joint beyond its URDF limit by "
                                         "more than this fails, rad", _non_negative)
        driver_age = params.declare("driver_max_age_s", 0.5, "health: oldest /joint_states the drivers may leave, s",
                                    positive)
        camera_hz = params.declare("camera_min_hz", 5.0, "health: slowest camera rate, frames/s", positive)
        camera_window = params.declare("camera_window_s", 2.0, "health: window of the camera rate, s", positive)
        self.health_timeout_s = params.declare("health_timeout_s", 5.0, "longest wait for the checks to pass before "
                                               "a trial (discovery, the first frames), s", positive)
        calibration_dir = params.declare("calibration_dir", "", "health: the camera calibration to check "
                                         "(default: the package's calibration/sim, perception_node's default)")
        # -- instruction controls, blinded (evaluation.controls, nodes.trial_blind) ------------------------------
        controls_text = params.declare("controls", "", "instruction controls run beside every trial on its seed, "
                                       "a comma list of blank, shuffled, swap, paraphrase (empty: none)", _controls)
        blind = params.declare("blind", True, "with controls: the operator's terminal and live view do not say which "
                               "instruction a trial got (nor that it is a control) until the run ends (false: "
                               "--unblind, for debugging; recorded in run.json)")
        order_seed = params.declare("order_seed", 0, "with controls: seed of the random order the trials run in")

        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.evaluation.controls import parse_controls
        from robofollow_ros.nodes.trial_blind import ControlledPlan
        from robofollow_ros.nodes.trial_plan import parse_trials

        self.registry = default_registry()
        self.plan = parse_trials(trials, self.registry)
        #: The run's controls, in a seeded random order, and the labels a blinded operator sees.
        self.controlled = ControlledPlan.build(self.registry, self.plan, parse_controls(controls_text),
                                               blind=blind, order_seed=order_seed)
        self.plan = self.controlled.plan
        self.blind_labels = self.controlled.labels
        self.run_dir = Path(output) if output else Path("runs") / time.strftime("ros-%Y%m%dT%H%M%SZ", time.gmtime())
        arguments = ros_run_arguments(
            trials, self.plan, max_steps=self.max_steps, actions_per_step=self.actions_per_step, stepper=stepper,
            output=str(self.run_dir), policy=self.policy_label, kwargs=json.loads(policy_kwargs or "{}"),
            policy_timeout_s=policy_timeout_s, render=None if render == "" else render == "true",
            rig_mode=self.rig_mode, privileged=privileged, execution=json.loads(execution) if execution else None)
        arguments["live_view"] = json.loads(live_view) if live_view else None
        arguments.update(self.controlled.arguments())
        self.bounds = PhaseBounds.derive(reset_s=self.reset_timeout_s, confirm_s=confirm_timeout_s,
                                         score_s=self.score_timeout_s, running_s=running_timeout_s,
                                         stop_s=stop_timeout_s, policy_timeout_s=policy_timeout_s,
                                         max_steps=self.max_steps, verify_s=reset_check_timeout_s)
        self.records = TrialRecords(self.run_dir, arguments, self.plan.selected_tasks, len(self.plan), stepper,
                                    self.policy_label, extra=self.controlled.run_record())
        self._renderer_noted = False
        self._peer_left: tuple[str, str, float] | None = None  # (node, how, judged at): _on_node_lost
        self.finished = threading.Event()
        self.index = -1
        self.phase = tp.PHASE_IDLE
        self.paused = not self.auto_start
        self.trial: dict[str, Any] = {}
        self._phase_since = time.monotonic()
        self._policy_done: dict[str, Any] | None = None
        #: What ends the current trial if not its policy (recorded as its ``fault``); None while it is the policy's.
        self._fault: Fault | None = None
        self.safety = SafetyWatch()
        self._started_wall = 0.0
        self._confirmed = threading.Event()
        #: The process's exit status once ``finished`` (cli._common's table).
        self.exit_code = EXIT_OK
        #: Sim: wait in ``starting`` for the stage monitor to score the start state before ``running``.
        self.await_scorer = "stage_monitor_node" in self.wait_for_nodes
        self.policy_gate = PolicyGate(self, tp.SERVICE_POLICY_CHECK, check_policy and "policy_node" in
                                      self.wait_for_nodes, policy_check_timeout_s)

        self.reset_watch = ResetWatch(self, reset_tolerance, reset_yaw, _words(reset_yaw_shapes), reset_confidence) \
            if self.reset_check else None
        checks = tuple(_words(health))
        self.health = self._health_settings(checks, home_tolerance, limit_tolerance, driver_age, camera_hz)
        self.health_watch = HealthWatch(self, "cameras" in checks, camera_window,
                                        calibration_dir or str(rig_calibration_dir()))
        #: Why the run is halted ({"check", "reason", "action"}): the arms hold until the operator calls start.
        self.halted: dict[str, str] | None = None
        self._override = threading.Event()
        self._pending_stamp: int | None = None
        self._reset_record: dict[str, Any] | None = None
        #: What kept this trial's reset from passing so far (results.json ``reset_check.blocked_by``).
        self._reset_blockers = ResetBlockers()
        self._reset_said = ("", 0.0, 0.0)  # the last summary told, when told, when shown
        self._sim_reset_told = (0.0, 0)  # the reset phase's start and the tens of seconds told of it
        self._trial_told = (0.0, 0)  # the same for the phases of a trial under way (_tell_trial)
        self._live: dict[str, Any] = {}  # the stage monitor's latest live score of the trial under way
        self._health_record: dict[str, Any] | None = None
        self._failures_after: list[HealthFailure] = []
        # -- the operator's pause, redo and marks ----------------------------------------------------------
        #: When the operator paused the trial under way (monotonic), None while it is not paused.
        self.trial_paused_since: float | None = None
        self._redo_pending = False
        self._attempt = 1
        self._superseded: list[dict[str, Any]] = []
        #: Trials to run again before the plan goes on (``trial_redo``), and whether the one under way replaces
        #: a recorded entry.
        self._redos: list[Redo] = []
        self._replaces = False
        self._key: TrialKey | None = None  # the trial under way (the plan's, or one run again)
        self._recorded: list[TrialKey] = []  # recorded trials, in the order they were recorded
        self._mark: dict[str, Any] | None = None
        self._last_key: Any = None  # the last recorded trial's TrialKey: a mark after it ended annotates it
        #: Frames of the trial under way that teleoperation drove (the arm bridge's /robofollow/intervention).
        self._intervened = 0

        self.graph_wait = GraphWait(self, self.wait_for_nodes, self.graph_timeout_s)
        self.trial_pub = self.create_publisher(String, TOPIC_TRIAL, tp.LATCHED_STATE)
        self.instruction_pub = self.create_publisher(String, TOPIC_INSTRUCTION, tp.LATCHED_STATE)
        self.create_subscription(String, tp.TOPIC_SIM_STATUS, self._on_sim_status, tp.LATCHED)
        self.create_subscription(String, tp.TOPIC_POLICY_STATUS, self._on_policy_status, tp.LATCHED)
        self.create_subscription(String, TOPIC_SCORE, self._on_score, tp.LATCHED)
        self.create_subscription(Bool, TOPIC_ESTOP, self._on_estop, 10)
        self.create_subscription(String, TOPIC_BRIDGE_STATUS, self._on_bridge_status, 10)
        AliveWatch(self, self.wait_for_nodes, self._on_node_lost)
        self.create_service(Trigger, SERVICE_TRIAL_START, self._srv_start)
        self.create_service(Trigger, SERVICE_TRIAL_STOP, self._srv_stop)
        self.create_service(Trigger, SERVICE_TRIAL_NEXT, self._srv_next)
        self.create_service(Trigger, tp.SERVICE_CONFIRM_RESET, self._srv_confirm)
        self.create_service(Trigger, tp.SERVICE_OVERRIDE_RESET, self._srv_override_reset)
        self.create_service(Trigger, tp.SERVICE_PAUSE, self._srv_pause)
        self.create_service(Trigger, tp.SERVICE_RESUME, self._srv_resume)
        self.create_service(Trigger, tp.SERVICE_ABORT, self._srv_abort)
        self.create_service(Trigger, tp.SERVICE_REDO, self._srv_redo)
        self.create_subscription(String, tp.TOPIC_MARK, self._on_mark, 10)
        self.create_subscription(String, tp.TOPIC_REDO_TRIAL, self._on_redo_trial, 10)
        self.create_subscription(Bool, TOPIC_INTERVENTION, self._on_intervention, tp.STATE_STREAM)
        # Steady clock: under use_sim_time, sim time stands still until a command moves it.
        self.create_timer(0.05, self._tick, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._publish({"phase": tp.PHASE_IDLE, "total": len(self.plan), "awaiting": list(self.wait_for_nodes)})
        #: The operator's keys on stdin (``confirm_with_key``); closed with the node (the terminal's settings).
        self.key_reader = self._read_keys() if self.confirm_with_key else None

    # -- publishing ------------------------------------------------------------------------------
    def _publish(self, extra: dict[str, Any]) -> None:
        """A new phase (``extra["phase"]``): its bound counts from now."""
        self.phase = str(extra.get("phase", self.phase))
        self._phase_since = time.monotonic()
        self._announce(extra)

    def _announce(self, extra: dict[str, Any]) -> None:
        """The trial state again, with ``extra`` and why the run is paused (``paused_by``), in the same phase."""
        self.trial.update(extra, phase=self.phase, paused_by=self._paused_by())
        self.trial_pub.publish(String(data=tp.encode(self.trial)))

    def _paused_by(self) -> str | None:
        if self.safety.estop:
            return FAULT_ESTOP
        if self.halted is not None:
            return FAULT_HEALTH
        return "operator" if self.paused else None

    @staticmethod
    def _health_settings(checks: tuple[str, ...], home_tolerance: float, limit_tolerance: float, driver_age: float,
                         camera_hz: float) -> HealthSettings:
        from robofollow_ros.robot.kinematics import RigKinematics
        from robofollow_ros.robot.urdf_limits import rig_joint_limits

        kinematics = RigKinematics() if checks else None
        limits = rig_joint_limits(kinematics.rig) if kinematics is not None else {}
        home = kinematics.home_vector() if kinematics is not None else [0.0] * 14
        return HealthSettings(checks, {n: lim.lower for n, lim in limits.items()},
                              {n: lim.upper for n, lim in limits.items()}, [float(v) for v in home],
                              limit_tolerance, home_tolerance, driver_age, camera_hz)

    def _begin_next(self) -> None:
        """The next trial: one the operator asked to run again (``trial_redo``), else the plan's next."""
        if self._redos:
            redo = self._redos.pop(0)
            key, self._replaces = redo.key, redo.replaces
            if redo.attempt == 0:  # a recorded trial: its entry as it is now (with any mark it got) is superseded
                self._attempt, self._superseded = superseding(self.records.entry(key) or {}, key)
            else:
                self._attempt, self._superseded = redo.attempt, redo.superseded
        else:
            self.index += 1
            if self.index >= len(self.plan):
                self._finish_run()
                return
            key, self._replaces, self._attempt, self._superseded = self.plan.keys[self.index], False, 1, []
        self._key = key
        position = self.plan.keys.index(key)
        task = self.registry.eval_task(key.task_id)
        given = self.controlled.given(key)  # the instruction the policy gets, and how the trial is scored
        self.trial = {"id": self.controlled.graph_id(key, self._attempt),
                      "attempt": self._attempt, "index": position, "total": len(self.plan), "scene": task.scene,
                      "level": task.level, "task": task.task_id, "round": key.round, "seed": key.seed,
                      "instruction": given.instruction, "max_steps": self.max_steps,
                      "actions_per_step": self.actions_per_step, "run_dir": str(self.run_dir), **given.scoring}
        self._policy_done = None
        self._fault = None
        self._mark = None
        self._intervened = 0
        self.trial_paused_since = None
        self._reset_record = self._health_record = None
        self._reset_blockers = ResetBlockers()
        self._override.clear()
        if self.reset_watch is not None:
            self.reset_watch.begin(self.registry.layout_of(task), key.seed)
        self.safety.take_holds()  # holds before this trial (between trials, after the last row) are not its
        self._started_wall = time.monotonic()
        self.instruction_pub.publish(String(data=given.instruction))  # the policy and the bag get it
        self._publish({"phase": tp.PHASE_RESETTING})
        self.get_logger().info(f"trial {position + 1}/{len(self.plan)}: {self.trial['id']} — "
                               f"{self.controlled.told(key, given)}")
        if self.rig_mode:
            self._show_operator(task, key.seed)

    def _show_operator(self, task: Any, seed: int) -> None:
        from robofollow_ros.nodes.operator_layout import write_operator_layout

        path, lines = write_operator_layout(task, seed, self.run_dir / "layouts", str(self.trial["id"]))
        self.get_logger().info(f"set up the layout shown in {path}:\n" + "\n".join(lines) +
                               f"\nthen call {tp.SERVICE_CONFIRM_RESET}" + (" or press Enter" if
                                                                            self.confirm_with_key else ""))
        self._confirmed.clear()
        self._publish({"phase": tp.PHASE_AWAITING_CONFIRM, "layout_picture": str(path)})
        if self.auto_confirm:
            self._confirmed.set()

    # -- reset verification and health checks -----------------------------------------------------
    def _after_reset(self, stamp_ns: int | None) -> None:
        """The sim reset (its start state stamped ``stamp_ns``) or the operator confirmed (None: the trial
        starts at the wall-clock time it starts): verify the table, check the rig's health, then start."""
        self._pending_stamp = stamp_ns
        if self.reset_watch is not None:
            self._reset_said = ("", 0.0, 0.0)
            self._publish({"phase": tp.PHASE_VERIFYING_RESET})
        else:
            self._after_verify()

    def _after_verify(self) -> None:
        if self.health.checks:
            self._publish({"phase": tp.PHASE_CHECKING})
        else:
            self._start_pending()

    def _start_pending(self) -> None:
        stamp = self._pending_stamp
        self._start(self.get_clock().now().nanoseconds if stamp is None else stamp)

    def _verify_reset(self, waited: float) -> bool:
        """One look at the table; True when the trial went on (matched or overridden) or failed."""
        assert self.reset_watch is not None
        report = self.reset_watch.check()
        now = time.monotonic()
        if report is not None and not report.ok:
            self._reset_blockers.fold(report, waited)
        record = {"verified": bool(report is not None and report.ok), "overridden": False,
                  "waited_s": round(waited, 3), **(report.as_dict() if report is not None else {"seen": False}),
                  "blocked_by": self._reset_blockers.as_list()}
        if report is not None and report.ok:
            if self._pending_stamp is not None and self.reset_watch.checked_stamp_ns > self._pending_stamp:
                # the sim's table changed after its reset (a displace_object drill): the trial starts from
                # the state the check passed on, not from the reset's
                self._pending_stamp = self.reset_watch.checked_stamp_ns
            self.reset_watch.show(report, self.get_clock().now().nanoseconds)
            self.get_logger().info(f"trial {self.trial['id']}: reset verified ({report.summary()})")
            self._reset_record = record
            self._after_verify()
            return True
        if self._override.is_set():
            self.get_logger().warning(f"trial {self.trial['id']}: starting without a verified reset (operator "
                                      f"override): {report.summary() if report is not None else 'nothing seen'}")
            self._reset_record = dict(record, overridden=True)
            self._after_verify()
            return True
        overrun = self.bounds.overrun(self.phase, waited, self.rig_mode)
        if overrun is not None:
            self._reset_record = record
            why = report.summary() if report is not None else "no objects seen"
            self._record_fault(Fault(overrun.kind, f"{overrun.reason} ({why})"))
            return True
        said, told_at, shown_at = self._reset_said
        summary = report.summary() if report is not None else ""
        if report is not None and now - shown_at >= RESET_VIEW_PERIOD_S:
            self.reset_watch.show(report, self.get_clock().now().nanoseconds)
            shown_at = now
        if report is not None and (summary != said or now - told_at >= RESET_TELL_PERIOD_S):
            for line in report.lines():  # one line per object to move, place or take away
                self.get_logger().warning(f"reset check: {line}")
            self.get_logger().warning(f"the trial starts when the table matches the layout, or call "
                                      f"{tp.SERVICE_OVERRIDE_RESET} to start it anyway (recorded)")
            self._announce({"reset_check": {"ok": False, "lines": report.lines(),
                                            **{k: v for k, v in report.as_dict().items() if k != "objects"}}})
            said, told_at = summary, now
        self._reset_said = (said, told_at, shown_at)
        return True

    def _check_before(self, waited: float) -> None:
        failures = check_health(self.health, self.health_watch.inputs())
        if not failures and ("cameras" not in self.health.checks or self.health_watch.settled()):
            self._health_record = {"before": []}
            self._start_pending()
        elif failures and waited > self.health_timeout_s:
            self._health_record = {"before": [f.as_dict() for f in failures]}
            self._health_fault(failures, "before the trial")

    def _check_after(self) -> None:
        """After the last row: a failure fails the trial (its class decides whether the run halts)."""
        if not self.health.checks:
            return
        failures = check_health(self.health, self.health_watch.inputs(), after=True)
        self._health_record = dict(self._health_record or {}, after=[f.as_dict() for f in failures])
        if failures and self._fault is None:
            self._fault = Fault(FAULT_HEALTH, "after the trial: " + "; ".join(f.line() for f in failures),
                                worst_class(failures) or "")
        self._failures_after = failures

    def _health_fault(self, failures: list[HealthFailure], when: str) -> None:
        fault = Fault(FAULT_HEALTH, f"{when}: " + "; ".join(f.line() for f in failures), worst_class(failures) or "")
        self._record_fault(fault)
        self._halt_on(failures)

    def _halt_on(self, failures: list[HealthFailure]) -> None:
        """A failure of class halt pauses the run and holds the arms; the operator is told what to do."""
        halting = [f for f in failures if f.failure_class == HALT]
        if not halting:
            return
        first = halting[0]
        self.halted = {"check": first.check, "reason": first.reason, "action": first.action}
        self.health_watch.halt(True, first.reason)
        self.get_logger().error(f"run halted, arms holding: {'; '.join(f.reason for f in halting)} -> "
                                f"{first.action}")
        self._announce({"halt": self.halted})

    def _lift_halt(self) -> None:
        if self.halted is None:
            return
        self.get_logger().info(f"halt lifted by the operator ({SERVICE_TRIAL_START}); checking again")
        self.halted = None
        self.health_watch.halt(False)
        self.trial["halt"] = None

    def _start(self, start_stamp_ns: int) -> None:
        """The start state is out (stamped S0): let the scorer acknowledge it first, or run."""
        if self.await_scorer:
            self._publish({"phase": tp.PHASE_STARTING, "start_stamp_ns": int(start_stamp_ns)})
        else:
            self._run(start_stamp_ns)

    def _run(self, start_stamp_ns: int) -> None:
        self.safety.watch(True)
        self._publish({"phase": tp.PHASE_RUNNING, "start_stamp_ns": int(start_stamp_ns)})

    # -- inputs ----------------------------------------------------------------------------------
    def _decoded(self, msg: String, topic: str) -> dict[str, Any] | None:
        try:
            return tp.decode(msg.data, topic)
        except ValueError as exc:  # another publisher's garbage must not stop the protocol
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)
            return None

    def _on_sim_status(self, msg: String) -> None:
        status = self._decoded(msg, tp.TOPIC_SIM_STATUS)
        if status is None:
            return
        if self.phase != tp.PHASE_RESETTING or status.get("trial_id") != self.trial.get("id"):
            return
        if status.get("state") == "ready":
            self._note_renderer_startup(status.get("renderer_startup_s"))
            self._after_reset(int(status["stamp_ns"]))
        elif status.get("state") == "error":
            self._record_fault(Fault(FAULT_GRAPH, f"sim reset failed: {status.get('error')}"))

    def _note_renderer_startup(self, seconds: Any) -> None:
        """run.json's ``renderer_startup_s``, as eval's: the sim node built its renderer before any trial and says
        how long in its first "ready" (absent on a rig, None without rendering)."""
        if self._renderer_noted or not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            return
        self._renderer_noted = True
        self.records.note_run({"renderer_startup_s": float(seconds)})

    def _on_policy_status(self, msg: String) -> None:
        status = self._decoded(msg, tp.TOPIC_POLICY_STATUS)
        if status is None:
            return
        if status.get("trial_id") != self.trial.get("id") or status.get("state") != "done":
            return
        if self.phase in (tp.PHASE_RUNNING, tp.PHASE_STOPPING):
            self._policy_done = status
            if status.get("fault") == FAULT_STALE and self._fault is None:  # the graph's doing, not the policy's
                self._fault = Fault(FAULT_STALE, str(status.get("fault_reason", "joint states stale")))
                self.get_logger().warning(f"trial {self.trial['id']}: {FAULT_STALE}: {self._fault.reason}")
            self.safety.watch(False)
            self._publish({"phase": tp.PHASE_SCORING, "end_stamp_ns": int(status["last_stamp_ns"])})

    def _on_score(self, msg: String) -> None:
        score = self._decoded(msg, TOPIC_SCORE)
        if score is None or score.get("trial_id") != self.trial.get("id"):
            return
        if not score.get("final"):
            self._live = score
        if self.phase == tp.PHASE_STARTING and not score.get("final") and int(score.get("frames", 0)) >= 1:
            self._run(int(self.trial["start_stamp_ns"]))  # the scorer holds frame 0: the rows may come
            return
        if self.phase != tp.PHASE_SCORING or not score.get("final") or score.get("trial_id") != self.trial.get("id"):
            return
        if score.get("result") is None:
            self._record_fault(Fault(FAULT_GRAPH, "the stage monitor scored no frame"))
            return
        self._failures_after = []
        self._check_after()
        self._record(dict(score["result"]))
        self._halt_on(self._failures_after)

    def _on_estop(self, msg: Bool) -> None:
        if not self.safety.on_estop(bool(msg.data)):
            return
        if not msg.data:
            self.get_logger().info(f"e-stop released ({TOPIC_ESTOP}); the run goes on" if not self.paused else
                                   "e-stop released; still paused by the operator (/robofollow/trial/start)")
            self._announce({})
            return
        self.get_logger().error(f"e-stop engaged ({TOPIC_ESTOP}): the run pauses until it is released")
        if self.phase in (*tp.BEFORE_ROWS, *tp.EXECUTING) and self.index >= 0:
            self.interrupt(Fault(FAULT_ESTOP, f"e-stop engaged during the trial ({TOPIC_ESTOP})"))
        else:
            self._announce({})

    def _on_bridge_status(self, msg: String) -> None:
        status = self._decoded(msg, TOPIC_BRIDGE_STATUS)
        if status is not None:
            self.safety.on_bridge_status(status)

    def _on_node_lost(self, name: str, how: str) -> None:
        """A node of the graph died: the trial under way is recorded as a fault, and the run ends.

        A node that *left* (its process ended cleanly) is judged ``PEER_LEFT_GRACE_S`` later, from ``_tick``:
        Ctrl-C reaches every node of the graph at once, and a peer that exits a few milliseconds before this
        node's own signal handler runs is part of that interrupt, not a fault of the run."""
        if how.startswith("left the graph") and self._peer_left is None:
            self._peer_left = (name, how, time.monotonic() + PEER_LEFT_GRACE_S)
            return
        self._end_for_lost_node(name, how)

    def _judge_peer_left(self) -> None:
        if self._peer_left is not None and time.monotonic() >= self._peer_left[2]:
            name, how, _ = self._peer_left
            self._end_for_lost_node(name, how)

    def _end_for_lost_node(self, name: str, how: str) -> None:
        if self.finished.is_set() or (self.stop_signal is not None and self.stop_signal.is_set()):
            return
        reason = f"{name} {how}"
        if self.index >= 0 and self.phase not in (tp.PHASE_DONE, tp.PHASE_IDLE):
            self._record_fault(Fault(FAULT_NODE, reason))
        self._abort(f"the run ended: {reason}", EXIT_TRIALS_FAILED)

    # -- faults ----------------------------------------------------------------------------------
    def interrupt(self, fault: Fault) -> None:
        """End the current trial because of ``fault``: at once before its rows, else through ``stopping``
        (the policy node stops, the scorer scores what ran) and recorded with the fault."""
        if self._fault is None:
            self._fault = fault
        if self.phase in tp.BEFORE_ROWS:
            self._record_fault(self._fault)
        elif self.phase == tp.PHASE_RUNNING:
            self.get_logger().warning(f"trial {self.trial['id']}: {fault.kind}: {fault.reason}; stopping it")
            self._publish({"phase": tp.PHASE_STOPPING, "fault": fault.kind})  # policy_node: do not wait for it
        else:
            self._announce({})

    # -- recording -------------------------------------------------------------------------------
    def _record(self, result: dict[str, Any]) -> None:
        from robofollow_ros.evaluation.episode import fail_result

        done = self._policy_done or {}
        result["policy_steps"] = int(done.get("steps", 0))
        result["rows_executed"] = int(done.get("rows", 0))  # as eval records them: budget_used counts both
        if isinstance(done.get("realtime"), dict):  # rate mode with the real-time executor: its counters,
            result[RESULT_KEY] = counters_record(done["realtime"])  # under eval's name and in its shape
        result["wall_s"] = round(time.monotonic() - self._started_wall, 3)
        self.safety.watch(False)
        holds = self.safety.take_holds()
        if holds:
            result["safety_holds"] = holds
        if self._reset_record is not None:
            result["reset_check"] = self._reset_record
        if self._health_record is not None:
            result["health"] = self._health_record
        if self._fault is not None:  # not the policy's result, whatever the policy node said
            if done.get("error"):
                self.get_logger().warning(f"trial {self.trial['id']}: policy_node also said: {done['error']}")
            result = fault_result(result, self._fault)
        elif done.get("error"):
            result = fail_result(result, str(done["error"]), str(done.get("error_detail", "")))
        key = self._key
        assert key is not None
        result.update(self.controlled.result_fields(key))  # a control's fields, as eval records them
        if self._mark is not None:
            result["operator_mark"] = self._mark
        if self._intervened:  # teleoperation drove some of its frames: the verdict is an assisted one
            result.update(assisted=True, intervened_frames=self._intervened)
        self._end_trial_pause()
        if self._redo_pending:
            self._supersede(result)
            return
        if self._superseded:
            result.update(attempt=self._attempt, superseded_attempts=self._superseded)
        self.records.record(result, self.registry.eval_task(key.task_id), key, replace=self._replaces)
        self._last_key = key
        self._recorded = [*(k for k in self._recorded if k != key), key]
        if result.get("assisted"):
            self.get_logger().warning(f"{self.shown_id(key)}: assisted: teleoperation drove {self._intervened} frames")
        self._tell_disagreement(dict(result, round=key.round))
        self.get_logger().info(f"{self.shown_id(key)}: IS {result['intent_score']:.2f} ES {result['exec_score']:.2f} "
                               f"complete {result['completion_ok']}")
        self._publish({"phase": tp.PHASE_DONE, "intent": result["intent_score"], "exec": result["exec_score"],
                       "complete": result["completion_ok"], "error": result.get("policy_error"),
                       "fault": result.get("fault"), "fault_reason": result.get("fault_reason"),
                       "assisted": bool(result.get("assisted"))})

    def _supersede(self, result: dict[str, Any]) -> None:
        """The operator asked for a redo: keep this attempt (to go inside the redo's entry) and run the trial again."""
        self._superseded.append(dict(result, attempt=self._attempt, superseded_by_redo=True,
                                     trial_id=str(self.trial["id"])))
        self.get_logger().warning(f"trial {self.trial['id']}: attempt {self._attempt} kept as superseded; "
                                  "running the trial again")
        self._redo_pending = False
        assert self._key is not None
        self._redos.insert(0, Redo(self._key, self._replaces, self._attempt + 1, self._superseded))  # at once
        self._publish({"phase": tp.PHASE_DONE, "superseded_by_redo": True, "fault": result.get("fault"),
                       "fault_reason": result.get("fault_reason")})

    def _tell_disagreement(self, entry: dict[str, Any]) -> None:
        from robofollow_ros.evaluation.operator_marks import disagreements

        for line in disagreements([entry]):
            self.get_logger().warning(f"operator mark disagrees with the verdict: {line}")

    def _record_fault(self, fault: Fault) -> None:
        """Record the current trial now, as not executed because of ``fault`` (or the fault already pending)."""
        if self._fault is None:
            self._fault = fault
        self.get_logger().error(f"trial {self.trial['id']} not executed: {self._fault.kind}: {self._fault.reason}")
        self._record(empty_result(self.registry.eval_task(str(self.trial["task"])), self._fault.reason))

    def _finish_run(self) -> None:
        self.records.complete()
        for line in self.controlled.unblinding(self._recorded):  # every verdict and mark is recorded: now it may
            self.get_logger().info(line)
        self._publish({"phase": tp.PHASE_FINISHED, "run_dir": str(self.run_dir)})
        self.get_logger().info(f"all {len(self.plan)} trials done; results in {self.run_dir}")
        if self.print_summary:
            from robofollow_ros.evaluation.report import format_table, run_table

            title = f"{self.policy_label or 'policy'} over ROS — {self.run_dir}"
            self.get_logger().info("\n" + format_table(run_table(self.summary()), title=title))
        if self.records.failed:
            self.exit_code = EXIT_TRIALS_FAILED
            self.get_logger().error(f"{self.records.failed} of {len(self.plan)} trials could not be executed "
                                    "(see policy_error and fault in results.json)")
        self.finished.set()

    def wait_until_heard(self, timeout_s: float = FINISHED_ACK_S) -> bool:
        """Whether every subscriber of the trial state acknowledged the last one within ``timeout_s``."""
        return bool(self.trial_pub.wait_for_all_acked(Duration(nanoseconds=int(timeout_s * 1e9))))

    def _abort(self, reason: str, exit_code: int) -> None:
        """End the run now (before its first trial, or after a node died); what was recorded is kept."""
        self.get_logger().error(reason)
        self.records.fail(reason)
        self._publish({"phase": tp.PHASE_FINISHED, "run_dir": str(self.run_dir), "error": reason})
        self.exit_code = exit_code
        self.finished.set()

    # -- the state machine -----------------------------------------------------------------------
    def _graph_ready(self) -> bool:
        return self.graph_wait.ready()

    def _tick(self) -> None:
        self._judge_peer_left()
        waited = time.monotonic() - self._phase_since
        if self.phase == tp.PHASE_IDLE and not self.paused and not self.finished.is_set() and self.index < 0:
            gave_up = self.graph_wait.overdue()
            if gave_up is not None:
                self._abort(gave_up, EXIT_INTERNAL)
                return
        if self.finished.is_set() or self.trial_paused_since is not None:
            return  # a trial the operator paused waits, its bounds standing still
        if self.phase == tp.PHASE_RESETTING and not self.rig_mode:
            self._tell_sim_reset(waited)
        elif self.phase in _TOLD_PHASES:
            self._tell_trial(waited)
        if self.phase in (tp.PHASE_IDLE, tp.PHASE_DONE) and not self.paused and not self.safety.estop and \
                self.halted is None:
            if self.phase == tp.PHASE_IDLE and self.policy_gate.state != "ok":
                self.policy_gate.poll(self._graph_ready())
                if self.policy_gate.state == "failed":
                    self._abort(self.policy_gate.reason, EXIT_POLICY_UNREACHABLE)
            elif self.phase == tp.PHASE_DONE or self._graph_ready():
                self._begin_next()
        elif self.phase == tp.PHASE_AWAITING_CONFIRM and self._confirmed.is_set():
            self._after_reset(None)
        elif self.phase == tp.PHASE_VERIFYING_RESET and self._verify_reset(waited):
            return
        elif self.phase == tp.PHASE_CHECKING:
            self._check_before(waited)
        elif self.phase == tp.PHASE_RUNNING and self.trial_timeout_s and waited > self.trial_timeout_s:
            # the trial's time budget, as its step budget: the trial ends and is scored (the policy's result)
            self.get_logger().warning(f"trial {self.trial['id']} ran {self.trial_timeout_s} s; stopping it")
            self._publish({"phase": tp.PHASE_STOPPING})
        elif (overrun := self.bounds.overrun(self.phase, waited, self.rig_mode)) is not None:
            self._record_fault(overrun)

    def _tell_sim_reset(self, waited: float) -> None:
        """A line every SIM_RESET_TELL_PERIOD_S while sim_node resets, so the wait before a trial is never silent
        (a reset takes about a second; sim_node builds its renderer at start, before the graph is up)."""
        told = int(waited // SIM_RESET_TELL_PERIOD_S)
        if told > 0 and self._sim_reset_told != (self._phase_since, told):
            self._sim_reset_told = (self._phase_since, told)
            self.get_logger().info(f"trial {self.trial.get('id')}: waiting for sim_node's reset, "
                                   f"{told * SIM_RESET_TELL_PERIOD_S:.0f} s so far (it rebuilds and settles the "
                                   "scene)")

    def _tell_trial(self, waited: float) -> None:
        """A line every TRIAL_TELL_PERIOD_S while a trial starts, runs, stops or is scored: a real-time trial runs
        on the wall clock (a minute or more), and nothing else is said until it ends."""
        told = int(waited // TRIAL_TELL_PERIOD_S)
        if told <= 0 or self._trial_told == (self._phase_since, told):
            return
        self._trial_told = (self._phase_since, told)
        live = self._live if self._live.get("trial_id") == self.trial.get("id") else {}
        scored = (f" ({int(live.get('frames', 0))} frames scored, IS {float(live.get('intent', 0.0)):.2f} "
                  f"ES {float(live.get('exec', 0.0)):.2f})") if live else ""
        self.get_logger().info(f"trial {self.trial.get('id')}: {_TOLD_PHASES[self.phase]}, "
                               f"{told * TRIAL_TELL_PERIOD_S:.0f} s so far{scored}")

    def summary(self) -> dict[str, Any]:
        return self.records.summary()

    def destroy_node(self) -> None:
        keys = getattr(self, "key_reader", None)  # not set when __init__ failed half-way
        if keys is not None:
            keys.close()
        if hasattr(self, "records"):
            if self.records.running:
                self.records.fail("interrupted before all trials ran")
            self.records.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    """Run until the trials end, then exit with the run's status (the launch files shut down with it)."""
    code = EXIT_OK
    stopped = False
    try:
        with stop_on_signals() as stop, ros_init(args=args, signal_handler_options=SignalHandlerOptions.NO):
            node = build_node(TrialManagerNode)
            node.stop_signal = stop
            try:
                while rclpy.ok() and not node.finished.is_set() and not stop.is_set():
                    rclpy.spin_once(node, timeout_sec=0.1)
                if not stop.is_set():
                    code = node.exit_code
                    if not node.wait_until_heard():
                        node.get_logger().warning(f"a subscriber had not acknowledged the run's end after "
                                                  f"{FINISHED_ACK_S:g} s; exiting anyway")
            finally:
                stop.noticed()
                node.destroy_node()
            stopped = stop.is_set()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass  # Ctrl-C (SIGINT/SIGTERM): run.json says "interrupted"; a clean exit, as every node's
    if stopped:  # run.json written and the store closed (destroy_node): leave now, as every node does
        leave_after_stop(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
