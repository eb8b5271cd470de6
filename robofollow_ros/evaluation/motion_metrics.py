"""What the executed commands of a realtime trial look like: steps and jerk, at chunk boundaries and within.

Stutter and jerks at chunk boundaries are the complaint real-time execution answers (GR00T issues 272 and
285, openpi 636), so the wall-clock evaluator measures them on the commands it sent, one per control tick:

* step: ``max_j |c[i] - c[i-1]|`` over the 12 arm joints (rad; the grippers' 0..1 openings are left out);
* jerk: ``max_j |c[i] - 3c[i-1] + 3c[i-2] - c[i-3]| / dt³`` (rad/s³), the third difference;
* a boundary tick is the first row sent after a chunk other than the first arrived; a within tick sends a
  row of the same chunk as the tick before. Ticks that hold are neither (a held command does not move).

Reported: the largest step, the mean step and jerk over boundary and within ticks, and their ratios
(boundary / within; None when either set is empty or the within mean is 0); the largest boundary and the
largest within step (their ratio is ``tools/boundary_steps.py``'s: a mean ratio also reflects *when*
chunks arrive, mostly while the arm moves, whereas the within ticks include slow and still ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, GRIPPER_INDEX

_ARM_JOINTS = np.array([i for i in range(ACTION_DIM) if i not in set(GRIPPER_INDEX.values())])


class MotionTrace:
    """The commands of one trial, tick by tick (:meth:`add`), and their measures (:meth:`summary`)."""

    def __init__(self, control_dt_s: float) -> None:
        self.dt = float(control_dt_s)
        self._rows: list[np.ndarray] = []
        self._kind: list[str] = []  # "boundary" | "within" | "first" | "hold"

    def add(self, row: np.ndarray, *, hold: bool, new_chunk: bool, first_chunk: bool) -> None:
        """One tick's command; ``new_chunk``: a chunk arrived on this tick; ``first_chunk``: it was the first."""
        self._rows.append(np.asarray(row, dtype=np.float64)[_ARM_JOINTS])
        if hold:
            kind = "hold"
        elif new_chunk:
            kind = "first" if first_chunk else "boundary"
        else:
            kind = "within"
        self._kind.append(kind)

    def summary(self) -> dict[str, Any]:
        rows = np.asarray(self._rows).reshape(-1, len(_ARM_JOINTS))
        steps = np.zeros(len(rows))
        jerks = np.full(len(rows), np.nan)
        if len(rows) > 1:
            steps[1:] = np.abs(np.diff(rows, axis=0)).max(axis=1)
        if len(rows) > 3:
            third = rows[3:] - 3 * rows[2:-1] + 3 * rows[1:-2] - rows[:-3]
            jerks[3:] = np.abs(third).max(axis=1) / self.dt ** 3
        kinds = np.asarray(self._kind)

        def mean(values: np.ndarray, kind: str) -> float | None:
            picked = values[(kinds == kind) & ~np.isnan(values)]
            return float(picked.mean()) if picked.size else None

        out: dict[str, Any] = {"ticks": len(rows), "boundary_ticks": int((kinds == "boundary").sum()),
                               "within_ticks": int((kinds == "within").sum()),
                               "max_step_rad": float(steps.max()) if len(rows) else 0.0}
        for name, values in (("step_rad", steps), ("jerk_rad_s3", jerks)):
            boundary, within = mean(values, "boundary"), mean(values, "within")
            out[f"boundary_{name}"] = boundary
            out[f"within_{name}"] = within
            out[f"{name.split('_')[0]}_ratio"] = boundary / within if boundary is not None and within else None
        boundary_steps = steps[kinds == "boundary"]
        out["max_boundary_step_rad"] = float(boundary_steps.max()) if boundary_steps.size else None
        within_steps = steps[kinds == "within"]
        out["max_within_step_rad"] = float(within_steps.max()) if within_steps.size else None
        return out
