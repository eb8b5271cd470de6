"""Policies the model-side package (model_server/) serves in tests: plain numpy (and torch for the
shutdown test), importable without robofollow_ros, so the server process proves it needs nothing
of ours. Their answers are a digest of what they received, so a test can tell that every byte of
every image, the joints and the instruction crossed the wire intact.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np

CAMERAS = ("head_camera", "left_camera", "right_camera")


def digest_row(obs: dict[str, Any], instruction: str, resets: int, predicts: int) -> np.ndarray:
    """14 numbers that change with any byte of the observation: per camera a hash of its pixels and
    its height and width, the instruction's hash, the episode's reset and predict counts."""
    row = np.zeros(14, dtype=np.float64)
    for i, key in enumerate(CAMERAS):
        image = np.ascontiguousarray(obs["observation"][key]["rgb"])
        row[3 * i] = int.from_bytes(hashlib.sha256(image.tobytes()).digest()[:3], "big")
        row[3 * i + 1], row[3 * i + 2] = image.shape[:2]
    row[9] = int.from_bytes(hashlib.sha256(instruction.encode()).digest()[:3], "big")
    row[10], row[11] = resets, predicts
    return row


class DigestPolicy:
    """Row 0: the joint vector it received; row 1: :func:`digest_row`; ``chunk - 2`` more rows of row 0."""

    def __init__(self, chunk: int = 4, close_marker: str | None = None, close_mode: str | None = None) -> None:
        self.chunk = chunk
        self.close_marker = close_marker
        #: ``"block"``: close() writes "closing" to ``close_marker`` and never returns (vla-eval's
        #: ``Connection`` retrying a vanished server); ``"raise"``: close() raises.
        self.close_mode = close_mode
        self.instruction = ""
        self.resets = self.predicts = 0

    def reset(self) -> None:
        self.resets += 1
        self.predicts = 0

    def set_instruction(self, text: str) -> None:
        self.instruction = text

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        self.predicts += 1
        joints = np.asarray(obs["joint_action"]["vector"], dtype=np.float64)
        rows = [joints, digest_row(obs, self.instruction, self.resets, self.predicts)]
        return np.stack(rows + [joints] * (self.chunk - 2)).astype(np.float32)

    def close(self) -> None:
        if self.close_mode == "block":
            if self.close_marker:
                Path(self.close_marker).write_text("closing")
            time.sleep(600)
        if self.close_mode == "raise":
            raise RuntimeError("could not release the model's device\nsecond line of the reason")
        if self.close_marker:
            Path(self.close_marker).write_text("closed")


class TorchPolicy:
    """A small torch network on the head camera; ``busy_s`` keeps each predict inside torch that long
    (so a shutdown can find a call in progress); ``started`` is a file touched when a predict begins."""

    def __init__(self, busy_s: float = 0.0, started: str | None = None, close_marker: str | None = None) -> None:
        import torch

        torch.manual_seed(0)
        self.torch = torch
        self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 5, stride=2), torch.nn.ReLU(),
                                       torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 8 * 14))
        self.busy_s, self.started, self.close_marker = busy_s, started, close_marker

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        if self.started:
            Path(self.started).touch()
        torch = self.torch
        image = np.array(obs["observation"]["head_camera"]["rgb"])
        x = torch.from_numpy(image).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            until = time.monotonic() + self.busy_s
            out = self.net(x)
            while time.monotonic() < until:
                out = out + 0 * self.net(x).sum()
        return out.reshape(8, 14).numpy()

    def close(self) -> None:
        if self.close_marker:
            Path(self.close_marker).write_text("closed")


def digest(**kwargs: Any) -> DigestPolicy:
    return DigestPolicy(**kwargs)


def torch_policy(**kwargs: Any) -> TorchPolicy:
    return TorchPolicy(**kwargs)
