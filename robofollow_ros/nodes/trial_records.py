"""The trial manager's helpers: its results (``RunWriter`` on its own thread, and what the exit status
needs), the policy gate before the first trial, and when the graph is ready.

SQLite connections belong to the thread that opened them, while executor callbacks run on any
thread, so every write goes through one worker thread. Trials that could not be executed (a
policy error, or a fault: an e-stop, an operator's stop, a dead node, a phase past its bound) are
counted: they make the run's exit status ``EXIT_TRIALS_FAILED``, distinct from a run whose trials
ran and scored low.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.contract import TOPIC_JOINT_COMMAND, TOPIC_JOINT_STATES, TOPIC_TRIAL
from robofollow_ros.evaluation.progress import QUIET_S
from robofollow_ros.evaluation.selection import TrialKey

#: Awaited nodes that never read /robofollow/trial, and the input they must be seen on instead (the arm
#: bridge only forwards commands; the robot state publisher only turns joint states into TF).
NODE_INPUTS = {"arm_bridge_node": TOPIC_JOINT_COMMAND, "robot_state_node": TOPIC_JOINT_STATES}


def graph_ready(node: Any, wait_for_nodes: list[str]) -> bool:
    """Every awaited node is up and, where it follows the trial, its trial subscription is discovered.

    A node's name shows before its endpoints are matched; a recorder or scorer that joined after the
    first rows would miss them, so the nodes that read ``/robofollow/trial`` must be seen on it (the
    others on their input, ``NODE_INPUTS``).
    """
    names = set(node.get_node_names())
    readers: dict[str, set[str]] = {}

    def reads(name: str) -> bool:
        topic = NODE_INPUTS.get(name, TOPIC_TRIAL)
        if topic not in readers:
            readers[topic] = {info.node_name for info in node.get_subscriptions_info_by_topic(topic)}
        return name in readers[topic]

    return all(n in names and reads(n) for n in wait_for_nodes)


def empty_result(task: EvalTask, why: str) -> dict[str, Any]:
    """The results entry of a trial that produced no scored frame (``why`` in its messages)."""
    return {"task": task.task_id, "instruction": task.instruction, "intent_ok": False, "intent_msg": why,
            "exec_ok": False, "exec_msg": why, "completion_ok": False, "intent_score": 0.0,
            "exec_score": 0.0, "phases": []}


class TrialRecords:
    def __init__(self, run_dir: Path, arguments: dict[str, Any], selected_tasks: tuple[tuple[str, str], ...],
                 expected_trials: int, stepper: str, model: str, extra: dict[str, Any] | None = None) -> None:
        from robofollow_ros.evaluation.results import RunWriter

        self.run_dir = run_dir
        self.failed = 0
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="results")
        self.writer = self._call(RunWriter, run_dir, arguments=arguments, selected_tasks=selected_tasks,
                                 expected_trials=expected_trials, stepper=stepper,
                                 # eval's fields: the sim node builds its renderer when it starts, before any trial
                                 # (no trial's wall_s holds it); its first "ready" says how long (note_run)
                                 metadata_extra={"model": model or "unknown", "runtime_graph": "ros2",
                                                 "renderer_startup_s": None, **(extra or {})})

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return self._thread.submit(function, *args, **kwargs).result()

    def record(self, result: dict[str, Any], task: EvalTask, key: TrialKey, replace: bool = False) -> None:
        """Record a trial; ``replace``: it was recorded and has been run again (the old entry's failure, if it
        was one, no longer counts)."""
        from robofollow_ros.nodes.trial_faults import could_not_execute

        old = self.entry(key) if replace else None
        if old is not None and could_not_execute(old):
            self.failed -= 1
        if could_not_execute(result):
            self.failed += 1
        self._call(self.writer.record_trial, result, task=task, round_index=key.round, seed=key.seed, replace=replace)

    def entry(self, key: TrialKey) -> dict[str, Any] | None:
        """The recorded results entry of ``key`` (a copy), None when it is not recorded."""
        found = self._call(self.writer.recorded_entry, key.task_id, key.round, key.control)
        return None if found is None else dict(found)

    def annotate(self, key: TrialKey, fields: dict[str, Any]) -> None:
        self._call(self.writer.annotate_trial, key.task_id, key.round, fields, key.control)

    def note_run(self, fields: dict[str, Any]) -> None:
        self._call(self.writer.note_run, fields)

    def complete(self) -> None:
        self._call(self.writer.complete)

    def fail(self, reason: str) -> None:
        self._call(self.writer.fail, reason)

    def summary(self) -> dict[str, Any]:
        return dict(self._call(self.writer.summary))

    @property
    def running(self) -> bool:
        return bool(self.writer.run["status"] == "running")

    def close(self) -> None:
        self._thread.shutdown()


class PolicyGate:
    """Before the first trial: ``policy_node`` reaches its policy (connect + reset) through a Trigger service.

    ``state``: ``waiting`` (graph not up yet) → ``pending`` (asked) → ``ok`` or ``failed`` (``reason``).
    """

    def __init__(self, node: Any, service: str, enabled: bool, timeout_s: float) -> None:
        from std_srvs.srv import Trigger

        self._request = Trigger.Request
        self._client = node.create_client(Trigger, service)
        self._service, self._timeout_s = service, timeout_s
        self._logger = node.get_logger()
        self.state = "waiting" if enabled else "ok"
        self.reason = ""
        self._since = 0.0
        self._told = time.monotonic()  # when the wait was last told (or began)

    def poll(self, graph_ready: bool) -> None:
        now = time.monotonic()
        if self.state == "waiting" and graph_ready and self._client.service_is_ready():
            self.state, self._since = "pending", now
            self._client.call_async(self._request()).add_done_callback(self._answered)
        elif self.state == "pending" and now - self._since > self._timeout_s:
            self.state, self.reason = "failed", f"{self._service}: no answer within {self._timeout_s} s"
        elif not graph_ready:
            self._told = now  # the graph wait tells its own
        elif now - self._told >= QUIET_S:
            # the first trial waits for this: a remote model's first reset can take minutes (weights loading)
            self._told = now
            what = "policy_node to reach its policy (connect + reset)" if self.state == "pending" else \
                f"policy_node's {self._service} service"
            self._logger.info(f"waiting for {what} before the first trial")

    def _answered(self, future: Any) -> None:
        reply = future.result()
        if self.state != "pending":
            return
        if reply is not None and reply.success:
            self._logger.info(str(reply.message))
            self.state = "ok"
        else:
            self.state = "failed"
            self.reason = str(reply.message) if reply is not None else f"{self._service} failed"


def ros_run_arguments(trials: str, plan: Any, *, max_steps: int, actions_per_step: int, stepper: str, output: str,
                      policy: str, kwargs: Any, policy_timeout_s: float, render: bool | None, rig_mode: bool,
                      privileged: bool, execution: Any) -> dict[str, Any]:
    """run.json's ``arguments`` of a run of the graph: the official evaluator's keys with the values eval gives
    them (``provenance.official_arguments``, from the trials SPEC), then the graph's own (the SPEC, the mode,
    ``kwargs`` as given to policy_node, ``render``, ``privileged``, ``execution``)."""
    from robofollow_ros.evaluation.provenance import official_arguments
    from robofollow_ros.evaluation.selection import limit_differs_from_official, parse_levels, parse_scenes
    from robofollow_ros.nodes.trial_plan import spec_values

    values = spec_values(trials)  # as eval reads its flags: the same official values for the same selection
    levels = tuple(parse_levels(values.get("levels", "L0,L1,L2,L3")))
    limit = int(values["limit"]) if "limit" in values else None
    tasks: tuple[str, ...] = tuple(t for t in values.get("tasks", "").split(",") if t)
    if limit_differs_from_official(levels, limit):
        tasks, limit = tuple(task for _, task in plan.selected_tasks), None
    official = official_arguments(
        scenes=tuple(parse_scenes(values.get("scene", "all"))), levels=levels, tasks=tasks or None, limit=limit,
        rounds=int(values.get("rounds", "1")), max_steps=max_steps, actions_per_step=actions_per_step,
        stepper=stepper, output=output, policy=policy, policy_kwargs=kwargs if isinstance(kwargs, dict) else {},
        policy_timeout=policy_timeout_s)
    return {**official, "trials": trials, "policy": policy, "kwargs": kwargs, "mode": "rig" if rig_mode else "sim",
            "via": "ros", "render": render, "privileged": privileged, "execution": execution}
