"""The ``mutated`` family: trials of the other families, scrambled where no script would go.

Why: every other family scripts a plausible attempt, and a blind spot shared by the scorer and the
reference would hide exactly where those scripts never go. A mutated case takes a drawn case of any
family and applies one to six random edits -- frames deleted, duplicated or played backwards, a
gripper set to an edge value on one frame or a run of frames (either arm), an object moved on a
coarse grid from some frame on (ties become likely), the source put on or next to the target, the
other arm sent into the operation area, the task arm snapped onto an object, an object lifted by
exactly the lift thresholds -- and the online result must still equal the reference at every prefix.
The edits are drawn from a NumPy generator seeded by hypothesis, so a failing case replays.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import strategies as st

from scoring_edges import Case

GRIP_EDGES = (0.0, 0.1, 0.2, 0.2499, 0.25, 0.2501, 0.3, 0.3499, 0.35, 0.3501, 0.5, 0.6999, 0.7, 0.7001, 1.0)
GRID_STEPS = (0.0, 0.001, -0.001, 0.005, -0.005, 0.01, -0.01, 0.02, -0.02, 0.03, 0.04, 0.05, 0.06, -0.06, 0.07, 0.12)
LIFTS = (0.0099, 0.01, 0.0101, 0.03, 0.06, 0.2)
EDITS = ("delete", "dup", "reverse", "grip", "grip_run", "shift", "onto_target", "other_in_area", "snap", "lift")


def _edit(frames: list[dict[str, Any]], case: Case, rng: np.random.Generator) -> None:
    task = case.task
    other = "right" if task.arm == "left" else "left"
    names = list(frames[0]["objects"])
    n = len(frames)
    kind = str(rng.choice(EDITS))
    a = int(rng.integers(0, n))
    b = int(rng.integers(a, min(n, a + 8))) + 1
    if kind == "delete" and b - a < n:
        del frames[a:b]
    elif kind == "dup":
        frames[b:b] = copy.deepcopy(frames[a:b])
    elif kind == "reverse":
        frames[a:b] = frames[a:b][::-1]
    elif kind in ("grip", "grip_run"):
        arm = task.arm if rng.random() < 0.6 else other
        value = float(rng.choice(GRIP_EDGES))
        for f in frames[a:(b if kind == "grip_run" else a + 1)]:
            f[f"gripper_{arm}"] = value
    elif kind == "shift":
        name = task.source if rng.random() < 0.5 else str(rng.choice(names))
        d = [float(rng.choice(GRID_STEPS)) for _ in range(3)]
        for f in frames[a:]:
            f["objects"][name] = [f["objects"][name][i] + d[i] for i in range(3)]
    elif kind == "onto_target":
        ref = task.target or task.second_source or str(rng.choice(names))
        d = [float(rng.choice(GRID_STEPS)) for _ in range(3)]
        for f in frames[a:b]:
            p = f["objects"][ref]
            f["objects"][task.source] = [p[i] + d[i] for i in range(3)]
    elif kind == "other_in_area":
        for f in frames[a:b]:
            f[f"ee_{other}"] = [0.0, 0.0, 0.8]
    elif kind == "snap":
        name = str(rng.choice(names))
        dx = float(rng.choice(GRID_STEPS[:5]))
        for f in frames[a:b]:
            p = f["objects"][name]
            f[f"ee_{task.arm}"] = [p[0] + dx, p[1], p[2] + 0.12]
    elif kind == "lift":
        name = task.source if rng.random() < 0.7 else str(rng.choice(names))
        z0 = frames[0]["objects"][name][2] + float(rng.choice(LIFTS))
        for f in frames[a:b]:
            f["objects"][name] = [f["objects"][name][0], f["objects"][name][1], z0]


def mutate(case: Case, seed: int) -> Case:
    """``case`` after one to six random edits (every prefix is compared, as in the scripted families)."""
    rng = np.random.default_rng(seed)
    frames = copy.deepcopy(case.frames)
    for _ in range(int(rng.integers(1, 7))):
        _edit(frames, case, rng)
    return Case(case.task, frames, None)


def mutated(bases: dict[str, st.SearchStrategy[Case]]) -> st.SearchStrategy[Case]:
    """A case of any of ``bases``, mutated."""
    return st.tuples(st.sampled_from(sorted(bases)).flatmap(lambda name: bases[name]),
                     st.integers(0, 2**32 - 1)).map(lambda pair: mutate(*pair))
