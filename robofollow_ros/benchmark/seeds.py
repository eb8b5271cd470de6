"""RoboFollow's trial-seed rule: ``seed = base_seed + round*100 + (md5_32(task_id) mod 1000)``."""

from __future__ import annotations

import hashlib

DEFAULT_BASE_SEED = 42
DEFAULT_ROUNDS = 10


def md5_32(text: str) -> int:
    """Integer value of the first 8 hex digits of the MD5 of ``text`` (UTF-8)."""
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:8], 16)


def trial_seed(task_id: str, round_index: int, base_seed: int = DEFAULT_BASE_SEED) -> int:
    """Seed of one trial; ``round_index`` runs from 1."""
    if round_index < 1:
        raise ValueError(f"round: {round_index} must be >= 1")
    return base_seed + round_index * 100 + md5_32(task_id) % 1000


def trial_seeds(task_id: str, rounds: int = DEFAULT_ROUNDS, base_seed: int = DEFAULT_BASE_SEED) -> tuple[int, ...]:
    """The seeds of rounds 1..``rounds``."""
    return tuple(trial_seed(task_id, r, base_seed) for r in range(1, rounds + 1))
