"""How numbers enter and leave the learned network: camera frames scaled to [-0.5, 0.5], joint
state and action offsets standardised by the :class:`Normaliser` stored in the checkpoint.

Training (``learning.batches``) and inference (``learned.policy``) must agree on these to the bit,
so both import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Normaliser:
    state_mean: np.ndarray
    state_std: np.ndarray
    delta_mean: np.ndarray
    delta_std: np.ndarray

    def to_dict(self) -> dict[str, list[float]]:
        return {k: [float(x) for x in getattr(self, k)] for k in ("state_mean", "state_std", "delta_mean", "delta_std")}

    @classmethod
    def from_dict(cls, data: dict[str, list[float]]) -> Normaliser:
        return cls(*(np.asarray(data[k], dtype=np.float32) for k in ("state_mean", "state_std", "delta_mean",
                                                                         "delta_std")))


def images_tensor(frames: list[np.ndarray] | np.ndarray) -> torch.Tensor:
    """uint8 [..., cams, H, W, 3] → float [..., cams, 3, H, W] in [-0.5, 0.5]."""
    x = torch.as_tensor(np.asarray(frames)).float().div_(255.0).sub_(0.5)
    return x.movedim(-1, -3)
