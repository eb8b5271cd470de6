"""A policy slowed down on purpose: ``latency:MS[~JITTER_MS[n]][@SEED]:<SPEC>``.

Real-time execution can only be measured against a model that takes its time, and a GPU model's time
cannot be had on a CPU test box. :class:`LatencyPolicy` waits a fixed or sampled latency before each
``predict`` of any policy (``reset`` and ``set_instruction`` are not delayed), so the benchmark and the tests
can put 50–300 ms of latency, with jitter, in front of the oracle or a learned baseline.

SPEC grammar (``spec.load_policy`` strips the prefix and builds the inner SPEC as it would alone; the
run's ``--kwargs`` go to the inner policy):

- ``latency:200:oracle``: 200 ms before every predict;
- ``latency:200~50:oracle``: uniform in [150, 250] ms;
- ``latency:200~50n:oracle``: normal with mean 200 ms and standard deviation 50 ms;
- ``@SEED`` (default 0) seeds the sampler, so a run's latencies are reproducible. Samples below 0 are 0.

The wrapper is transparent otherwise: privileged state is decided by the inner policy's declaration
(``interface.declares_privileged`` looks through it), an RTC hint is passed on to an inner policy that
accepts it, and ``close`` closes the inner policy. ``sleep`` is injectable for tests.
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import (
    Observation,
    Policy,
    PolicyWrapper,
    RtcHint,
    close_policy,
    predict_maybe_rtc,
)

PREFIX = "latency:"
DISTRIBUTIONS = ("uniform", "normal")
_NUMBER = r"\d+(?:\.\d*)?|\.\d+"
_SPEC = re.compile(rf"^latency:(?P<ms>{_NUMBER})(?:~(?P<jitter>{_NUMBER})(?P<dist>n)?)?(?:@(?P<seed>\d+))?:"
                   r"(?P<inner>\S.*)$")
#: The largest latency a SPEC may ask for (ms): a typo must not park a run for hours.
MAX_LATENCY_MS = 60_000.0


@dataclass(frozen=True)
class LatencySpec:
    """A parsed ``latency:`` prefix and the SPEC it wraps."""

    latency_ms: float
    jitter_ms: float
    distribution: str
    seed: int
    inner: str

    def kwargs(self) -> dict[str, Any]:
        """The wrapper's parameters (``LatencyPolicy``'s keyword arguments, run.json)."""
        return {"latency_ms": self.latency_ms, "jitter_ms": self.jitter_ms, "distribution": self.distribution,
                "seed": self.seed}


def parse_latency_spec(spec: str) -> LatencySpec | None:
    """The parts of a ``latency:`` SPEC; None for any other SPEC; ``ValueError`` naming a bad one."""
    if not isinstance(spec, str) or not spec.strip().startswith(PREFIX):
        return None
    spec = spec.strip()
    match = _SPEC.match(spec)
    if match is None:
        raise ValueError(f"policy spec {spec!r}: expected latency:MS[~JITTER_MS[n]][@SEED]:SPEC "
                         "(e.g. latency:200~50:oracle)")
    parsed = LatencySpec(float(match["ms"]), float(match["jitter"] or 0.0),
                         "normal" if match["dist"] else "uniform", int(match["seed"] or 0), match["inner"].strip())
    if parsed.latency_ms + 3 * parsed.jitter_ms > MAX_LATENCY_MS:
        raise ValueError(f"policy spec {spec!r}: latency {parsed.latency_ms:g}~{parsed.jitter_ms:g} ms exceeds "
                         f"{MAX_LATENCY_MS:g} ms")
    return parsed


def _no_wait(_seconds: float) -> None:
    """The sleep of a :meth:`LatencyPolicy.draw_only` wrapper."""


class LatencyPolicy(PolicyWrapper):
    """``inner`` with a latency added before every ``predict`` (see the module docstring)."""

    forwards_rtc = True

    def __init__(self, inner: Policy, latency_ms: float, jitter_ms: float = 0.0, distribution: str = "uniform",
                 seed: int = 0, sleep: Callable[[float], None] = time.sleep) -> None:
        for name, value in (("latency_ms", latency_ms), ("jitter_ms", jitter_ms)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_LATENCY_MS:
                raise ValueError(f"{name}: expected 0..{MAX_LATENCY_MS:g} ms, got {value!r}")
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution: {distribution!r}; expected one of {', '.join(DISTRIBUTIONS)}")
        self.inner = inner
        self.latency_ms, self.jitter_ms = float(latency_ms), float(jitter_ms)
        self.distribution, self.seed = distribution, int(seed)
        self._rng = np.random.default_rng(self.seed)
        self._sleep = sleep
        #: Every latency waited, in seconds (the last 10 000).
        self.waited_s: collections.deque[float] = collections.deque(maxlen=10_000)

    def draw_only(self) -> None:
        """From now on draw and record each latency (``waited_s``) without waiting: for a caller on a virtual
        clock (``robofollow eval --execution realtime``), which charges the draw in control ticks instead."""
        self._sleep = _no_wait

    def next_latency_s(self) -> float:
        """Draw the next latency (seconds, >= 0)."""
        if self.jitter_ms == 0.0:
            ms = self.latency_ms
        elif self.distribution == "uniform":
            ms = self._rng.uniform(self.latency_ms - self.jitter_ms, self.latency_ms + self.jitter_ms)
        else:
            ms = self._rng.normal(self.latency_ms, self.jitter_ms)
        return max(0.0, float(ms)) / 1000.0

    @property
    def latency_parameters(self) -> dict[str, Any]:
        """What run.json records about the added latency."""
        return {"latency_ms": self.latency_ms, "jitter_ms": self.jitter_ms, "distribution": self.distribution,
                "seed": self.seed}

    def reset(self) -> None:
        self.inner.reset()

    def set_instruction(self, text: str) -> None:
        self.inner.set_instruction(text)

    def predict(self, obs: Observation, *, rtc: RtcHint | None = None) -> Any:
        delay = self.next_latency_s()
        self._sleep(delay)
        self.waited_s.append(delay)
        return predict_maybe_rtc(self.inner, obs, rtc)

    def close(self) -> None:
        close_policy(self.inner)

    def __getattr__(self, name: str) -> Any:
        # Adapter extras (``last_server_timing``, ``server_metadata``) stay reachable through the wrapper;
        # declarations are not forwarded: they are read from the inner policy itself, through the wrappers.
        if name in ("inner", "needs_privileged", "accepts_rtc"):
            raise AttributeError(name)
        return getattr(self.inner, name)
