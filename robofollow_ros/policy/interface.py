"""The policy interface every adapter, baseline and server speaks (spec section e).

A policy is any object with ``reset()``, ``set_instruction(text)`` and ``predict(obs)``; ``close()``
is optional. ``predict`` returns an action chunk: a finite float32 array of shape ``[T, 14]`` whose
rows are *absolute* joint targets in ``contract.JOINT_NAMES`` order. :class:`ValidatedPolicy`
enforces that on both sides of every wire, so a broken model fails with one clear message instead
of a physics explosion three layers down.

Privileged state (the evaluation task id and every object's true pose, ``obs["privileged"]``) is not
part of what a policy sees. A policy of this package that needs it says so with the class (or
instance) attribute ``needs_privileged = True`` (the ``oracle``, ``blind``, and the drills that read the
task id); :func:`declares_privileged` reads it, and honours it only for this package's own policies.
Whether a policy *receives* it is decided once, when it is loaded (``spec.load_policy(...,
privileged=)``, the run's ``--privileged``), and carried by its :class:`ValidatedPolicy`;
:func:`receives_privileged` reads that through the wrappers. The observation is then built by
``observation.contract_observation``, the one builder every path uses.

Real-time chunking (RTC, ``policy.execution``): a policy that can condition its next chunk on the rows
still queued for execution and on the expected delay declares ``accepts_rtc = True`` and takes
``predict(obs, *, rtc=RtcHint(...))``. The hint travels beside the observation, never inside it: a
policy that did not declare it is called ``predict(obs)`` exactly as before (:func:`accepts_rtc`, and
the wrappers' ``predict(obs, *, rtc=None)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robofollow_ros.contract import ACTION_DIM

#: Observation as RoboFollow passes it: ``observation.<camera>.rgb`` (uint8 HWC),
#: ``joint_action.vector`` (14 values) and ``instruction``.
Observation = dict[str, Any]


class PolicyError(Exception):
    """Base class of every error a policy or a policy transport raises on purpose."""


class PolicyOutputError(PolicyError, ValueError):
    """``predict`` returned something that is not a finite, non-empty ``[T, 14]`` array."""


@runtime_checkable
class Policy(Protocol):
    """What the evaluator, the policy node and the servers call, in this order per episode:
    ``reset()`` → ``set_instruction(text)`` → ``predict(obs)`` up to ``max_steps`` times."""

    def reset(self) -> None: ...

    def set_instruction(self, text: str) -> None: ...

    def predict(self, obs: Observation) -> Any: ...


def close_policy(policy: object) -> None:
    """Call ``policy.close()`` when the policy has one (it is optional in the interface)."""
    close = getattr(policy, "close", None)
    if callable(close):
        close()


def validate_actions(result: Any) -> np.ndarray:
    """Return ``result`` as a float32 ``[T, 14]`` array or raise :class:`PolicyOutputError`.

    The message names the offending shape, dtype or the first non-finite position so the model's
    author can fix it without a debugger.
    """
    try:
        actions = np.asarray(result)
    except Exception as exc:  # ragged lists and the like
        raise PolicyOutputError(f"predict output: cannot convert {type(result).__name__} to an array ({exc})") from exc
    if actions.dtype.kind not in "biuf":
        raise PolicyOutputError(f"predict output: dtype {actions.dtype} of shape {actions.shape} is not numeric; "
                                "expected float32 [T, 14]")
    if actions.ndim != 2:
        raise PolicyOutputError(f"predict output: shape {actions.shape} is not 2-D; expected [T, {ACTION_DIM}]")
    if actions.shape[1] != ACTION_DIM:
        raise PolicyOutputError(f"predict output: shape {actions.shape} has {actions.shape[1]} columns; "
                                f"expected [T, {ACTION_DIM}]")
    if actions.shape[0] == 0:
        raise PolicyOutputError(f"predict output: shape {actions.shape} has no rows; expected T >= 1")
    actions = actions.astype(np.float32, copy=False)
    finite = np.isfinite(actions)
    if not finite.all():
        row, col = (int(i) for i in np.argwhere(~finite)[0])
        raise PolicyOutputError(f"predict output: shape {actions.shape} contains {actions[row, col]} "
                                f"at row {row}, column {col}; every value must be finite")
    return actions


#: Policies defined under this package (the expert, the baselines, the drills) may declare
#: ``needs_privileged``; a declaration anywhere else is not honoured (it takes ``--privileged``).
OWN_POLICIES = "robofollow_ros.policy."


class PolicyWrapper:
    """Base of this package's wrappers around a policy (:class:`ValidatedPolicy`, the guard's
    ``TimeoutGuardedPolicy``): ``inner`` is the wrapped policy.

    ``forwards_rtc``: the wrapper's ``predict(obs, *, rtc=None)`` hands an :class:`RtcHint` on to ``inner``
    (when ``inner`` accepts it); :func:`accepts_rtc` looks through such wrappers only."""

    inner: Any
    forwards_rtc = False


def _unwrapped(policy: object) -> object:
    while isinstance(policy, PolicyWrapper):
        policy = policy.inner
    return policy


@dataclass(frozen=True)
class RtcHint:
    """What a real-time-chunking policy may condition its next chunk on (``policy.execution``).

    ``queued_rows``: float32 ``[n, 14]``, the rows of the previous plan still queued when the request went
    out, in execution order (the first is executed on the tick of the request); ``n`` may be 0.
    ``delay_steps``: the executor's estimate of the control steps that pass before the new chunk arrives
    (that many of the queued rows will have been executed by then: the frozen prefix)."""

    queued_rows: Any
    delay_steps: int

    @property
    def frozen_steps(self) -> int:
        """Rows of the new chunk that will already have been executed from the old plan (GR00T's open
        RTC PRs call it ``rtc_frozen_steps``; ``len(queued_rows)`` is their ``rtc_overlap_steps``)."""
        return min(int(self.delay_steps), len(self.queued_rows))


def accepts_rtc(policy: object) -> bool:
    """True when ``policy`` (through the wrappers that forward the hint) declares ``accepts_rtc = True``."""
    while isinstance(policy, PolicyWrapper) and policy.forwards_rtc:
        policy = policy.inner
    return getattr(policy, "accepts_rtc", False) is True


def predict_maybe_rtc(policy: Any, obs: Observation, rtc: RtcHint | None) -> Any:
    """``policy.predict(obs, rtc=rtc)`` for a policy that accepts the hint, else ``policy.predict(obs)``."""
    if rtc is not None and accepts_rtc(policy):
        return policy.predict(obs, rtc=rtc)
    return policy.predict(obs)


def declares_privileged(policy: object) -> bool:
    """True when ``policy`` declares ``needs_privileged = True`` and is one of this package's own policies
    (its class is defined under :data:`OWN_POLICIES`); read through the wrappers."""
    inner = _unwrapped(policy)
    return getattr(inner, "needs_privileged", False) is True and type(inner).__module__.startswith(OWN_POLICIES)


def receives_privileged(policy: object) -> bool:
    """Whether ``policy`` is handed ``obs["privileged"]``: what its :class:`ValidatedPolicy` was loaded with
    (the run's ``--privileged``, or the policy's own declaration), read through the guard; for a bare
    policy, its declaration alone."""
    while isinstance(policy, PolicyWrapper) and not isinstance(policy, ValidatedPolicy):
        policy = policy.inner
    if isinstance(policy, ValidatedPolicy):
        return policy.receives_privileged
    return declares_privileged(policy)


class ValidatedPolicy(PolicyWrapper):
    """Wraps a policy so that ``predict`` always returns a validated float32 ``[T, 14]`` array.

    ``privileged``: the run hands every observation's privileged state to this policy (``--privileged``);
    without it only a policy that declares it (:func:`declares_privileged`) receives it
    (:attr:`receives_privileged`). Wrapping twice is harmless: :meth:`wrap` returns an existing wrapper
    unchanged.
    """

    forwards_rtc = True

    def __init__(self, inner: Policy, *, privileged: bool = False) -> None:
        for method in ("reset", "set_instruction", "predict"):
            if not callable(getattr(inner, method, None)):
                raise TypeError(f"policy: {type(inner).__name__} has no callable {method}(); "
                                "a policy needs reset(), set_instruction(text) and predict(obs)")
        self.inner = inner
        #: The observations this policy is given carry ``privileged`` (see the module docstring).
        self.receives_privileged = bool(privileged) or declares_privileged(inner)

    @classmethod
    def wrap(cls, policy: Policy) -> ValidatedPolicy:
        return policy if isinstance(policy, ValidatedPolicy) else cls(policy)

    def reset(self) -> None:
        self.inner.reset()

    def set_instruction(self, text: str) -> None:
        self.inner.set_instruction(text)

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> np.ndarray:
        """``inner.predict(obs)``, validated; ``rtc`` reaches ``inner`` only when it accepts it."""
        return validate_actions(predict_maybe_rtc(self.inner, obs, rtc))

    def close(self) -> None:
        close_policy(self.inner)

    def __getattr__(self, name: str) -> Any:
        # Adapter extras (e.g. ``last_server_timing``) stay reachable through the wrapper.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
