"""Real-time chunk execution on a fake clock, and the latency wrapper.

The test is the clock: futures are completed by hand between ticks (``Requests``) and latencies are read
from a clock the test advances (``FakeClock``). Nothing sleeps, except the one check that a 50 ms
wrapper really waits 50 ms on a monotonic clock.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from robofollow_ros.contract import ACTION_DIM
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import RecordingPolicy, make_observation
from robofollow_ros.policy.execution import DelayEstimator, RealtimeChunkExecutor, SyncChunkExecutor
from robofollow_ros.policy.guard import TimeoutGuardedPolicy
from robofollow_ros.policy.interface import RtcHint, accepts_rtc, receives_privileged
from robofollow_ros.policy.latency import LatencyPolicy
from robofollow_ros.policy.spec import PolicySpecError, check_privileged, factory_of, latency_policy, load_policy


def chunk(first_value: float, rows: int) -> np.ndarray:
    """Row i holds ``first_value + i`` in every column, so a test can see which rows ran."""
    return np.repeat((first_value + np.arange(rows, dtype=np.float32))[:, None], ACTION_DIM, axis=1)


class Requests:
    """A submit function whose futures the test completes by hand; remembers each observation and hint."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, RtcHint, Future[np.ndarray]]] = []

    def __call__(self, obs: Any, hint: RtcHint) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        self.sent.append((obs, hint, future))
        return future

    def answer(self, index: int, rows: np.ndarray) -> None:
        self.sent[index][2].set_result(rows)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def value(tick: Any) -> float:
    assert tick.row is not None and tick.row.shape == (ACTION_DIM,) and tick.row.dtype == np.float32
    assert np.all(tick.row == tick.row[0])
    return float(tick.row[0])


# ----------------------------------------------------------------------------- delay estimate
def test_delay_estimate_is_a_sliding_high_percentile_with_the_warm_up_left_out() -> None:
    est = DelayEstimator(0.04, window=5, percentile=90, warmup=1)
    assert est.add(3.0) is False  # the cold start (compilation) is not counted
    assert est.latency_s is None and est.delay_steps == 0
    for latency in (0.10, 0.05, 0.20, 0.12):
        assert est.add(latency)
    assert est.latency_s == 0.20 and est.delay_steps == 5  # rank ceil(0.9·4) = 4 of 4
    for latency in (0.06, 0.07, 0.08):
        est.add(latency)
    assert est.samples == (0.20, 0.12, 0.06, 0.07, 0.08)  # the window holds the last five
    est.add(0.09)  # the 0.20 spike slides out
    assert est.latency_s == 0.12 and est.delay_steps == 3  # 0.12 s / 0.04 s, not rounded up to 4
    median = DelayEstimator(0.01, percentile=50, warmup=0)
    for latency in (0.01, 0.04, 0.03, 0.02):
        median.add(latency)
    assert median.latency_s == 0.02 and median.delay_steps == 2
    with pytest.raises(ValueError, match="latency_percentile"):
        DelayEstimator(0.04, percentile=0)
    with pytest.raises(ValueError, match="control_dt_s"):
        DelayEstimator(0.0)


def test_executor_measures_latency_on_its_clock_and_leaves_the_first_call_out() -> None:
    clock, requests = FakeClock(), Requests()
    ex = RealtimeChunkExecutor(submit=requests, actions_per_step=4, threshold=1, adapt_threshold=False,
                               control_dt_s=0.04, clock=clock)
    ex.tick(0, {})
    clock.now += 2.0  # the model's first call compiles
    requests.answer(0, chunk(0.0, 4))
    for step in range(1, 5):
        clock.now += 0.04
        ex.tick(step, {})
    assert len(requests.sent) == 2  # one row left at step 4: the next request went out
    clock.now += 0.11
    requests.answer(1, chunk(10.0, 4))
    ex.tick(5, {})
    assert ex.stats.latencies_s == pytest.approx([2.04, 0.11])
    assert ex.stats.warmup_excluded == 1
    assert ex.stats.latency_estimate_s == pytest.approx(0.11) and ex.stats.delay_steps == 3
    assert requests.sent[1][1].delay_steps == 0  # no counted sample when the second request went out


# ----------------------------------------------------------------------------- drops, holds, late chunks
def test_only_rows_executed_while_the_request_was_in_flight_are_dropped() -> None:
    requests = Requests()
    ex = RealtimeChunkExecutor(submit=requests, actions_per_step=6, threshold=2, adapt_threshold=False)
    for step in range(3):  # cold start: the arm holds; nothing was executed, so nothing will be dropped
        tick = ex.tick(step, {"step": step})
        assert tick.hold and tick.row is None and tick.in_flight
    requests.answer(0, chunk(10.0, 6))
    assert [value(ex.tick(step, {})) for step in range(3, 7)] == [10.0, 11.0, 12.0, 13.0]
    assert ex.stats.stale_rows_dropped == 0  # the old executor dropped rows 10..12 here and jumped
    tick = ex.tick(7, {"step": 7})  # two rows left (<= threshold): request #2, then row 14
    assert tick.requested and value(tick) == 14.0
    obs, hint, _ = requests.sent[1]
    assert obs == {"step": 7}
    np.testing.assert_array_equal(hint.queued_rows, chunk(14.0, 2))  # the frozen prefix the server may inpaint
    assert value(ex.tick(8, {})) == 15.0
    held = [ex.tick(step, {}) for step in (9, 10)]  # the queue ran dry: hold the last command
    assert all(t.hold for t in held) and [value(t) for t in held] == [15.0, 15.0]
    requests.answer(1, chunk(20.0, 6))
    # four ticks passed since the request, but only two rows (14, 15) were executed: drop two, not four
    assert value(ex.tick(11, {})) == 22.0
    assert ex.stats.stale_rows_dropped == 2
    assert (ex.stats.hold_ticks, ex.stats.starved_ticks, ex.stats.idle_in_flight_ticks) == (5, 2, 5)
    assert ex.stats.requests == 2 and ex.stats.chunks == 2 and ex.stats.late_chunks == 0


def test_a_chunk_whose_rows_have_all_passed_is_discarded_and_counted() -> None:
    requests = Requests()
    ex = RealtimeChunkExecutor(submit=requests, actions_per_step=8, threshold=4, adapt_threshold=False)
    ex.tick(0, {})
    requests.answer(0, chunk(0.0, 8))
    assert [value(ex.tick(step, {})) for step in range(1, 9)] == [float(v) for v in range(8)]
    assert len(requests.sent) == 2  # went out at step 5 with four rows left
    requests.answer(1, chunk(100.0, 3))  # a short chunk: its three rows are all behind the four executed
    tick = ex.tick(9, {})
    assert tick.hold and value(tick) == 7.0  # holds the last command, never replays the past
    assert ex.stats.late_chunks == 1 and ex.stats.chunks == 1 and ex.stats.stale_rows_dropped == 3
    assert tick.requested and len(requests.sent) == 3  # and asks again at once


def test_reset_seeds_the_hold_and_a_synchronous_submit_reproduces_the_sync_executor() -> None:
    sync = SyncChunkExecutor(RecordingPolicy(chunk_size=5), actions_per_step=3)
    expected = [float(sync.next_action(make_observation())[0]) for _ in range(7)]
    realtime = RealtimeChunkExecutor(RecordingPolicy(chunk_size=5), actions_per_step=3, threshold=0)
    got = []
    for step in range(7):
        tick = realtime.tick(step, make_observation)
        if tick.hold:  # the pool thread has not answered yet: wait for it, then the same tick count again
            assert realtime.wait_for_request(30)
            continue
        got.append(value(tick))
    realtime.close()
    assert got == expected[: len(got)] and len(got) >= 4

    ex = RealtimeChunkExecutor(submit=Requests(), actions_per_step=4)
    ex.reset(hold=np.full(ACTION_DIM, 0.25))
    tick = ex.tick(0, {})
    assert tick.hold and value(tick) == 0.25  # before the first chunk: the given position
    with pytest.raises(ValueError, match="step: 0"):
        ex.tick(0, {})


# ----------------------------------------------------------------------------- merge rules
def merged_rows(merge: str, **kwargs: Any) -> tuple[float, float, int]:
    """Three overlapping chunks A (0..3), B (10..13), C (20..23), each requested one tick after the last;
    the rows executed at steps 3 and 4: step 3 merges A's row 2 with B's row 1, step 4 A's row 3 with B's
    row 2 and C's row 1 (each chunk's row 0 was overtaken by one executed row while it was in flight)."""
    requests = Requests()
    ex = RealtimeChunkExecutor(submit=requests, actions_per_step=4, threshold=3, adapt_threshold=False, merge=merge,
                               **kwargs)
    ex.tick(0, {})
    requests.answer(0, chunk(0.0, 4))
    assert value(ex.tick(1, {})) == 0.0
    assert value(ex.tick(2, {})) == 1.0 and len(requests.sent) == 2
    requests.answer(1, chunk(10.0, 4))
    step3 = value(ex.tick(3, {}))
    requests.answer(2, chunk(20.0, 4))
    step4 = value(ex.tick(4, {}))
    return step3, step4, ex.stats.merged_rows


def test_merge_latest_takes_the_newest_prediction() -> None:
    assert merged_rows("latest") == (11.0, 21.0, 4)


def test_merge_weighted_folds_old_times_one_minus_w_plus_new_times_w() -> None:
    step3, step4, _ = merged_rows("weighted")  # LeRobot's weighted_average, w = 0.7
    assert step3 == pytest.approx(0.3 * 2 + 0.7 * 11)  # 8.3
    assert step4 == pytest.approx(0.3 * (0.3 * 3 + 0.7 * 12) + 0.7 * 21)  # 17.49
    assert merged_rows("weighted", weight=0.3)[0] == pytest.approx(0.7 * 2 + 0.3 * 11)  # LeRobot's conservative


def test_merge_average_is_lerobots_pairwise_half_and_half() -> None:
    assert merged_rows("average")[:2] == pytest.approx((6.5, (7.5 + 21) / 2))


def test_merge_ensemble_weights_the_oldest_prediction_first_as_act_does() -> None:
    # m = ln 3: weights 1, 1/3, 1/9 for the oldest, next, newest prediction
    step3, step4, _ = merged_rows("ensemble", ensemble_coeff=math.log(3.0))
    assert step3 == pytest.approx((2 + 11 / 3) / (1 + 1 / 3))  # 4.25
    assert step4 == pytest.approx((3 + 12 / 3 + 21 / 9) / (1 + 1 / 3 + 1 / 9))  # 84/13, near the oldest (3)
    # ACT's own default (imitate_episodes.py: k = 0.01, exp_weights = np.exp(-k * np.arange(n)), normalised)
    act = np.exp(-0.01 * np.arange(3))
    act = act / act.sum()
    assert merged_rows("ensemble")[1] == pytest.approx(float(act @ np.array([3.0, 12.0, 21.0])), rel=1e-6)
    assert merged_rows("ensemble", ensemble_coeff=0.0)[1] == pytest.approx(12.0)  # m = 0: the plain mean
    with pytest.raises(ValueError, match="merge"):
        RealtimeChunkExecutor(submit=Requests(), merge="median")


# ----------------------------------------------------------------------------- the per-step clamp
def test_no_row_moves_further_than_max_step_from_the_previous_command() -> None:
    requests = Requests()
    limits = np.full(ACTION_DIM, 0.5, dtype=np.float32)
    limits[0] = 0.1
    ex = RealtimeChunkExecutor(submit=requests, actions_per_step=3, threshold=0, adapt_threshold=False,
                               max_step=limits)
    ex.reset(hold=np.zeros(ACTION_DIM))
    ex.tick(0, {})
    rows = np.repeat(np.array([[0.2], [1.0], [1.1]], dtype=np.float32), ACTION_DIM, axis=1)
    requests.answer(0, rows)
    sent = [ex.tick(step, {}) for step in (1, 2, 3)]
    np.testing.assert_allclose([t.row[1] for t in sent], [0.2, 0.7, 1.1])  # type: ignore[index]
    np.testing.assert_allclose([t.row[0] for t in sent], [0.1, 0.2, 0.3])  # type: ignore[index]
    assert [t.clamped for t in sent] == [True, True, True]
    assert ex.stats.clamped_rows == 3
    previous = np.zeros(ACTION_DIM)
    for t in sent:
        assert np.all(np.abs(t.row - previous) <= limits + 1e-6)  # type: ignore[operator]
        previous = t.row  # type: ignore[assignment]
    with pytest.raises(ValueError, match="max_step"):
        RealtimeChunkExecutor(submit=Requests(), max_step=0.0)


# ----------------------------------------------------------------------------- RTC hint
class RtcRecorder:
    """A policy that declares it takes the RTC hint; remembers each hint and observation."""

    accepts_rtc = True

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], RtcHint | None]] = []

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any], *, rtc: RtcHint | None = None) -> np.ndarray:
        self.seen.append((obs, rtc))
        return chunk(float(len(self.seen)), 4)


class PlainRecorder(RecordingPolicy):
    """Declares nothing: its ``predict(obs)`` takes no hint (a hint passed to it would be a TypeError)."""


def rtc_recorder() -> RtcRecorder:
    return RtcRecorder()


def drive(policy: Any, ticks: int) -> None:
    ex = RealtimeChunkExecutor(policy, actions_per_step=4, threshold=2, adapt_threshold=False)
    try:
        for step in range(ticks):
            ex.tick(step, make_observation)
            assert ex.wait_for_request(30)
    finally:
        ex.close()


@pytest.mark.parametrize("wrap", ["bare", "latency+guard"])
def test_the_rtc_hint_reaches_only_a_policy_that_declared_it_and_never_the_observation(wrap: str) -> None:
    contract_keys = set(make_observation())
    rtc, plain = RtcRecorder(), PlainRecorder(chunk_size=4)
    targets: list[Any] = [rtc, plain]
    if wrap == "latency+guard":
        targets = [TimeoutGuardedPolicy(load_policy("latency:0:test_realtime_execution:rtc_recorder"), 30.0),
                   TimeoutGuardedPolicy(LatencyPolicy(plain, 0.0), 30.0)]
        assert accepts_rtc(targets[0]) and not accepts_rtc(targets[1])
    for target in targets:
        drive(target, 6)
    if wrap == "latency+guard":
        rtc = targets[0].inner.inner.inner  # guard -> validation -> latency -> recorder
    hints = [hint for _, hint in rtc.seen]
    assert len(hints) >= 2 and all(isinstance(h, RtcHint) for h in hints)
    assert hints[0].queued_rows.shape == (0, ACTION_DIM)  # cold start: nothing queued
    assert any(h.queued_rows.shape == (2, ACTION_DIM) for h in hints[1:])  # the two rows left at the threshold
    assert all(set(obs) == contract_keys for obs, _ in rtc.seen)  # the hint is not in the observation
    predicts = [obs for name, obs in plain.calls if name == "predict"]
    assert len(predicts) >= 2 and all(set(obs) == contract_keys for obs in predicts)


# ----------------------------------------------------------------------------- the latency wrapper
def test_latency_wrapper_waits_a_fixed_latency_before_each_predict_only() -> None:
    waits: list[float] = []
    inner = RecordingPolicy(chunk_size=2)
    policy = LatencyPolicy(inner, 200, sleep=waits.append)
    policy.reset()
    policy.set_instruction("go")
    assert waits == []  # reset and set_instruction are not delayed
    out = policy.predict(make_observation())
    assert waits == [0.2] and list(policy.waited_s) == [0.2] and out.shape == (2, ACTION_DIM)
    assert [name for name, _ in inner.calls] == ["reset", "set_instruction", "predict"]


def test_latency_wrapper_jitter_is_seeded_uniform_or_normal_and_never_negative() -> None:
    obs = make_observation()

    def draws(n: int = 200, **kwargs: Any) -> list[float]:
        waits: list[float] = []
        policy = LatencyPolicy(HoldPolicy(chunk_size=1), sleep=waits.append, **kwargs)
        for _ in range(n):
            policy.predict(obs)
        return waits

    uniform = draws(latency_ms=200, jitter_ms=50, seed=7)
    assert uniform == draws(latency_ms=200, jitter_ms=50, seed=7)  # reproducible
    assert uniform != draws(latency_ms=200, jitter_ms=50, seed=8)
    assert min(uniform) >= 0.15 and max(uniform) <= 0.25 and len(set(uniform)) == 200
    assert 0.19 < float(np.mean(uniform)) < 0.21
    normal = draws(2000, latency_ms=10, jitter_ms=100, distribution="normal", seed=1)
    assert min(normal) == 0.0 and max(normal) > 0.1  # samples below 0 are clipped to 0
    # max(0, N(10, 100)) ms averages 10·Φ(0.1) + 100·φ(0.1) = 45.1 ms (standard error here ~1.3 ms)
    assert 0.039 < float(np.mean(normal)) < 0.052
    with pytest.raises(ValueError, match="distribution"):
        LatencyPolicy(HoldPolicy(), 10, 5, distribution="poisson")


def test_a_50_ms_latency_policy_takes_at_least_50_ms_on_a_monotonic_clock() -> None:
    policy = LatencyPolicy(HoldPolicy(chunk_size=1), 50)
    started = time.monotonic()
    policy.predict(make_observation())
    assert time.monotonic() - started >= 0.05


def test_latency_spec_wraps_any_spec_records_its_factory_and_keeps_declarations(tmp_path: Any) -> None:
    policy = load_policy("latency:200~50n@3:hold", {"chunk_size": 2})
    assert policy.latency_parameters == {"latency_ms": 200.0, "jitter_ms": 50.0, "distribution": "normal",
                                         "seed": 3}
    assert policy.inner.inner.chunk_size == 2  # the kwargs went to the inner policy
    target = factory_of("latency:200~50n@3:hold", {"chunk_size": 2})
    assert target["factory"] == "robofollow_ros.policy.spec:latency_policy" and target["remote"] is None
    rebuilt = latency_policy(**target["kwargs"])  # run.json's factory and kwargs rebuild the same policy
    assert isinstance(rebuilt, LatencyPolicy) and rebuilt.latency_parameters == policy.latency_parameters
    # privileged state: the inner policy's own declaration decides, through the wrapper
    assert receives_privileged(load_policy("latency:0:oracle"))
    assert not receives_privileged(load_policy("latency:0:memorizer"))
    with pytest.raises(PolicySpecError, match="needs_privileged"):
        load_policy("latency:0:test_realtime_execution:claims_privileged")
    with pytest.raises(PolicySpecError, match="cannot carry privileged"):
        check_privileged("latency:100:openpi://127.0.0.1:9", True)
    with pytest.raises(PolicySpecError, match=r"latency:MS\[~JITTER_MS"):
        load_policy("latency:fast:hold")
    # close reaches the inner policy
    marker = tmp_path / "closed"
    closing = LatencyPolicy(RecordingPolicy(close_marker=str(marker)), 0)
    closing.close()
    assert marker.read_text() == "closed\n"


class ClaimsPrivileged(HoldPolicy):
    """A user policy (outside the package) that declares privileged state: refused without --privileged."""

    needs_privileged = True


def claims_privileged() -> ClaimsPrivileged:
    return ClaimsPrivileged()
