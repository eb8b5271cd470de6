"""Policy sessions: every connection to a policy server gets its own episode state (issue 16).

A RoboFollow policy keeps state between calls (the instruction, the step within the episode), so
two evaluators sharing one policy object silently change each other's scores. A server therefore
never hands one stateful policy to two connections at once. Where sessions come from:

- **a factory** (``robofollow serve`` always has one: the SPEC): one policy per connection. Policies
  of finished connections are kept and handed to the next connection after ``reset()``, so a busy
  server builds at most as many policies as it ever had connections at once.
- **a shareable policy**: one object for all connections. A policy declares itself shareable with
  a true ``shareable`` attribute, promising that ``predict`` depends only on the observation. The
  server then keeps each connection's instruction and passes it as ``obs["instruction"]``;
  ``reset``/``set_instruction`` never reach the shared object. Calls are serialised, or batched by
  a :class:`~robofollow_ros.policy.wire.batching.DynamicBatcher` when the policy has ``predict_batch``.
- **one plain policy object** (a library caller with an instance): it serves one connection at a
  time. A new connection waits up to ``single_wait_s`` for the previous one to finish (a client
  that reconnects at once must not race the server noticing its old connection's end), then is
  refused with a message saying why.

A per-connection session whose call timed out is dropped at once (:meth:`PolicySessions.drop_if_stuck`):
the connection's next request gets a fresh session, so one stalled call cannot fail every later
trial of that connection with ``PolicyBusyError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import Observation, Policy, PolicyError, ValidatedPolicy, close_policy
from robofollow_ros.policy.wire.batching import DynamicBatcher

PolicyFactory = Callable[[], Policy]


class SessionsBusyError(PolicyError):
    """No session can be handed out now (the single policy object is serving another connection)."""


def policy_attribute(policy: object, name: str) -> Any:
    """``name`` of the policy or of a policy it wraps (``.inner`` of validators and guards), else None."""
    seen = 0
    while policy is not None and seen < 16:
        value = vars(policy).get(name) if hasattr(policy, "__dict__") else None
        if value is None:
            value = getattr(type(policy), name, None)
        if value is not None:
            return value
        policy, seen = getattr(policy, "inner", None), seen + 1
    return None


def declares_shareable(policy: object) -> bool:
    """True when the policy (or one it wraps) says ``shareable = True``."""
    return policy_attribute(policy, "shareable") is True


class Session:
    """One connection's view of a policy: ``reset`` / ``set_instruction`` / ``predict`` (validated)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = ValidatedPolicy.wrap(policy)

    def reset(self) -> None:
        self.policy.reset()

    def set_instruction(self, text: str) -> None:
        self.policy.set_instruction(text)

    def predict(self, obs: Observation) -> np.ndarray:
        return self.policy.predict(obs)

    def healthy(self) -> bool:
        """False while a timed-out call is still running inside the policy (the guard knows)."""
        wait_idle = getattr(self.policy.inner, "wait_idle", None)
        return not callable(wait_idle) or bool(wait_idle(0))


class SharedSession(Session):
    """A connection's instruction in front of a shareable policy used by every connection."""

    def __init__(self, policy: Policy, lock: threading.Lock, batcher: DynamicBatcher | None) -> None:
        super().__init__(policy)
        self._lock = lock
        self._batcher = batcher
        self.instruction = ""

    def reset(self) -> None:
        self.instruction = ""

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: Observation) -> np.ndarray:
        own = {**obs, "instruction": self.instruction}
        if self._batcher is not None:
            return self._batcher.predict(own)
        with self._lock:
            return self.policy.predict(own)


class PolicySessions:
    """Hands each connection a :class:`Session`; see the module docstring for the three sources."""

    def __init__(self, *, factory: PolicyFactory | None = None, first: Policy | None = None,
                 shared: Policy | None = None, single: Policy | None = None,
                 batcher: DynamicBatcher | None = None, single_wait_s: float = 10.0) -> None:
        if sum(x is not None for x in (factory, shared, single)) != 1:
            raise ValueError("PolicySessions: give exactly one of factory, shared or single")
        if batcher is not None and shared is None:
            raise ValueError("PolicySessions: dynamic batching needs a shareable policy")
        self._factory = factory
        self._lock = threading.Lock()
        self._single_free = threading.Condition(self._lock)
        self.single_wait_s = single_wait_s
        self._idle: list[Session] = [Session(first)] if first is not None else []
        self._fresh = set(map(id, self._idle))  # never used yet: no reset needed
        self._owned: list[Session] = list(self._idle)  # built here: closed by close()
        self._shared = shared
        self._shared_lock = threading.Lock()
        self._single = Session(single) if single is not None else None
        self._single_in_use = False
        self.batcher = batcher
        self.kind = "per-connection" if factory is not None else "shared" if shared is not None else "single"
        self.built = len(self._idle)

    @classmethod
    def coerce(cls, source: PolicySessions | Policy | PolicyFactory) -> PolicySessions:
        """Sessions from what a server was given: sessions, a policy object, or a factory (e.g. a class)."""
        if isinstance(source, PolicySessions):
            return source
        if all(callable(getattr(source, m, None)) for m in ("reset", "set_instruction", "predict")) \
                and not isinstance(source, type):
            policy: Policy = source  # type: ignore[assignment]
            return cls(shared=policy) if declares_shareable(policy) else cls(single=policy)
        if callable(source):
            return cls(factory=source)  # type: ignore[arg-type]
        raise TypeError(f"policy: {type(source).__name__} is neither a policy, a factory nor PolicySessions")

    def declared(self, name: str) -> Any:
        """``name`` as the served policy declares it (:func:`policy_attribute`) — the shared or single object,
        else a policy this factory built — or None when none is built or none declares it."""
        with self._lock:
            known: list[object] = [self._shared] if self._shared is not None else []
            known += [s.policy for s in ([self._single] if self._single is not None else []) + self._owned]
        for policy in known:
            value = policy_attribute(policy, name)
            if value is not None:
                return value
        return None

    def acquire(self) -> Session:
        """A session for a new connection (may build a policy: the factory's errors propagate)."""
        if self._shared is not None:
            return SharedSession(self._shared, self._shared_lock, self.batcher)
        if self._single is not None:
            with self._single_free:
                if not self._single_free.wait_for(lambda: not self._single_in_use, self.single_wait_s):
                    raise SessionsBusyError(
                        "server busy: it holds one policy object, which is serving another connection; "
                        "serve a factory (robofollow serve does) or a policy with shareable = True "
                        "for concurrent clients")
                self._single_in_use = True
            return self._single
        with self._lock:
            session = self._idle.pop() if self._idle else None
        if session is None:
            assert self._factory is not None
            session = Session(self._factory())
            with self._lock:
                self._owned.append(session)
                self.built += 1
            return session
        if id(session) in self._fresh:
            self._fresh.discard(id(session))
        else:
            session.reset()  # a policy handed down from an earlier connection starts clean
        return session

    def release(self, session: Session) -> None:
        """The connection is over: keep its policy for the next one, or close it if it is stuck."""
        if isinstance(session, SharedSession):
            return
        if session is self._single:
            with self._single_free:
                self._single_in_use = False
                self._single_free.notify()
            return
        if session.healthy():
            with self._lock:
                self._idle.append(session)
            return
        with self._lock:
            if session in self._owned:
                self._owned.remove(session)
        close_policy(session.policy)

    def drop_if_stuck(self, session: Session) -> Session | None:
        """After a call that may have timed out: None if the connection's session was dropped.

        A per-connection session whose call overran its timeout is still running that call, so every
        later call would be refused as busy. It is released (closed, never handed out again) and the
        connection's next request gets a fresh session: the next trial starts clean. Shared and single
        sessions are kept: the stuck object is the only one there is (calls stay busy until it returns).
        """
        if self._factory is None or session.healthy():
            return session
        self.release(session)
        return None

    def close(self) -> None:
        """Close every policy built here (not objects the caller passed in, except ``first``)."""
        if self.batcher is not None:
            self.batcher.close()
        with self._lock:
            owned, self._owned, self._idle = self._owned, [], []
        for session in owned:
            close_policy(session.policy)
