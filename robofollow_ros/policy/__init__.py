"""Policies and how they travel: the interface, SPEC loading, the RoboFollow TCP and openpi
websocket protocols (client and server each), and chunk execution. See docs/protocols.md.

Only the light pieces are re-exported here; transports (``wire/``: each protocol's client and
server) are imported from their modules, or built for you by :func:`load_policy`.
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
