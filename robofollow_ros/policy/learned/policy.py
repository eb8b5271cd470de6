"""``learned:CKPT``: the trained chunk policy behind the ordinary Policy interface.

It reads the three camera images (resized to the training size with area averaging, as training
resized the dataset's frames), the joints and the instruction (a blank one included: the ``blank`` control);
never ``obs["privileged"]``.
``predict`` returns the full chunk of absolute joint targets (grippers clipped to [0, 1]).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import ACTION_DIM, CAMERA_NAMES, CAMERA_OBS_KEYS, GRIPPER_INDEX
from robofollow_ros.policy.interface import Observation, PolicyError


class LearnedPolicy:
    def __init__(self, checkpoint: str | Path, threads: int = 1) -> None:
        import torch

        from robofollow_ros.policy.learned.checkpoint import CheckpointError, load_checkpoint
        from robofollow_ros.policy.learned.model import ChunkPolicyNet, ModelConfig
        from robofollow_ros.policy.learned.scaling import Normaliser

        payload = load_checkpoint(checkpoint)
        try:
            self.config = ModelConfig(**payload["model_config"])
            self.net = ChunkPolicyNet(self.config)
            self.net.load_state_dict(payload["model"])
            self.norm = Normaliser.from_dict(payload["norm"])
        except (TypeError, KeyError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0][:160]
            raise CheckpointError(f"checkpoint {str(checkpoint)!r}: weights do not fit the model ({first})") from None
        self.net.eval()
        torch.set_num_threads(threads)
        self.checkpoint = str(checkpoint)
        self.step = int(payload["step"])
        self.tokens: Any = None

    def reset(self) -> None:
        self.tokens = None

    def set_instruction(self, text: str) -> None:
        import torch

        from robofollow_ros.policy.learned.text import token_ids

        if not isinstance(text, str):
            raise PolicyError(f"instruction: expected text, got {type(text).__name__}")
        # A blank instruction (the ``blank`` control) is a bag of no words: the text embedding's mean over
        # nothing, zeros. The policy then acts on the images and joints alone, as a policy given no words must.
        self.tokens = torch.as_tensor([token_ids(text, self.config.text_buckets)])

    def _images(self, obs: Observation) -> np.ndarray:
        import cv2

        size = (self.config.image_width, self.config.image_height)
        frames = []
        for camera in CAMERA_NAMES:
            rgb = (obs.get("observation", {}).get(CAMERA_OBS_KEYS[camera]) or {}).get("rgb")
            if rgb is None:
                raise PolicyError(f"observation: observation.{CAMERA_OBS_KEYS[camera]}.rgb is missing; the learned "
                                  "policy needs the three cameras (evaluate with --render)")
            rgb = np.asarray(rgb)
            if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
                raise PolicyError(f"observation: {CAMERA_OBS_KEYS[camera]}.rgb is {rgb.dtype} {rgb.shape}; "
                                  "expected uint8 (H, W, 3)")
            frames.append(rgb if rgb.shape[1::-1] == size else cv2.resize(rgb, size, interpolation=cv2.INTER_AREA))
        return np.stack(frames)

    def predict(self, obs: Observation) -> np.ndarray:
        import torch

        from robofollow_ros.policy.learned.scaling import images_tensor

        if self.tokens is None:
            raise PolicyError("learned policy: predict before set_instruction")
        try:
            state = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).reshape(-1)
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyError(f"observation: joint_action.vector is missing or not numeric ({exc})") from None
        if state.shape != (ACTION_DIM,) or not np.isfinite(state).all():
            raise PolicyError(f"observation: joint_action.vector must be {ACTION_DIM} finite values, got {state.shape}")
        n = self.norm
        with torch.no_grad():
            out = self.net(images_tensor(self._images(obs)[None]), self.tokens,
                           torch.as_tensor(((state - n.state_mean) / n.state_std)[None]))
        chunk = out[0].numpy() * n.delta_std + n.delta_mean + state[None, :]
        for index in GRIPPER_INDEX.values():
            chunk[:, index] = np.clip(chunk[:, index], 0.0, 1.0)
        return chunk.astype(np.float32)

    def close(self) -> None:
        self.tokens = None


def learned_policy(checkpoint: str, **kwargs: Any) -> LearnedPolicy:
    """Factory behind the ``learned:CKPT`` SPEC."""
    return LearnedPolicy(checkpoint, **kwargs)
