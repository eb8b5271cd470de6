"""Chunk execution: synchronous first-k-of-N and asynchronous with stale rows dropped by step."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.chunking import AsyncChunkExecutor, SyncChunkExecutor
from robofollow_ros.policy.drills.scripted import FaultyPolicy, RecordingPolicy, make_observation
from robofollow_ros.policy.interface import PolicyOutputError


def chunk(first_value: float, rows: int = 10) -> np.ndarray:
    """Row i of the chunk holds ``first_value + i`` so tests can see which rows ran."""
    return np.repeat((first_value + np.arange(rows, dtype=np.float32))[:, None], 14, axis=1)


class ManualRequests:
    """A submit function whose Futures the test completes by hand: the test is the clock."""

    def __init__(self) -> None:
        self.futures: list[tuple[dict, Future[np.ndarray]]] = []

    def __call__(self, obs: dict) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        self.futures.append((obs, future))
        return future


def test_sync_executes_the_first_k_rows_then_predicts_again() -> None:
    policy = RecordingPolicy(chunk_size=5)
    executor = SyncChunkExecutor(policy, actions_per_step=3)
    assert executor.chunk_for(make_observation()).shape == (3, 14)
    executor = SyncChunkExecutor(policy, actions_per_step=2)
    values = [executor.next_action(make_observation())[0] for _ in range(5)]
    # predict #2 gives rows of 2.0, predict #3 rows of 3.0, predict #4 rows of 4.0 (first k=2 each)
    assert values == [2.0, 2.0, 3.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="actions_per_step"):
        SyncChunkExecutor(policy, actions_per_step=0)


def test_sync_k_larger_than_chunk_executes_the_whole_chunk_and_validates() -> None:
    executor = SyncChunkExecutor(HoldPolicy(chunk_size=4), actions_per_step=50)
    assert executor.chunk_for(make_observation()).shape == (4, 14)
    with pytest.raises(PolicyOutputError):
        SyncChunkExecutor(FaultyPolicy("nan")).chunk_for(make_observation())


def test_async_requests_ahead_and_runs_rows_in_step_order_without_gaps() -> None:
    requests = ManualRequests()
    ex = AsyncChunkExecutor(actions_per_step=4, request_ahead=2, submit=requests)
    assert ex.next_action(0, {"step": 0}) is None  # first request in flight: hold
    assert len(requests.futures) == 1 and ex.in_flight
    requests.futures[0][1].set_result(chunk(100.0))  # planned from step 0, arrives before step 1
    rows = [ex.next_action(step, {"step": step}) for step in (1, 2, 3)]
    # row 0 (meant for step 0) is stale; rows 1..3 run at steps 1..3
    assert [r[0] for r in rows] == [101.0, 102.0, 103.0]  # type: ignore[index]
    assert ex.stats.stale_rows_dropped == 1
    # at step 2 only one row remained (<= request_ahead): the next request went out with obs of step 2
    assert [obs["step"] for obs, _ in requests.futures] == [0, 2]
    requests.futures[1][1].set_result(chunk(200.0))
    assert ex.next_action(4, {"step": 4})[0] == 202.0  # type: ignore[index]
    assert ex.next_action(5, {"step": 5})[0] == 203.0  # type: ignore[index]
    assert ex.stats.starved_steps == 1 and ex.stats.chunks == 2


def test_async_late_chunk_drops_every_stale_row_and_the_caller_holds() -> None:
    requests = ManualRequests()
    ex = AsyncChunkExecutor(actions_per_step=3, request_ahead=1, submit=requests)
    ex.next_action(0, {})
    for step in range(1, 5):
        assert ex.next_action(step, {}) is None  # the model is slower than the whole chunk
    requests.futures[0][1].set_result(chunk(0.0))
    assert ex.next_action(5, {}) is None  # rows for steps 0..2 all stale
    assert ex.stats.stale_rows_dropped == 3
    assert len(requests.futures) == 2  # a new request went out at once


def test_async_newer_chunk_replaces_queued_rows_of_the_older_plan() -> None:
    requests = ManualRequests()
    ex = AsyncChunkExecutor(actions_per_step=6, request_ahead=5, submit=requests)
    ex.next_action(0, {})
    requests.futures[0][1].set_result(chunk(10.0))
    assert ex.next_action(1, {})[0] == 11.0  # type: ignore[index]
    requests.futures[1][1].set_result(chunk(20.0))  # requested at step 1 (5 rows left <= 5)
    assert ex.next_action(2, {})[0] == 21.0  # type: ignore[index]
    assert ex.queued_steps() == [3, 4, 5, 6]


def test_async_with_a_real_thread_pool_and_errors_surface_to_the_caller() -> None:
    ex = AsyncChunkExecutor(HoldPolicy(chunk_size=8), actions_per_step=8, request_ahead=0)
    ex.next_action(0, make_observation())
    assert ex.wait_for_request(30)
    row = ex.next_action(1, make_observation())
    assert row is not None and row.shape == (14,)
    ex.close()
    bad = AsyncChunkExecutor(FaultyPolicy("wrong_shape"), actions_per_step=4, request_ahead=0)
    with pytest.raises(PolicyOutputError, match="columns"):  # at step 0 (fast pool) or at step 1
        bad.next_action(0, make_observation())
        assert bad.wait_for_request(30)
        bad.next_action(1, make_observation())
    bad.close()


def test_async_rejects_steps_that_do_not_advance_and_bad_settings() -> None:
    ex = AsyncChunkExecutor(actions_per_step=4, submit=ManualRequests())
    ex.next_action(3, {})
    with pytest.raises(ValueError, match="step: 3"):
        ex.next_action(3, {})
    ex.reset()
    ex.next_action(0, {})  # a new episode starts from step 0 again
    with pytest.raises(ValueError, match="request_ahead"):
        AsyncChunkExecutor(actions_per_step=4, request_ahead=4, submit=ManualRequests())
    with pytest.raises(ValueError, match="policy"):
        AsyncChunkExecutor(actions_per_step=4)
