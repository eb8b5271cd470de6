"""policy_node: observations → any policy adapter (``hold``, ``module:function``, ``tcp://``, ``openpi://``)
→ ``/robofollow/joint_command``.

One trial runs exactly like the headless episode: ``reset`` → ``set_instruction`` → up to
``max_steps`` × (observation → ``predict`` → the first ``actions_per_step`` rows). ``mode`` decides
how rows are paced: ``lockstep`` (sim) sends a row only once the state that follows the previous
row has arrived, so every row is executed and observed exactly once; ``rate`` (rig) sends rows at
``control_hz``, and stops and holds the measured position when the joint states go stale.

Cameras are subscribed with sensor-data QoS by default (best effort: it matches a camera driver's
best-effort publisher as well as a reliable one); the sim profile asks for ``reliable`` so that no
picture rendered for a lock-step observation is dropped. ``/robofollow/policy/check`` (Trigger)
connects to the policy and resets it once (``preflight.reach_policy``): the trial manager calls it
before the first trial, so an unreachable server fails the run in seconds.

Every policy call (``reset``, ``set_instruction``, ``predict``), in-process or remote, is bounded by
``policy_timeout_s``, with ``robofollow eval --policy-timeout``'s meaning and default
(``policy.guard.TimeoutGuardedPolicy``): a call that overruns fails its trial with eval's
``policy_error`` (``PolicyTimeoutError: policy predict: no answer within S s``). Python cannot stop
the thread, so the stuck call is left running and the next trial gets a fresh policy (a fresh
session for a remote one). A trial stopped by its time budget (``stopping`` without a ``fault``) sends
no more rows but lets the call in flight answer or time out, as ``robofollow eval`` would; one ended
by a fault (``stopping`` with a ``fault``: an e-stop, the operator), or left behind (a new trial, a
phase past ``stopping``), abandons the call in flight at once — not the policy's failure.

The observation is the one every path builds (``policy.observation.contract_observation``): the three
cameras' RGB, the joint vector and the instruction. ``obs["privileged"]`` (the trial's task id and the
objects on ``/robofollow/objects``) is added only for a policy that receives it: a built-in that declares
it (``oracle``, ``blind``), in this process, or any policy when the ``privileged`` parameter is true
(``robofollow bringup --privileged``, ``privileged:=true``); a ``tcp://`` client forwards it only then.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from robofollow_ros.contract import (
    CAMERA_NAMES,
    CAMERA_OBS_KEYS,
    TOPIC_JOINT_COMMAND,
    TOPIC_JOINT_STATES,
    TOPIC_OBJECTS,
    TOPIC_TRIAL,
    camera_image_topic,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import Bounds, ParameterSet, one_of, positive
from robofollow_ros.nodes.conversions import (
    MessageError,
    image_array,
    joint_state_msg,
    joint_vector,
    objects_from_markers,
    stamp_ns,
)
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.nodes.observation_cache import ObservationCache, RobotState
from robofollow_ros.nodes.rclpy_compat import InvalidHandle
from robofollow_ros.nodes.trial_faults import FAULT_STALE
from robofollow_ros.policy.execution import MERGE_RULES, RealtimeChunkExecutor, policy_submit
from robofollow_ros.policy.expert.dense import rate_kwargs
from robofollow_ros.policy.guard import (
    DEFAULT_POLICY_TIMEOUT_S,
    PolicyAbandonedError,
    TimeoutGuardedPolicy,
    close_guarded,
    guarded_kwargs,
)
from robofollow_ros.policy.interface import receives_privileged
from robofollow_ros.policy.observation import contract_observation, privileged_extension

_seconds = Bounds(low=0, low_open=True, rule="must be a positive number of seconds")
_non_negative = Bounds(low=0, rule="must be a number >= 0")
_finite = Bounds(rule="must be a finite number")
_threshold = Bounds(low=-1, integer=True, rule="must be an integer >= -1 (-1: actions_per_step // 2)")
_unit = Bounds(low=0, high=1, rule="must be in 0..1")
_count = Bounds(low=0, integer=True, rule="must be an integer >= 0")

#: How often the trial thread's waits on another node look whether the node is stopping (s).
STOP_POLL_S = 0.05
#: Longest wait in ``destroy_node`` for the trial thread to end (s): every node stops within 2 s of SIGINT.
STOP_JOIN_S = 0.5


def _json_object(value: Any) -> str | None:
    try:
        return None if isinstance(json.loads(value), dict) else "must be a JSON object"
    except (TypeError, json.JSONDecodeError) as exc:
        return f"must be a JSON object ({exc})"


class PolicyNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("policy_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        spec = params.declare("policy", "hold", "policy SPEC: hold | oracle | module:function | tcp://H:P | openpi://H:P",
                              read_only=True)
        policy_kwargs = params.declare("policy_kwargs", "{}", "JSON keyword arguments for the policy factory",
                                       _json_object, read_only=True)
        self.mode = params.declare("mode", "lockstep", "row pacing: lockstep (sim) | rate (rig, control_hz)",
                                   one_of("lockstep", "rate"))
        self.control_hz = params.declare("control_hz", 50.0, "rows per second in rate mode", positive)
        self.state_timeout_s = params.declare(
            "state_timeout_s", 30.0, "lockstep: longest wait for the state after a row before the trial fails, s",
            positive)
        self.stale_s = params.declare("stale_s", 0.2, "rate: joint states older than this are stale (hold), s",
                                      positive)
        self.policy_stale_s = params.declare(
            "policy_stale_s", 0.5, "rate: hold the measured position while a predict runs longer than this, s",
            positive)
        self.execution = params.declare(
            "execution", "sync", "rate: sync (predict, send the rows, predict again) | realtime (the next chunk "
            "is requested while rows still run; policy.execution.RealtimeChunkExecutor)", one_of("sync", "realtime"))
        self.merge = params.declare("merge", "latest", "realtime: how overlapping chunks merge: "
                                    + " | ".join(MERGE_RULES), one_of(*MERGE_RULES))
        self.threshold = params.declare("threshold", -1, "realtime: request the next chunk when at most this many "
                                        "rows are queued (raised to the measured delay; -1: actions_per_step // 2)",
                                        _threshold)
        self.max_step_rad = params.declare("max_step_rad", 0.0, "realtime: largest change of any joint per tick "
                                           "relative to the previous command, rad (0: off; the arm bridge's clamp "
                                           "stays the last word)", _non_negative)
        self.weight = params.declare("weight", 0.7, "realtime, merge weighted: the new chunk's weight (0..1)",
                                     _unit)
        self.ensemble_coeff = params.declare("ensemble_coeff", 0.01, "realtime, merge ensemble: ACT's m in "
                                             "exp(-m*i), i = 0 the oldest prediction (m < 0 favours newer ones)",
                                             _finite)
        self.warmup = params.declare("warmup", 1, "realtime: first policy calls left out of the delay estimate",
                                     _count)
        self.request_images = params.declare(
            "request_images", False, "lock-step: ask sim_node to render the current state before each predict "
                                     "(the observation's pictures then match the headless evaluator's)")
        self.privileged_flag = params.declare(
            "privileged", False, "hand any policy obs['privileged'] (task id, objects from /robofollow/objects), "
            "also over tcp:// (robofollow bringup --privileged); false: only a declaring built-in (oracle, "
            "blind) gets it, in this process", read_only=True)
        camera_qos = params.declare("camera_qos", "sensor_data", "camera subscriptions: sensor_data (best effort; "
                                    "matches any camera driver) or reliable (no picture dropped)",
                                    one_of("sensor_data", "reliable"))
        self.policy_timeout_s = params.declare(
            "policy_timeout_s", DEFAULT_POLICY_TIMEOUT_S, "longest policy call (reset, set_instruction, predict) "
            "before the trial fails, s (as robofollow eval --policy-timeout)", _seconds, read_only=True)

        self.spec, self.policy_kwargs = spec, rate_kwargs(spec, json.loads(policy_kwargs), self.mode, self.control_hz)
        if self.policy_kwargs != json.loads(policy_kwargs):
            self.get_logger().info(f"rate mode: {spec} emits dense rows at {self.policy_kwargs['dense_hz']} Hz and "
                                   "grips only once the arm is measured at the pose (dense_hz, settle; "
                                   "policy.expert.dense)")
        self.policy = self._build_policy()
        #: Observations carry ``privileged`` (and lock-step waits for the objects of each state).
        self.privileged = receives_privileged(self.policy)
        self.cache = ObservationCache()
        self.command = self.create_publisher(JointState, TOPIC_JOINT_COMMAND, tp.STATE_STREAM)
        self.status = self.create_publisher(String, tp.TOPIC_POLICY_STATUS, tp.LATCHED_STATE)
        self.create_subscription(JointState, TOPIC_JOINT_STATES, self._on_joints, tp.STATE_STREAM)
        self.create_subscription(MarkerArray, TOPIC_OBJECTS, self._on_objects, tp.STATE_STREAM)
        image_qos = qos_profile_sensor_data if camera_qos == "sensor_data" else 5
        for camera in CAMERA_NAMES:
            self.create_subscription(Image, camera_image_topic(camera), functools.partial(self._on_image, camera),
                                     image_qos)
        self.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)
        self.create_service(Trigger, tp.SERVICE_POLICY_CHECK, self._on_check)
        self.render_client: Any = self.create_client(Trigger, tp.SERVICE_SIM_RENDER)
        self._trial_id: str | None = None
        self._cancel = threading.Event()  # the trial sends no more rows
        self._abandon = threading.Event()  # ... and does not wait for the policy call in flight either
        self._worker: threading.Thread | None = None
        self._node_closing = threading.Event()
        #: Cleared while the operator pauses the trial (``operator_pause`` on /robofollow/trial): no call, no row.
        self._go_on = threading.Event()
        self._go_on.set()
        self._predict_since: float | None = None  # monotonic start of the running predict (rate mode)
        self._held_for_policy = False
        if self.mode == "rate":
            self.create_timer(0.02, self._watch_policy)

    def _build_policy(self) -> TimeoutGuardedPolicy:
        from robofollow_ros.policy.spec import load_policy

        kwargs = guarded_kwargs(self.spec, self.policy_kwargs, self.policy_timeout_s)
        return TimeoutGuardedPolicy(load_policy(self.spec, kwargs, privileged=self.privileged_flag),
                                    self.policy_timeout_s)

    def _policy_for_trial(self) -> TimeoutGuardedPolicy:
        """The policy, or a fresh one while a call of the last one that timed out (or was abandoned) still runs."""
        if self.policy.stuck:
            self.get_logger().warning("the policy is still inside a call that timed out or was abandoned; "
                                      "this trial gets a fresh policy")
            close_guarded(self.policy)
            self.policy = self._build_policy()
        return self.policy

    # -- inputs ----------------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        try:
            self.cache.put_joints(stamp_ns(msg.header.stamp), joint_vector(msg))
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)

    def _on_objects(self, msg: MarkerArray) -> None:
        try:
            self.cache.put_objects(*objects_from_markers(msg))
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)

    def _on_image(self, camera: str, msg: Image) -> None:
        try:
            self.cache.put_image(camera, stamp_ns(msg.header.stamp), image_array(msg))
        except (MessageError, ValueError) as exc:
            self.get_logger().error(f"{camera}: {exc}", throttle_duration_sec=5.0)

    def _on_trial(self, msg: String) -> None:
        trial = tp.decode_or_log(msg.data, TOPIC_TRIAL, self.get_logger())
        if trial is None:
            return
        phase = trial.get("phase")
        if trial.get("operator_pause"):
            self._go_on.clear()
        else:
            self._go_on.set()
        if trial.get("id") != self._trial_id and self._worker is not None:
            self._cancel.set()  # a new trial (or a stop) ends the old one
            self._abandon.set()
        if phase not in (tp.PHASE_RUNNING, tp.PHASE_RESETTING) and trial.get("id") == self._trial_id:
            self._cancel.set()  # stopping, or (for a node that joined late) a trial already past running
            if phase != tp.PHASE_STOPPING or trial.get("fault"):
                self._abandon.set()  # ended by a fault, or given up: do not wait for the policy
            self.cache.wake()
        if phase == tp.PHASE_RUNNING and trial.get("id") != self._trial_id:
            # The old trial thread, if any, is cancelled: it abandons its policy call and sends no more
            # rows. It is not joined here, where waiting would hold up this node's callbacks.
            if self._node_closing.is_set():
                return
            if not all(isinstance(trial.get(k), int) for k in ("max_steps", "actions_per_step")):
                # Not our trial manager's message (another graph on this domain, an old version): never a crash
                # in a thread; the trial manager's own bound ends a trial nobody runs.
                self.get_logger().error(f"{TOPIC_TRIAL}: a running trial without integer max_steps/actions_per_step "
                                        f"(max_steps={trial.get('max_steps')!r}, actions_per_step="
                                        f"{trial.get('actions_per_step')!r}): ignored", throttle_duration_sec=5.0)
                return
            self._trial_id = str(trial["id"])
            self._cancel, self._abandon = threading.Event(), threading.Event()
            worker = threading.Thread(target=self._run_trial, args=(trial, self._cancel, self._abandon),
                                      daemon=True)
            worker.start()
            self._worker = worker  # only a started thread is ever joined

    # -- one trial -------------------------------------------------------------------------------
    def _report(self, trial_id: str, state: str, **extra: Any) -> None:
        if self._node_closing.is_set():  # a trial thread outliving the node's teardown has no one to tell
            return
        with contextlib.suppress(InvalidHandle):  # destroyed between the check and the publish
            self.status.publish(String(data=tp.encode({"trial_id": trial_id, "state": state, **extra})))

    def _run_trial(self, trial: dict[str, Any], cancelled: threading.Event, abandon: threading.Event) -> None:
        trial_id, start = str(trial["id"]), int(trial.get("start_stamp_ns", 0))
        max_steps, per_step = int(trial["max_steps"]), int(trial["actions_per_step"])
        self._report(trial_id, "running")
        steps = rows = 0
        error, detail = None, ""
        fault: dict[str, str] = {}  # the states went stale: not the policy's failure (trial_faults.FAULT_STALE)
        lockstep = self.mode == "lockstep"
        state = self.cache.wait_state(start, lockstep and self.privileged, self.state_timeout_s, cancelled)
        policy = self.policy
        try:
            policy = self._policy_for_trial()
            policy.abandon_when = abandon  # a fault or a new trial ends the wait for a call in flight
            policy.reset()
            policy.set_instruction(str(trial["instruction"]))
        except PolicyAbandonedError:
            pass  # stopped meanwhile: not the policy's failure
        except Exception as exc:  # any policy failure fails this trial, not the node
            error, detail = f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)
        if state is None and error is None and not cancelled.is_set():
            error = f"no state at or after the trial start within {self.state_timeout_s} s"
        if state is not None and not lockstep and self.privileged:
            # Objects observed since this trial started: an earlier trial's table must not be planned on.
            if not self.cache.wait_any_objects(self.state_timeout_s, cancelled, start) and error is None:
                error = f"no {TOPIC_OBJECTS} (perception) within {self.state_timeout_s} s; privileged is on"
            state = self.cache.latest(True) or state
        last = state.stamp_ns if state is not None else start
        if not lockstep and self.execution == "realtime":
            if error is None and state is not None:
                steps, rows, last, error, detail, extra = self._run_realtime(trial, state, start, policy, cancelled,
                                                                             abandon)
            else:
                extra = {}
            self._report(trial_id, "done", steps=steps, rows=rows, last_stamp_ns=last, error=error,
                         error_detail=detail, **extra)
            return
        for _ in range(max_steps if error is None and state is not None else 0):
            if cancelled.is_set() or state is None:
                break
            if lockstep and self.request_images:
                error = self._render(state.stamp_ns, cancelled)
                if error is not None or cancelled.is_set():  # a stop ended the wait for the pictures
                    break
            if self._held_by_operator(cancelled) and not lockstep:
                state = self.cache.latest(self.privileged) or state  # the arm held meanwhile: act on where it is
            self._predict_since, self._held_for_policy = time.monotonic(), False
            try:
                actions = policy.predict(self._observation(trial, state, start))
            except PolicyAbandonedError:
                break  # stopped meanwhile: the call runs on, the trial ends without blaming the policy
            except Exception as exc:  # raising, timed-out or malformed policy
                error, detail = f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)
                break
            finally:
                self._predict_since = None
            steps += 1
            for row in np.asarray(actions)[:per_step]:
                if self._held_by_operator(cancelled) and not lockstep:
                    state = self.cache.latest(self.privileged) or state
                if cancelled.is_set():
                    break
                if not lockstep and self._stale():
                    fault = self._stale_fault()
                    break
                previous = state.stamp_ns
                # Stamped with the newest state this node has (lock-step: the one the row answers): the arm
                # bridge refuses, after a watchdog hold, a command no newer than the states before it.
                latest = None if lockstep else self.cache.latest(self.privileged)
                stamp = max(previous, latest.stamp_ns) if latest is not None else previous
                self.command.publish(joint_state_msg(np.asarray(row, dtype=np.float64), stamp))
                rows += 1
                if lockstep:
                    # Even when stopped meanwhile, the row sent is executed: wait for its state so
                    # the scorer's last frame is the arm's last move.
                    state = self.cache.wait_state(previous + 1, self.privileged, self.state_timeout_s,
                                                  self._node_closing)
                    if state is None:
                        if not self._node_closing.is_set():
                            error = f"sim did not answer row {rows} within {self.state_timeout_s} s"
                        break
                else:
                    cancelled.wait(1.0 / self.control_hz)  # the control rate itself, not a synchronisation
                    state = self.cache.latest(self.privileged) or state
                last = state.stamp_ns
            if error is not None or fault:
                break
        self._report(trial_id, "done", steps=steps, rows=rows, last_stamp_ns=last, error=error,
                     error_detail=detail, **fault)

    def _held_by_operator(self, cancelled: threading.Event) -> bool:
        """Wait while the operator pauses the trial (or until it is cancelled); True when it waited."""
        if self._go_on.is_set():
            return False
        while not self._go_on.wait(0.1) and not cancelled.is_set() and not self._node_closing.is_set():
            pass  # bounded by the trial's end: a cancel (abort, redo, stop, a new trial) ends the wait
        return True

    def _run_realtime(self, trial: dict[str, Any], state: RobotState, start: int, policy: TimeoutGuardedPolicy,
                      cancelled: threading.Event, abandon: threading.Event
                      ) -> tuple[int, int, int, str | None, str, dict[str, Any]]:
        """Rate mode with the real-time executor: one tick per ``1/control_hz``; (steps, rows, last stamp,
        error, detail, the done report's extra fields)."""
        max_steps, per_step = int(trial["max_steps"]), int(trial["actions_per_step"])
        inner_submit, close_pool = policy_submit(policy)
        futures: list[Any] = []

        def submit(obs: Any, hint: Any) -> Any:
            futures.append(inner_submit(obs, hint))  # the last one is awaited when a stop ends the trial
            return futures[-1]

        executor = RealtimeChunkExecutor(
            submit=submit, actions_per_step=per_step, threshold=None if self.threshold < 0 else self.threshold,
            merge=self.merge, weight=self.weight, ensemble_coeff=self.ensemble_coeff,
            control_dt_s=1.0 / self.control_hz, clock=time.monotonic, warmup=self.warmup,
            max_step=self.max_step_rad or None)
        executor.reset(hold=state.vector)
        rows, error, detail = 0, None, ""
        extra_fault: dict[str, str] = {}
        last = state.stamp_ns
        chunk_ticks: list[int] = []  # ticks on which a chunk arrived: its first row (merged) was sent then
        hold_ticks: list[int] = []
        try:
            for tick_index in range(max_steps * per_step):
                self._held_by_operator(cancelled)
                if cancelled.is_set():
                    break
                if self._stale():
                    extra_fault = self._stale_fault()
                    break
                try:
                    tick = executor.tick(tick_index, functools.partial(self._observation, trial, state, start))
                except PolicyAbandonedError:
                    break  # stopped meanwhile: not the policy's failure
                except Exception as exc:  # raising, timed-out or malformed policy
                    error, detail = f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)
                    break
                if executor.stats.chunks > len(chunk_ticks):
                    chunk_ticks.append(tick_index)
                if tick.hold:
                    hold_ticks.append(tick_index)
                if tick.row is not None:  # a hold repeats the previous command (absolute position control)
                    self.command.publish(joint_state_msg(np.asarray(tick.row, dtype=np.float64), state.stamp_ns))
                    rows += 0 if tick.hold else 1
                if executor.stats.requests > max_steps:
                    break  # the step budget is spent: the request this tick sent is not the trial's any more
                cancelled.wait(1.0 / self.control_hz)  # the control rate itself, not a synchronisation
                state = self.cache.latest(self.privileged) or state
                last = state.stamp_ns
            if cancelled.is_set() and not abandon.is_set() and error is None and futures and not futures[-1].done():
                # Stopped by the time budget: the call in flight answers or times out, as robofollow eval's would.
                with contextlib.suppress(Exception):
                    futures[-1].exception(timeout=self.policy_timeout_s + 5.0)
                failure = futures[-1].exception() if futures[-1].done() else None
                if failure is not None and not isinstance(failure, PolicyAbandonedError):
                    error = f"{type(failure).__name__}: {failure}"
        finally:
            close_pool()
        stats = executor.stats
        # One command per tick, in order: tick i is the i-th /robofollow/joint_command of the trial.
        extra = {"execution": executor.describe(),
                 "realtime": {**stats.as_dict(), "chunk_ticks": chunk_ticks, "hold_tick_list": hold_ticks},
                 **extra_fault}
        return stats.chunks + stats.late_chunks, rows, last, error, detail, extra

    def _render(self, stamp_ns: int, cancelled: threading.Event) -> str | None:
        """Have sim_node render the state at ``stamp_ns`` and wait for its three pictures; an error or None.

        A sim without rendering answers "rendering is off": the observation then has no pictures,
        as ``robofollow eval --no-render`` gives none."""
        if not self._wait_unless_stopped(self.render_client.service_is_ready, cancelled):
            return None if self._stopped(cancelled) else (f"no {tp.SERVICE_SIM_RENDER} service within "
                                                          f"{self.state_timeout_s} s")
        answered = threading.Event()
        future = self.render_client.call_async(Trigger.Request())
        future.add_done_callback(lambda _f: answered.set())
        reply: Any = future.result() if self._wait_unless_stopped(answered.is_set, cancelled) else None
        if reply is None:
            return None if self._stopped(cancelled) else (f"{tp.SERVICE_SIM_RENDER} did not answer within "
                                                          f"{self.state_timeout_s} s")
        if not reply.success:
            return None
        if reply.message != str(stamp_ns):
            return f"{tp.SERVICE_SIM_RENDER} rendered the state at {reply.message} ns, expected {stamp_ns} ns"
        if not self.cache.wait_images(stamp_ns, CAMERA_NAMES, self.state_timeout_s, cancelled):
            return None if cancelled.is_set() else f"camera pictures at {stamp_ns} ns did not arrive"
        return None

    def _stopped(self, cancelled: threading.Event) -> bool:
        return cancelled.is_set() or self._node_closing.is_set()

    def _wait_unless_stopped(self, done: Callable[[], bool], cancelled: threading.Event) -> bool:
        """Wait up to ``state_timeout_s`` for ``done()``, ending at once when the trial is cancelled or the node
        closes; True when it is done. A stop signal must not wait for sim_node's render: stopped at the same
        moment, it never answers (policy_node waited 5 s more for it, its teardown's join, after a Ctrl-C)."""
        deadline = time.monotonic() + self.state_timeout_s
        while not self._stopped(cancelled):  # checked first: a closing node's client is not asked again
            if done():
                return True
            if time.monotonic() >= deadline:
                return False
            self._node_closing.wait(STOP_POLL_S)  # the node's close wakes it at once
        return False

    def _observation(self, trial: dict[str, Any], state: RobotState, start: int) -> dict[str, Any]:
        images = self.cache.images(start)
        seen = {"observation": {CAMERA_OBS_KEYS[c]: {"rgb": images.get(c)} for c in CAMERA_NAMES},
                "joint_action": {"vector": state.vector.copy()}}
        privileged = (privileged_extension(str(trial["task"]), state.objects, state.object_quats)
                      if self.privileged else None)
        return contract_observation(seen, str(trial["instruction"]), privileged=privileged)

    def _on_check(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        from robofollow_ros.policy.spec import PolicySpecError
        from robofollow_ros.preflight import PolicyUnreachable, reach_policy

        try:
            reach_policy(self.spec, self.policy_kwargs, privileged=self.privileged_flag)
        except (PolicyUnreachable, PolicySpecError) as exc:
            res.success, res.message = False, str(exc)
            return res
        res.success, res.message = True, f"policy {self.spec} reached"
        return res

    def _stale(self) -> bool:
        latest = self.cache.latest(False)
        return latest is None or time.monotonic() - latest.received > self.stale_s

    def _stale_fault(self) -> dict[str, str]:
        """Hold the measured position; the done report's fault: the states went stale, not the policy's doing."""
        self._hold("observations stale")
        return {"fault": FAULT_STALE, "fault_reason": f"joint states stale for more than {self.stale_s} s; "
                                                      "held the measured position"}

    def _hold(self, why: str) -> None:
        latest = self.cache.latest(False)
        if latest is not None:
            self.command.publish(joint_state_msg(latest.vector, latest.stamp_ns))
        self.get_logger().warning(f"{why}: holding the measured position")

    def _watch_policy(self) -> None:
        """Rate mode: a predict that runs past ``policy_stale_s`` leaves the arm commanded to stay put."""
        since = self._predict_since
        if since is not None and not self._held_for_policy and time.monotonic() - since > self.policy_stale_s:
            self._held_for_policy = True
            self._hold(f"policy stale (predict running for more than {self.policy_stale_s} s)")

    def destroy_node(self) -> None:
        if hasattr(self, "_node_closing"):  # not when __init__ failed half-way (a rejected parameter)
            self._node_closing.set()
            self._abandon.set()  # before the cancel: a cancelled trial that is not abandoned waits for its call
            self._cancel.set()
            self.cache.wake()
            if self._worker is not None:
                # Every wait of the trial thread ends on these events within STOP_POLL_S; should it still be busy
                # (a callback of the policy's own), it is left to end with the process.
                self._worker.join(timeout=STOP_JOIN_S)
        if hasattr(self, "policy"):
            close_guarded(self.policy)
        super().destroy_node()


#: GIL switch interval of the node process: the trial thread waits on the executor thread's
#: callbacks, and Python's default 5 ms hand-over would show up as command latency.
SWITCH_INTERVAL_S = 0.0005


def main(args: list[str] | None = None) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    run_node(PolicyNode, args)


if __name__ == "__main__":
    main()
