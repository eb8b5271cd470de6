"""Training samples from a loaded dataset: (three images, instruction ids, state) → action chunk.

A sample is any frame t; its target is the next ``chunk`` actions of the same episode, the last one
repeated past the end (a finished demonstration holds still). Targets are offsets from the state
at t, normalised per joint; images are shifted by a few pixels at random (replicate padding), the
cheap augmentation that keeps a small CNN from memorising pixels.
"""

from __future__ import annotations

import numpy as np
import torch

from robofollow_ros.contract import CAMERA_NAMES
from robofollow_ros.datasets.reader import LoadedDataset
from robofollow_ros.policy.learned.scaling import Normaliser, images_tensor
from robofollow_ros.policy.learned.text import token_ids

MIN_STD = 1e-3


def chunk_index(data: LoadedDataset, chunk: int) -> np.ndarray:
    """[N, chunk] global row of the k-th future action of every frame (clamped to its episode's end)."""
    rows = []
    for start, length in zip(data.episode_starts, data.episode_lengths, strict=True):
        t = np.arange(length)[:, None] + np.arange(chunk)[None, :]
        rows.append(start + np.minimum(t, length - 1))
    return np.concatenate(rows)


def fit_normaliser(data: LoadedDataset, future: np.ndarray) -> Normaliser:
    delta = data.action[future] - data.state[:, None, :]
    return Normaliser(data.state.mean(0), np.maximum(data.state.std(0), MIN_STD),
                      delta.reshape(-1, delta.shape[-1]).mean(0), np.maximum(delta.reshape(-1, delta.shape[-1]).std(0),
                                                                             MIN_STD))


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    b, c, ch, h, w = images.shape
    flat = torch.nn.functional.pad(images.reshape(b * c, ch, h, w), (pad,) * 4, mode="replicate")
    dx = torch.randint(0, 2 * pad + 1, (b * c,), generator=generator)
    dy = torch.randint(0, 2 * pad + 1, (b * c,), generator=generator)
    out = torch.stack([flat[i, :, int(dy[i]):int(dy[i]) + h, int(dx[i]):int(dx[i]) + w] for i in range(b * c)])
    return out.reshape(b, c, ch, h, w)


class Batches:
    """Random mini-batches over every frame of a dataset (torch Generator: reproducible, resumable)."""

    def __init__(self, data: LoadedDataset, chunk: int, buckets: int, norm: Normaliser | None = None) -> None:
        self.data = data
        self.future = chunk_index(data, chunk)
        self.norm = norm or fit_normaliser(data, self.future)
        episode_tokens = [token_ids(task, buckets) for task in data.episode_tasks]
        self.tokens = np.asarray([episode_tokens[e] for e in np.repeat(np.arange(len(data.episode_lengths)),
                                                                        data.episode_lengths)], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.data.state)

    def sample(self, batch: int, generator: torch.Generator, shift: int = 3) -> tuple[torch.Tensor, ...]:
        rows = torch.randint(0, len(self), (batch,), generator=generator).numpy()
        n = self.norm
        state = self.data.state[rows]
        target = (self.data.action[self.future[rows]] - state[:, None, :] - n.delta_mean) / n.delta_std
        # [batch, cams, H, W, 3], stacked per batch: a stacked copy of every frame would double the dataset's memory
        images = images_tensor(np.stack([self.data.images[c][rows] for c in CAMERA_NAMES], axis=1))
        if shift:
            images = random_shift(images, shift, generator)
        return (images, torch.as_tensor(self.tokens[rows]), torch.as_tensor((state - n.state_mean) / n.state_std),
                torch.as_tensor(target, dtype=torch.float32))
