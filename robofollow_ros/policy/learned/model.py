"""The visuomotor network: three cameras + instruction + joint state → a chunk of joint targets.

Per camera (one shared trunk; the camera's place in the concatenation tells them apart):
conv 5×5/2 → conv 3×3/2 → conv 3×3 with FiLM from the instruction (the words choose which features
light up: "the red ball" vs "the cube") → conv 3×3 → spatial softmax (expected image position of
each feature map: precise object locations from a small net) + mean pooling. The head is an MLP
that predicts ``chunk`` future targets as normalised offsets from the current joints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class ModelConfig:
    cameras: int = 3
    image_width: int = 64
    image_height: int = 48
    state_dim: int = 14
    chunk: int = 50
    text_buckets: int = 4096
    text_dim: int = 128
    hidden: int = 512
    keypoints: int = 32

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class SpatialSoftmax(nn.Module):
    """Expected (x, y) in [-1, 1] of each channel's softmax over the image."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        n, c, h, w = features.shape
        attention = F.softmax(features.reshape(n, c, h * w), dim=-1)
        ys = torch.linspace(-1.0, 1.0, h, device=features.device)
        xs = torch.linspace(-1.0, 1.0, w, device=features.device)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        x = (attention * grid_x.reshape(1, 1, -1)).sum(-1)
        y = (attention * grid_y.reshape(1, 1, -1)).sum(-1)
        return torch.cat([x, y], dim=1)


class CameraTrunk(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, stride=2, padding=2)
        self.conv2 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv4 = nn.Conv2d(64, config.keypoints, 3, padding=1)
        self.norm1, self.norm2, self.norm3 = nn.GroupNorm(8, 32), nn.GroupNorm(8, 32), nn.GroupNorm(8, 64)
        self.film = nn.Linear(config.text_dim, 2 * 64)
        self.softmax = SpatialSoftmax()
        self.out_dim = 2 * config.keypoints + 64

    def forward(self, images: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm1(self.conv1(images)))
        x = F.relu(self.norm2(self.conv2(x)))
        gamma, beta = self.film(text).chunk(2, dim=-1)
        x = F.relu(self.norm3(self.conv3(x)) * (1 + gamma[:, :, None, None]) + beta[:, :, None, None])
        return torch.cat([self.softmax(self.conv4(x)), x.mean(dim=(2, 3))], dim=1)


class ChunkPolicyNet(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.text = nn.EmbeddingBag(config.text_buckets, config.text_dim, mode="mean", padding_idx=0)
        self.text_proj = nn.Sequential(nn.Linear(config.text_dim, config.text_dim), nn.ReLU())
        self.trunk = CameraTrunk(config)
        self.state = nn.Linear(config.state_dim, 64)
        width = config.cameras * self.trunk.out_dim + config.text_dim + 64
        self.head = nn.Sequential(nn.Linear(width, config.hidden), nn.ReLU(), nn.Linear(config.hidden, config.hidden),
                                  nn.ReLU(), nn.Linear(config.hidden, config.chunk * config.state_dim))

    def forward(self, images: torch.Tensor, tokens: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """images [B, cameras, 3, H, W] in [-0.5, 0.5]; tokens [B, T] ids; state [B, 14] normalised
        → [B, chunk, 14] normalised offsets."""
        b, cams = images.shape[:2]
        text = self.text_proj(self.text(tokens))
        per_camera = self.trunk(images.flatten(0, 1), text.repeat_interleave(cams, dim=0)).reshape(b, -1)
        features = torch.cat([per_camera, text, F.relu(self.state(state))], dim=1)
        return self.head(features).reshape(b, self.config.chunk, self.config.state_dim)
