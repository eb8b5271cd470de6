"""How ``robofollow eval`` executes a policy's chunks: lock-step (the default) or on a control clock.

* ``lockstep``: RoboFollow's fixed runtime and the official evaluator's loop (``evaluation.episode``): the
  world waits while the policy thinks, then executes the first ``actions_per_step`` rows, each one TOPP
  segment. Scores are comparable with published results only in this mode.
* ``realtime`` (``--execution realtime``): the world does not wait (``evaluation.realtime_episode``). Every
  control tick (1/``control_hz`` s of simulated time, ``PHYSICS_HZ / control_hz`` physics steps) executes
  one row of a ``policy.execution.RealtimeChunkExecutor`` (or holds the last command), while requests run
  for as many ticks as their latency takes. Latency costs ticks on a virtual clock, whatever the speed of
  the CPU simulating: see ``realtime_episode`` for the rule.

What is recorded: run.json's ``execution`` (:meth:`ExecutionSettings.describe`, a ``--resume`` refuses a
change of it); each trial's results entry gains ``execution`` (the executor's counters and the motion
measures) in realtime mode, a field the official scorer does not read. The ROS graph's trial manager writes
the same counters under the same name (:func:`realtime_result`); its results written before that had them
under ``realtime``, which :func:`trial_execution` still reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robofollow_ros.monitoring.rates import CONTROL_HZ
from robofollow_ros.policy.execution.merge import MERGE_RULES

EXECUTION_MODES = ("lockstep", "realtime")
#: Lock-step's step budget (``--budget``): ``calls`` = ``max_steps`` policy calls (the official evaluate.py's
#: ``--max-steps``, "Policy calls per episode", what the published numbers used); ``rows`` = ``max_steps ×
#: actions_per_step`` executed rows, whatever each call returns (a server that answers one action per call,
#: such as vla-eval's ``PredictModelServer`` with ``chunk_size``, then runs as long as a chunked policy).
BUDGET_UNITS = ("calls", "rows")
#: The simulator's physics rate (``sim.world.PHYSICS_HZ``; this module must not import SAPIEN; a test keeps
#: them equal). A control tick is ``PHYSICS_HZ // control_hz`` physics steps.
PHYSICS_HZ = 250
DEFAULT_CONTROL_HZ = 25
#: run.json's ``execution`` of a run written before the mode existed: those ran lock-step.
LOCKSTEP_RECORD: dict[str, Any] = {"mode": "lockstep"}
#: The realtime options' defaults: a lock-step setting holds exactly these.
_REALTIME_DEFAULTS = (DEFAULT_CONTROL_HZ, "latest", None, True, 0.7, 0.01)


@dataclass(frozen=True)
class ExecutionSettings:
    """``--execution`` and the realtime executor's options (ignored in lock-step).

    ``threshold``: request the next chunk when at most this many rows are queued (None: half a chunk);
    ``adapt_threshold``: raise it to the delay estimate (off: ``--fixed-threshold``; with ``threshold=0`` the
    arm then holds while every chunk is computed, synchronous execution on a clock). ``merge``, ``weight``,
    ``ensemble_coeff``: see ``policy.execution.merge``."""

    mode: str = "lockstep"
    control_hz: int = DEFAULT_CONTROL_HZ
    merge: str = "latest"
    threshold: int | None = None
    adapt_threshold: bool = True
    weight: float = 0.7
    ensemble_coeff: float = 0.01
    #: lock-step's budget unit (:data:`BUDGET_UNITS`); realtime counts control ticks.
    budget: str = "calls"

    def __post_init__(self) -> None:
        if self.mode not in EXECUTION_MODES:
            raise ValueError(f"--execution: {self.mode!r} is not one of {', '.join(EXECUTION_MODES)}")
        if self.control_hz not in CONTROL_HZ:
            raise ValueError(f"--control-hz: {self.control_hz} is not one of {', '.join(map(str, CONTROL_HZ))} "
                             f"(divisors of the {PHYSICS_HZ} Hz physics)")
        if self.merge not in MERGE_RULES:
            raise ValueError(f"--merge: {self.merge!r} is not one of {', '.join(MERGE_RULES)}")
        if self.threshold is not None and (isinstance(self.threshold, bool) or self.threshold < 0):
            raise ValueError(f"--threshold: must be an integer >= 0 (rows), got {self.threshold!r}")
        if self.mode == "lockstep" and (self.control_hz, self.merge, self.threshold, self.adapt_threshold,
                                        self.weight, self.ensemble_coeff) != _REALTIME_DEFAULTS:
            raise ValueError("--merge, --control-hz, --threshold, --fixed-threshold: only with --execution realtime")
        if self.budget not in BUDGET_UNITS:
            raise ValueError(f"--budget: {self.budget!r} is not one of {', '.join(BUDGET_UNITS)}")
        if self.realtime and self.budget != "calls":
            raise ValueError("--budget rows: --execution realtime already counts control ticks "
                             "(max_steps x actions_per_step); leave --budget out")

    @property
    def realtime(self) -> bool:
        return self.mode == "realtime"

    @property
    def control_dt_s(self) -> float:
        return 1.0 / self.control_hz

    @property
    def tick_physics_steps(self) -> int:
        """Physics steps of one control tick (10 at 25 Hz)."""
        return PHYSICS_HZ // self.control_hz

    def executor_options(self, actions_per_step: int) -> dict[str, Any]:
        """Keyword arguments of ``RealtimeChunkExecutor`` (besides the submit function and the clock).

        ``warmup=0``: on the virtual clock a first call is charged what it took, and leaving it out of the
        estimate would only make the second chunk starve (``policy.execution``)."""
        return {"actions_per_step": actions_per_step, "threshold": self.threshold,
                "adapt_threshold": self.adapt_threshold, "merge": self.merge, "weight": self.weight,
                "ensemble_coeff": self.ensemble_coeff, "control_dt_s": self.control_dt_s, "warmup": 0}

    def describe(self, max_steps: int, actions_per_step: int) -> dict[str, Any]:
        """run.json's ``execution``: the mode, and in realtime mode the tick, the budget, the latency rule and
        the executor's own ``describe()``."""
        if not self.realtime:  # a calls budget keeps the record every lock-step run has had (resume identity)
            return dict(LOCKSTEP_RECORD) if self.budget == "calls" else {**LOCKSTEP_RECORD, "budget": self.budget}
        from robofollow_ros.policy.execution.realtime import RealtimeChunkExecutor

        def never(*_: Any) -> Any:
            raise RuntimeError("describe only")

        executor = RealtimeChunkExecutor(submit=never, clock=lambda: 0.0, **self.executor_options(actions_per_step))
        return {"mode": "realtime", "control_hz": self.control_hz, "tick_physics_steps": self.tick_physics_steps,
                "step_budget_ticks": max_steps * actions_per_step,
                "latency": "latency: policies: the declared draw (not slept); others: wall time from the request "
                           "to the answer; a request of tick t is available at tick t + ceil(latency / dt)",
                "executor": executor.describe()}


#: A trial result's key for the real-time counters, in ``eval``'s results and the ROS graph's alike.
RESULT_KEY = "execution"
#: The key the ROS graph's results used before (read, never written).
OLD_ROS_RESULT_KEY = "realtime"


def counters_record(counters: Mapping[str, Any]) -> dict[str, Any]:
    """A trial result's ``execution`` from the executor's counters (``RealtimeStats.as_dict()`` and what the
    caller adds): ``mode`` realtime, every counter, and ``latencies_s`` summarised as ``latency_s``."""
    import numpy as np

    out = dict(counters)
    latencies = np.asarray(out.pop("latencies_s", []), dtype=np.float64)
    out["latency_s"] = None if not latencies.size else {
        "n": int(latencies.size), "mean": float(latencies.mean()), "p50": float(np.percentile(latencies, 50)),
        "p90": float(np.percentile(latencies, 90)), "max": float(latencies.max())}
    return {"mode": "realtime", **out}


def trial_execution(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """A trial result's real-time counters: ``execution``, or ``realtime`` in a ROS run written before the
    name was shared (read as ``execution``); None for a lock-step trial."""
    value = entry.get(RESULT_KEY)
    if isinstance(value, Mapping):
        return dict(value)
    old = entry.get(OLD_ROS_RESULT_KEY)
    return counters_record(old) if isinstance(old, Mapping) else None
