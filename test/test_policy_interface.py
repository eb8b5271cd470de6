"""Policy interface, validation, hold, the timeout guard and SPEC loading."""

from __future__ import annotations

import numpy as np
import pytest

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import FaultyPolicy, RecordingPolicy, make_observation
from robofollow_ros.policy.guard import (
    DEFAULT_POLICY_TIMEOUT_S,
    PolicyAbandonedError,
    PolicyBusyError,
    PolicyTimeoutError,
    TimeoutGuardedPolicy,
    close_guarded,
    guarded_kwargs,
)
from robofollow_ros.policy.interface import Policy, PolicyOutputError, ValidatedPolicy, validate_actions
from robofollow_ros.policy.spec import PolicySpecError, builtin_names, load_policy, register_builtin
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (np.zeros(14), "not 2-D"),
        (np.zeros((3, 13)), "13 columns"),
        (np.zeros((0, 14)), "no rows"),
        (np.array([["a"] * 14]), "not numeric"),
    ],
)
def test_validate_actions_rejects_with_the_shape_in_the_message(value: np.ndarray, fragment: str) -> None:
    with pytest.raises(PolicyOutputError, match=fragment) as info:
        validate_actions(value)
    assert str(value.shape) in str(info.value)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_validate_actions_names_the_first_non_finite_position(bad: float) -> None:
    rows = np.zeros((4, 14))
    rows[2, 9] = bad
    with pytest.raises(PolicyOutputError, match="row 2, column 9"):
        validate_actions(rows)


def test_validate_actions_converts_lists_and_doubles_to_float32() -> None:
    out = validate_actions([[float(i) for i in range(14)]] * 2)
    assert out.dtype == np.float32 and out.shape == (2, 14)
    assert out[1, 13] == 13.0


def test_validated_policy_checks_methods_and_does_not_double_wrap() -> None:
    with pytest.raises(TypeError, match="predict"):
        ValidatedPolicy(object())  # type: ignore[arg-type]
    wrapped = ValidatedPolicy(RecordingPolicy())
    assert ValidatedPolicy.wrap(wrapped) is wrapped
    assert wrapped.chunk_size == 3  # attributes of the inner policy stay reachable
    with pytest.raises(PolicyOutputError, match="columns"):
        ValidatedPolicy(FaultyPolicy("wrong_shape")).predict(make_observation())


def test_hold_returns_copies_of_the_current_joints_as_float32() -> None:
    obs = make_observation(seed=3)
    actions = HoldPolicy(chunk_size=7).predict(obs)
    assert actions.shape == (7, 14) and actions.dtype == np.float32
    np.testing.assert_allclose(actions, np.tile(obs["joint_action"]["vector"], (7, 1)).astype(np.float32))
    assert isinstance(HoldPolicy(), Policy)
    with pytest.raises(ValueError, match="chunk_size"):
        HoldPolicy(chunk_size=0)


def test_guard_times_out_a_hung_call_refuses_while_stuck_and_recovers() -> None:
    faulty = FaultyPolicy("hang", hang_s=30)
    guard = TimeoutGuardedPolicy(faulty, timeout_s=0.2)
    with pytest.raises(PolicyTimeoutError, match=r"predict: no answer within 0\.2 s"):
        guard.predict(make_observation())
    with pytest.raises(PolicyBusyError, match="earlier predict call timed out"):
        guard.reset()
    faulty.release.set()
    assert guard.wait_idle(10)
    guard.reset()  # served again
    assert guard.predict(make_observation()).shape == (4, 14)


def test_guard_passes_exceptions_and_results_through() -> None:
    guard = TimeoutGuardedPolicy(FaultyPolicy("raise"), timeout_s=10)
    with pytest.raises(Exception, match="failed on purpose"):
        guard.predict(make_observation())
    recorder = RecordingPolicy()
    guarded = TimeoutGuardedPolicy(recorder, timeout_s=10)
    guarded.reset()
    guarded.set_instruction("pick the cube")
    assert guarded.predict(make_observation())[0, 0] == 1.0
    assert [c[0] for c in recorder.calls] == ["reset", "set_instruction", "predict"]


def test_guard_abandons_a_call_when_told_and_counts_as_stuck_until_it_returns() -> None:
    """policy_node stops a trial: the wait for the call in flight ends at once, not at the timeout."""
    import threading
    import time

    faulty = FaultyPolicy("hang", hang_s=30)
    guard = TimeoutGuardedPolicy(faulty, timeout_s=60)
    guard.abandon_when = stopped = threading.Event()
    threading.Timer(0.2, stopped.set).start()
    started = time.monotonic()
    with pytest.raises(PolicyAbandonedError, match="predict: abandoned after"):
        guard.predict(make_observation())
    assert time.monotonic() - started < 10  # far below the 60 s timeout
    assert guard.stuck
    with pytest.raises(PolicyBusyError):
        guard.reset()
    close_guarded(guard)  # in the background: it would wait for the stuck call
    faulty.release.set()
    assert guard.wait_idle(10) and not guard.stuck


def test_guard_tells_a_timeout_of_the_call_itself_from_its_own() -> None:
    """A remote client's socket timeout is the call's own error, not the guard's (the call has returned)."""

    class SocketTimesOut(RecordingPolicy):
        def predict(self, obs: object) -> np.ndarray:
            raise TimeoutError("timed out reading from the server")

    guard = TimeoutGuardedPolicy(SocketTimesOut(), timeout_s=10)
    with pytest.raises(TimeoutError, match="reading from the server") as info:
        guard.predict(make_observation())
    assert not isinstance(info.value, PolicyTimeoutError) and not guard.stuck


def test_guarded_kwargs_give_a_remote_client_a_socket_timeout_above_the_guards() -> None:
    assert DEFAULT_POLICY_TIMEOUT_S == 300.0  # evaluate.py's --policy-timeout default
    assert guarded_kwargs("tcp://h:1", {}, 10.0) == {"timeout_s": 12.0}
    assert guarded_kwargs("openpi://h:1", {"timeout_s": 5}, 10.0) == {"timeout_s": 5}  # the user's own wins
    assert guarded_kwargs("hold", {"chunk_size": 2}, 10.0) == {"chunk_size": 2}


def test_load_policy_builtin_hold_with_kwargs_is_validated() -> None:
    policy = load_policy("hold", {"chunk_size": 2})
    assert isinstance(policy, ValidatedPolicy)
    assert policy.predict(make_observation()).shape == (2, 14)
    assert "hold" in builtin_names()


def test_load_policy_module_function_with_kwargs() -> None:
    policy = load_policy("robofollow_ros.policy.drills.scripted:recording", {"chunk_size": 6}, validate=False)
    assert isinstance(policy, RecordingPolicy) and policy.chunk_size == 6


def test_register_builtin_adds_a_spec_without_editing_the_loader() -> None:
    register_builtin("test-constant", lambda value=0.5: HoldPolicy(chunk_size=1))
    assert "test-constant" in builtin_names()
    assert load_policy("test-constant").predict(make_observation()).shape == (1, 14)
    with pytest.raises(ValueError, match="name"):
        register_builtin("Bad Name", HoldPolicy)


def test_remote_specs_build_lazy_clients_without_connecting() -> None:
    tcp = load_policy("tcp://127.0.0.1:9", {"timeout_s": 5}, validate=False)
    assert isinstance(tcp, RoboFollowTcpPolicy) and (tcp.host, tcp.port, tcp.timeout_s) == ("127.0.0.1", 9, 5.0)
    ws = load_policy("openpi://localhost:8000", validate=False)
    assert isinstance(ws, OpenpiWebsocketPolicy) and ws.uri == "ws://localhost:8000"


@pytest.mark.parametrize(
    ("spec", "kwargs", "fragment"),
    [
        ("", None, "empty"),
        ("nonsense", None, "not a built-in"),
        ("no_such_module_xyz:make", None, "no module named 'no_such_module_xyz' in .* PYTHONPATH"),
        ("robofollow_ros.policy.drills.scripted:nothing_here", None, "no callable 'nothing_here'"),
        ("hold", {"chunk": 3}, "bad kwargs"),
        ("hold", {"chunk_size": -1}, "chunk_size"),
        ("tcp://127.0.0.1:99999", None, "port 99999"),
        ("http://127.0.0.1:80", None, "tcp://HOST:PORT"),
        ("robofollow_ros.policy.drills.scripted:make_observation", None, "no reset"),
    ],
)
def test_bad_specs_name_the_spec(spec: str, kwargs: dict | None, fragment: str) -> None:
    with pytest.raises(PolicySpecError, match=fragment) as info:
        load_policy(spec, kwargs)
    assert repr(spec) in str(info.value)
