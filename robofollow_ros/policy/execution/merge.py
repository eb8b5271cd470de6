"""Rules for merging a new chunk into rows still queued for the same control steps.

When chunks overlap, each queued step holds every prediction made for it, oldest first, and the row
executed is what the rule makes of them:

* ``latest``: the newest prediction (LeRobot's ``latest_only``).
* ``weighted``: ``old·(1-w) + new·w`` folded pairwise as each chunk arrives; ``w = 0.7`` is LeRobot's
  ``weighted_average`` default (``lerobot/async_inference/configs.py`` AGGREGATE_FUNCTIONS:
  ``0.3 * old + 0.7 * new``; its ``conservative`` is ``w = 0.3``).
* ``average``: LeRobot's ``average``, ``0.5·old + 0.5·new`` folded pairwise (a newer chunk counts as
  much as everything before it together, not as one of n).
* ``ensemble``: ACT's temporal ensembling over all predictions of the step, ``Σ wᵢ·pᵢ / Σ wᵢ`` with
  ``wᵢ = exp(-m·i)`` and ``i = 0`` the OLDEST prediction (tonyzhaozh/act ``imitate_episodes.py``:
  ``exp_weights = np.exp(-k * np.arange(len(actions_for_curr_step)))`` over ``all_time_actions[:, t]``,
  rows in prediction order, ``k = 0.01``; LeRobot's ``ACTTemporalEnsembler`` in
  ``lerobot/policies/act/modeling_act.py`` computes the same online, "w₀ the oldest action"). ``m > 0``
  favours older predictions (ACT's 0.01), ``m = 0`` is the plain mean, ``m < 0`` favours newer ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MERGE_RULES = ("latest", "weighted", "average", "ensemble")


@dataclass
class Slot:
    """One queued control step: its predictions (oldest first) and the row the rule makes of them."""

    predictions: list[np.ndarray]
    value: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.value = self.predictions[-1]


class MergeRule:
    """``rule`` (one of :data:`MERGE_RULES`) with its parameter: ``weight`` (``weighted``) or
    ``ensemble_coeff`` (``ensemble``); the other parameter is ignored."""

    def __init__(self, rule: str = "latest", *, weight: float = 0.7, ensemble_coeff: float = 0.01) -> None:
        if rule not in MERGE_RULES:
            raise ValueError(f"merge: {rule!r} is not a rule; expected one of {', '.join(MERGE_RULES)}")
        if not (isinstance(weight, int | float) and 0.0 <= weight <= 1.0):
            raise ValueError(f"weight: expected a number in [0, 1], got {weight!r}")
        if not (isinstance(ensemble_coeff, int | float) and math.isfinite(ensemble_coeff)):
            raise ValueError(f"ensemble_coeff: expected a finite number, got {ensemble_coeff!r}")
        self.rule, self.weight, self.ensemble_coeff = rule, float(weight), float(ensemble_coeff)

    def start(self, row: np.ndarray) -> Slot:
        """A step predicted for the first time."""
        return Slot([row])

    def merge(self, slot: Slot, new: np.ndarray) -> None:
        """Fold the newer prediction ``new`` into ``slot``."""
        old = slot.value
        slot.predictions.append(new)
        if self.rule == "latest":
            slot.value = new
        elif self.rule == "weighted":
            slot.value = (old * (1.0 - self.weight) + new * self.weight).astype(np.float32)
        elif self.rule == "average":
            slot.value = (0.5 * old + 0.5 * new).astype(np.float32)
        else:
            preds = np.stack(slot.predictions).astype(np.float64)
            weights = np.exp(-self.ensemble_coeff * np.arange(len(preds)))
            slot.value = (weights @ preds / weights.sum()).astype(np.float32)
        if self.rule != "ensemble":
            slot.predictions = [slot.value]  # pairwise rules need only the running value

    def describe(self) -> dict[str, object]:
        """The rule and its parameter, for run.json."""
        out: dict[str, object] = {"merge": self.rule}
        if self.rule == "weighted":
            out["weight"] = self.weight
        elif self.rule == "ensemble":
            out["ensemble_coeff"] = self.ensemble_coeff
        return out
