"""Scene entropy H(T|S): how many tasks one scene (layout) admits, in bits.

With tasks spread uniformly over the tasks of their scene group, H(T|S) = Σ_g (n_g/N)·log2 n_g.
A benchmark whose every layout admits one task scores 0: language is then optional.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

#: LIBERO's 40 tasks grouped by the scene (BDDL layout) they run in. LIBERO-Goal's ten tasks share
#: one kitchen layout; every LIBERO-Spatial and LIBERO-Object task has its own layout; in LIBERO-10
#: only LIVING_ROOM_SCENE2 hosts two tasks.
LIBERO_SCENE_GROUPS: Mapping[str, int] = {
    "libero_goal/kitchen_goal": 10,
    **{f"libero_spatial/layout_{i}": 1 for i in range(10)},
    **{f"libero_object/layout_{i}": 1 for i in range(10)},
    "libero_10/LIVING_ROOM_SCENE2": 2,
    **{
        f"libero_10/{scene}": 1
        for scene in (
            "KITCHEN_SCENE3",
            "KITCHEN_SCENE4",
            "KITCHEN_SCENE6",
            "KITCHEN_SCENE8",
            "LIVING_ROOM_SCENE1",
            "LIVING_ROOM_SCENE5",
            "LIVING_ROOM_SCENE6",
            "STUDY_SCENE1",
        )
    },
}


def scene_entropy(group_sizes: Mapping[str, int] | Iterable[int]) -> float:
    """H(T|S) in bits from the number of tasks in each scene group."""
    sizes = list(group_sizes.values()) if isinstance(group_sizes, Mapping) else list(group_sizes)
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError(f"group_sizes: need positive task counts, got {sizes}")
    total = sum(sizes)
    return sum(n / total * math.log2(n) for n in sizes)


def group_sizes(scene_groups: Iterable[str]) -> dict[str, int]:
    """Count tasks per scene group from each task's group label."""
    return dict(Counter(scene_groups))
