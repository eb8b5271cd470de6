"""Policies and how they travel. See docs/protocols.md.

The core, at this level: ``interface`` (what every policy speaks), ``observation`` (the observation
contract, checked in one place), ``spec`` (SPEC strings → policies, and the table of built-in
names), ``guard`` (time bounds on calls), ``latency`` (a policy slowed down on purpose, ``latency:MS:SPEC``)
and ``execution/`` (executing action chunks: synchronous, and real-time under latency; ``chunking``
re-exports its older names). Around it, one folder per kind of thing:

- ``wire/``: the wire protocols (one folder each: ``robofollow/``, ``openpi/``), what they share,
  and the serving machinery (per-connection sessions, dynamic batching);
- ``expert/``: the privileged expert and its ``oracle`` policy;
- ``baselines/``: ``hold`` and the mirage baselines (``memorizer``, ``blind``);
- ``learned/``: the policy behind ``learned:CKPT`` (training lives in ``robofollow_ros.learning``);
- ``drills/``: policies that exercise a serving stack end to end, never scored.

Imports point downward: the folders import the core (``baselines`` also the expert, ``drills`` also
``baselines.hold``), the core imports no folder except ``spec``, which builds policies from them
lazily; nothing in ``policy/`` imports ``learning``, ``evaluation``, ``nodes``, ``cli`` or anything
else above it. Importing this package costs neither torch nor SAPIEN. Only the light pieces are
re-exported here; the rest is imported from its module, or built for you by :func:`load_policy`.
"""

from robofollow_ros.policy.interface import (
    Observation,
    Policy,
    PolicyError,
    PolicyOutputError,
    ValidatedPolicy,
    close_policy,
    validate_actions,
)
from robofollow_ros.policy.spec import PolicySpecError, builtin_names, load_policy, register_builtin

__all__ = [
    "Observation",
    "Policy",
    "PolicyError",
    "PolicyOutputError",
    "PolicySpecError",
    "ValidatedPolicy",
    "builtin_names",
    "close_policy",
    "load_policy",
    "register_builtin",
    "validate_actions",
]
