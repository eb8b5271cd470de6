"""Registers the built-in expert and baseline policies as SPEC names: ``oracle``, ``blind``, ``memorizer``.

Imported lazily by ``load_policy`` so that naming a built-in never costs a SAPIEN import unless used.
"""

from __future__ import annotations

from typing import Any

from robofollow_ros.policy.interface import Policy
from robofollow_ros.policy.spec import register_builtin


def _oracle(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.oracle import OraclePolicy

    return OraclePolicy(**kwargs)


def _blind(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.baselines import BlindPolicy

    return BlindPolicy(**kwargs)


def _memorizer(**kwargs: Any) -> Policy:
    from robofollow_ros.policy.baselines import MemorizerPolicy

    return MemorizerPolicy(**kwargs)


register_builtin("oracle", _oracle)
register_builtin("blind", _blind)
register_builtin("memorizer", _memorizer)
