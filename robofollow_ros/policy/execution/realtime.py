"""Real-time chunk execution: the arm keeps moving while the model thinks.

On the rig a model answers in 50–300 ms while the arms want a command every 20–40 ms. Executing a chunk
synchronously leaves the arm idle during every call; requesting the next chunk early and switching to it
blindly makes the arm jump back or forth at each boundary (GR00T issues 272, 285; openpi 636). The
:class:`RealtimeChunkExecutor` keeps one request in flight and a queue of planned rows, and per control
tick (:meth:`~RealtimeChunkExecutor.tick`):

1. harvests a finished request: the rows of the new chunk that were meant for ticks on which the old
   plan was executed meanwhile are dropped (only those: ticks on which the arm held do not count, so a
   slow first call does not make the first chunk skip ahead; LeRobot PR 4454 clamps the same way), and
   the rest is merged into the queued rows step by step (``merge``: see :mod:`.merge`); a chunk whose
   rows have all been overtaken is discarded and counted as late;
2. requests the next chunk when at most ``threshold`` rows are queued (raised to the delay estimate when
   ``adapt_threshold``), handing the policy the queued rows and the delay when it accepts an
   :class:`~robofollow_ros.policy.interface.RtcHint`;
3. returns the next row, limited to ``max_step`` per joint from the previous command when given, or, with
   nothing queued, holds: returns the previous command again, flagged (absolute position control: repeating
   the last target keeps the arm where it was sent).

Latency is measured by an injected ``clock`` (``time.monotonic`` on a wall clock), or in ticks when none
is given; the delay estimate is a sliding high percentile with the warm-up calls left out (:mod:`.delay`).
Nothing here reads a wall clock or sleeps: a fake clock and hand-completed futures drive it in tests.
The rig's safety filter (``rig.safety``) still clamps every command it receives: ``max_step`` here keeps
merges from ever asking for more, it does not replace the bridge's clamp.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.execution.delay import DelayEstimator
from robofollow_ros.policy.execution.merge import MergeRule, Slot
from robofollow_ros.policy.execution.sync import check_k
from robofollow_ros.policy.interface import Observation, Policy, RtcHint, ValidatedPolicy, validate_actions

#: Starts a prediction of ``obs`` (with the hint for a policy that accepts one) and returns its Future.
RtcSubmit = Callable[[Observation, RtcHint], "Future[np.ndarray]"]
#: An observation, or a function that builds one (called only on a tick that sends a request).
Observe = Observation | Callable[[], Observation]


@dataclass(frozen=True)
class Tick:
    """What one control tick sends.

    ``row``: float32 ``[14]``, the command; on a hold the previous command again; None only when nothing
    was ever sent (no chunk yet and no ``hold`` given to :meth:`RealtimeChunkExecutor.reset`).
    ``hold``: nothing new was queued for this tick. ``clamped``: ``max_step`` limited the row.
    ``requested``: a request went out on this tick. ``in_flight``: a request is in flight after it."""

    step: int
    row: np.ndarray | None
    hold: bool
    clamped: bool = False
    requested: bool = False
    in_flight: bool = False


@dataclass
class RealtimeStats:
    """Counters of one episode (:meth:`RealtimeChunkExecutor.reset` starts new ones).

    ``hold_ticks``: ticks with nothing queued (cold start included); ``starved_ticks``: those after the first
    row was sent (the arm ran dry mid-episode); ``idle_in_flight_ticks``: holds while a request was in
    flight (cold start included). ``stale_rows_dropped``: rows of arrived chunks dropped because the old plan
    was executed on their ticks (a late chunk's rows included). ``late_chunks``: chunks discarded whole.
    ``merged_rows``: queued rows that a newer chunk was merged into. ``clamped_rows``: rows ``max_step``
    limited. ``latencies_s``: every measured request latency, warm-up included (``warmup_excluded`` of them
    first); ``latency_estimate_s`` / ``delay_steps``: the estimate after the last arrival."""

    ticks: int = 0
    rows_sent: int = 0
    hold_ticks: int = 0
    starved_ticks: int = 0
    idle_in_flight_ticks: int = 0
    requests: int = 0
    chunks: int = 0
    late_chunks: int = 0
    stale_rows_dropped: int = 0
    merged_rows: int = 0
    clamped_rows: int = 0
    warmup_excluded: int = 0
    latencies_s: list[float] = field(default_factory=list)
    latency_estimate_s: float | None = None
    delay_steps: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (run.json, benchmark tables)."""
        return asdict(self)


@dataclass(frozen=True)
class _Request:
    step: int          # the tick it went out on
    executed: int      # rows sent before that tick
    started: float     # clock() then (or the step, without a clock)
    future: Future[np.ndarray]


def policy_submit(policy: Policy) -> tuple[RtcSubmit, Callable[[], None]]:
    """A submit function running ``policy.predict`` on one worker thread, and the function that stops it.

    The hint reaches ``predict`` only for a policy that declares ``accepts_rtc`` (through the wrappers);
    the observation is handed on untouched either way."""
    validated = ValidatedPolicy.wrap(policy)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-request")

    def submit(obs: Observation, hint: RtcHint) -> Future[np.ndarray]:
        return pool.submit(lambda: validated.predict(obs, rtc=hint))

    return submit, lambda: pool.shutdown(wait=False, cancel_futures=True)


def _max_step(value: float | Sequence[float] | np.ndarray | None) -> np.ndarray | None:
    if value is None:
        return None
    step = np.broadcast_to(np.asarray(value, dtype=np.float64), (ACTION_DIM,)).astype(np.float32)
    if not np.all(np.isfinite(step)) or np.any(step <= 0):
        raise ValueError(f"max_step: expected positive finite values (one, or one per joint), got {value!r}")
    return step


class RealtimeChunkExecutor:
    """Latency-aware chunk execution, one :meth:`tick` per control step (see the module docstring).

    ``policy`` or ``submit`` (an :data:`RtcSubmit`; tests complete its futures by hand). ``actions_per_step``:
    rows of each chunk used (the first ``k``). ``threshold``: request when at most this many rows are queued
    (default ``k // 2``; 0 with a synchronous submit reproduces :class:`SyncChunkExecutor`; ``>= k`` keeps a
    request in flight all the time, as ACT's temporal ensembling wants). ``adapt_threshold``: request at the
    latest when the queue falls to the delay estimate. ``merge``/``weight``/``ensemble_coeff``: see
    :mod:`.merge`. ``control_dt_s``: seconds per tick. ``clock``: seconds, monotonic; None measures latency in
    ticks. ``latency_window``/``latency_percentile``/``warmup``: see :class:`DelayEstimator`. ``max_step``:
    the largest change per tick of each joint relative to the previous command (a float or 14 of them;
    None: off).
    """

    def __init__(self, policy: Policy | None = None, *, submit: RtcSubmit | None = None, actions_per_step: int = 50,
                 threshold: int | None = None, adapt_threshold: bool = True, merge: str = "latest",
                 weight: float = 0.7, ensemble_coeff: float = 0.01, control_dt_s: float = 0.04,
                 clock: Callable[[], float] | None = None, latency_window: int = 20,
                 latency_percentile: float = 90.0, warmup: int = 1,
                 max_step: float | Sequence[float] | np.ndarray | None = None) -> None:
        self.actions_per_step = check_k(actions_per_step)
        self.threshold = actions_per_step // 2 if threshold is None else threshold
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < 0:
            raise ValueError(f"threshold: expected an integer >= 0 (rows), got {threshold!r}")
        self.adapt_threshold = bool(adapt_threshold)
        self.rule = MergeRule(merge, weight=weight, ensemble_coeff=ensemble_coeff)
        self.estimator = DelayEstimator(control_dt_s, window=latency_window, percentile=latency_percentile,
                                        warmup=warmup)
        self.clock = clock
        self.max_step = _max_step(max_step)
        self._close: Callable[[], None] | None = None
        if submit is None:
            if policy is None:
                raise ValueError("policy: required when no submit function is given")
            submit, self._close = policy_submit(policy)
        self._submit = submit
        self._queue: collections.deque[Slot] = collections.deque()
        self._pending: _Request | None = None
        self._last_step: int | None = None
        self._executed = 0
        self._last: np.ndarray | None = None
        self.stats = RealtimeStats()

    # -- introspection ---------------------------------------------------------------------------
    @property
    def in_flight(self) -> bool:
        return self._pending is not None

    @property
    def queued(self) -> int:
        """Rows queued for the coming ticks."""
        return len(self._queue)

    def queued_rows(self) -> np.ndarray:
        """The queued rows as the merge rule makes them, float32 ``[n, 14]`` (n may be 0)."""
        return np.array([s.value for s in self._queue], dtype=np.float32).reshape(-1, ACTION_DIM)

    @property
    def request_threshold(self) -> int:
        """The queue length at or below which the next request goes out."""
        return max(self.threshold, self.estimator.delay_steps) if self.adapt_threshold else self.threshold

    def describe(self) -> dict[str, Any]:
        """The settings, for run.json."""
        return {"executor": "realtime", "actions_per_step": self.actions_per_step, "threshold": self.threshold,
                "adapt_threshold": self.adapt_threshold, **self.rule.describe(),
                "control_dt_s": self.estimator.control_dt_s, "clock": "injected" if self.clock else "ticks",
                "latency_window": self.estimator._window.maxlen, "latency_percentile": self.estimator.percentile,
                "warmup": self.estimator.warmup,
                "max_step": None if self.max_step is None else [float(v) for v in self.max_step]}

    def wait_for_request(self, timeout_s: float) -> bool:
        """Block until the request in flight (if any) has finished; False on timeout (for tests and
        callers that hand the CPU to the model)."""
        if self._pending is None:
            return True
        try:
            self._pending.future.exception(timeout=timeout_s)
        except TimeoutError:
            return False
        return True

    # -- the tick --------------------------------------------------------------------------------
    def tick(self, step: int, observe: Observe) -> Tick:
        """One control tick at ``step`` (strictly increasing within an episode; gaps are allowed).

        ``observe``: the observation of this tick, or a function building it (called only when a request
        goes out). A failed request raises its error here."""
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(f"step: {step} does not advance past the previous step {self._last_step}")
        self._last_step = step
        self.stats.ticks += 1
        self._harvest(step)
        requested = False
        if self._pending is None and len(self._queue) <= self.request_threshold:
            obs = observe() if callable(observe) else observe
            hint = RtcHint(self.queued_rows(), self.estimator.delay_steps)
            started = self.clock() if self.clock is not None else float(step)
            self._pending = _Request(step, self._executed, started, self._submit(obs, hint))
            self.stats.requests += 1
            requested = True
            self._harvest(step)  # a synchronous submit has already answered: its row 0 is for this tick
        if self._queue:
            row, clamped = self._limit(self._queue.popleft().value)
            self._executed += 1
            self._last = row
            self.stats.rows_sent += 1
            return Tick(step, row.copy(), False, clamped, requested, self._pending is not None)
        self.stats.hold_ticks += 1
        if self._executed:
            self.stats.starved_ticks += 1
        if self._pending is not None:
            self.stats.idle_in_flight_ticks += 1
        held = None if self._last is None else self._last.copy()
        return Tick(step, held, True, False, requested, self._pending is not None)

    def _harvest(self, step: int) -> None:
        pending = self._pending
        if pending is None or not pending.future.done():
            return
        self._pending = None
        rows = validate_actions(pending.future.result())[: self.actions_per_step]  # a failed request raises here
        now = self.clock() if self.clock is not None else float(step)
        latency = now - pending.started if self.clock is not None else (now - pending.started) * \
            self.estimator.control_dt_s
        self.stats.latencies_s.append(float(latency))
        if not self.estimator.add(latency):
            self.stats.warmup_excluded += 1
        self.stats.latency_estimate_s = self.estimator.latency_s
        self.stats.delay_steps = self.estimator.delay_steps
        # Rows meant for ticks on which the old plan was executed meanwhile; holds do not count.
        consumed = self._executed - pending.executed
        if consumed >= len(rows):
            self.stats.late_chunks += 1
            self.stats.stale_rows_dropped += len(rows)
            return
        self.stats.chunks += 1
        self.stats.stale_rows_dropped += consumed
        for i, row in enumerate(rows[consumed:]):
            if i < len(self._queue):
                self.rule.merge(self._queue[i], row)
                self.stats.merged_rows += 1
            else:
                self._queue.append(self.rule.start(row))

    def _limit(self, row: np.ndarray) -> tuple[np.ndarray, bool]:
        row = np.asarray(row, dtype=np.float32)
        if self.max_step is None or self._last is None:
            return row, False
        limited = np.clip(row, self._last - self.max_step, self._last + self.max_step).astype(np.float32)
        clamped = bool(np.any(limited != row))
        self.stats.clamped_rows += int(clamped)
        return limited, clamped

    # -- episodes --------------------------------------------------------------------------------
    def reset(self, hold: np.ndarray | Sequence[float] | None = None) -> None:
        """Start an episode: forget queued rows, ignore the request in flight, new :attr:`stats`.

        ``hold``: the command to hold (and to clamp the first row against) before the first chunk arrives,
        e.g. the measured joints. The latency history is kept: warm-up happens once per model."""
        self._queue.clear()
        self._pending = None
        self._last_step = None
        self._executed = 0
        self._last = None if hold is None else np.asarray(hold, dtype=np.float32).reshape(ACTION_DIM).copy()
        self.stats = RealtimeStats()

    def close(self) -> None:
        if self._close is not None:
            self._close()
