"""Checkpoints of the learned policy: one ``torch.save`` file, loaded with ``weights_only=True``.

A checkpoint holds the model and optimizer state, the step, the RNG states (so ``--resume`` goes
on exactly), the normalisation statistics, the training settings and the identity of the dataset
it was trained on. Only tensors, numbers, strings, lists and dicts go in: nothing is unpickled as
code when a checkpoint is loaded. A bad or foreign file fails with one line naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

FORMAT = "robofollow-learned-bc/1"
REQUIRED = ("format", "model_config", "model", "norm", "step", "train_config", "dataset")


class CheckpointError(ValueError):
    """The file is missing, unreadable or not a checkpoint of this policy; the message names it."""


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write atomically (temporary file, then rename): a crash mid-save keeps the previous checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": FORMAT, **payload}, tmp)
    tmp.replace(path)


def load_checkpoint(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r}: no such file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a foreign or truncated file
        raise CheckpointError(f"checkpoint {str(path)!r}: not a torch checkpoint saved by `robofollow train` "
                              f"({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {str(path)!r}: format {found!r} is not {FORMAT!r} "
                              "(made by `robofollow train`)")
    missing = [k for k in REQUIRED if k not in payload]
    if missing:
        raise CheckpointError(f"checkpoint {str(path)!r}: missing {', '.join(missing)}")
    return payload
