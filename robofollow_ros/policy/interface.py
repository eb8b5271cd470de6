"""The policy interface every adapter, baseline and server speaks (spec section e).

A policy is any object with ``reset()``, ``set_instruction(text)`` and ``predict(obs)``; ``close()``
is optional. ``predict`` returns an action chunk: a finite float32 array of shape ``[T, 14]`` whose
rows are *absolute* joint targets in ``contract.JOINT_NAMES`` order. :class:`ValidatedPolicy`
enforces that on both sides of every wire, so a broken model fails with one clear message instead
of a physics explosion three layers down.
"""

from __future__ import annotations

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


class ValidatedPolicy:
    """Wraps a policy so that ``predict`` always returns a validated float32 ``[T, 14]`` array.

    Wrapping twice is harmless: :meth:`wrap` returns an existing wrapper unchanged.
    """

    def __init__(self, inner: Policy) -> None:
        for method in ("reset", "set_instruction", "predict"):
            if not callable(getattr(inner, method, None)):
                raise TypeError(f"policy: {type(inner).__name__} has no callable {method}(); "
                                "a policy needs reset(), set_instruction(text) and predict(obs)")
        self.inner = inner

    @classmethod
    def wrap(cls, policy: Policy) -> ValidatedPolicy:
        return policy if isinstance(policy, ValidatedPolicy) else cls(policy)

    def reset(self) -> None:
        self.inner.reset()

    def set_instruction(self, text: str) -> None:
        self.inner.set_instruction(text)

    def predict(self, obs: Observation) -> np.ndarray:
        return validate_actions(self.inner.predict(obs))

    def close(self) -> None:
        close_policy(self.inner)

    def __getattr__(self, name: str) -> Any:
        # Adapter extras (e.g. ``last_server_timing``) stay reachable through the wrapper.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
