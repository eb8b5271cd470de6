"""Run by .venv-lerobot's Python (LeRobot's own environment), never imported by the test suite:
writes a small ACT policy with random weights, built from its config over RoboFollow's dataset
features, with its pre/post-processors, exactly as LeRobot's training saves a checkpoint
(``save_pretrained`` of the policy and of both pipelines).

    python test/lerobot_random_policy.py OUT_DIR WIDTH HEIGHT [OBS.npz REF.npy]

With ``OBS.npz REF.npy`` (one process: LeRobot's imports take seconds) it then saves to REF.npy
the actions LeRobot's own inference path gives for one observation (``OBS.npz``:
``head``, ``left_wrist``, ``right_wrist`` uint8 HWC, ``state``; ``task``): the checkpoint loaded by
the factory, then ``lerobot.utils.control_utils.predict_action`` (prepare, preprocessor,
``select_action``, postprocessor) called ``n_action_steps`` times, one row each, as lerobot-record
runs a policy on a robot. The test compares the model server's chunk with these rows.

The normalisation stats are chosen, not learned: state/action mean 0 and std 0.5 per joint, images
ImageNet's. No network access (``pretrained_backbone_weights=None``).
"""

from __future__ import annotations

import sys

import torch
from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.factory import make_pre_post_processors

CAMERAS = ("head", "left_wrist", "right_wrist")


def main(out: str, width: int = 64, height: int = 48) -> None:
    torch.manual_seed(0)
    inputs = {f"observation.images.{cam}": PolicyFeature(FeatureType.VISUAL, (3, height, width)) for cam in CAMERAS}
    inputs["observation.state"] = PolicyFeature(FeatureType.STATE, (14,))
    config = ACTConfig(input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (14,))},
                       chunk_size=10, n_action_steps=8, dim_model=64, n_heads=4, dim_feedforward=128,
                       n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
                       pretrained_backbone_weights=None, device="cpu",
                       normalization_mapping={"VISUAL": NormalizationMode.MEAN_STD,
                                              "STATE": NormalizationMode.MEAN_STD,
                                              "ACTION": NormalizationMode.MEAN_STD})
    stats = {key: {"mean": torch.tensor([[[0.485]], [[0.456]], [[0.406]]]),
                   "std": torch.tensor([[[0.229]], [[0.224]], [[0.225]]])} for key in inputs if "images" in key}
    for key in ("observation.state", "action"):
        stats[key] = {"mean": torch.zeros(14), "std": torch.full((14,), 0.5)}
    policy = ACTPolicy(config)
    preprocessor, postprocessor = make_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(out)
    preprocessor.save_pretrained(out)
    postprocessor.save_pretrained(out)
    print(out)


def reference(checkpoint: str, obs_path: str, out: str) -> None:
    import numpy as np
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class
    from lerobot.utils.control_utils import predict_action

    config = PreTrainedConfig.from_pretrained(checkpoint)
    policy = get_policy_class(config.type).from_pretrained(checkpoint, config=config)
    policy.eval()
    preprocessor, postprocessor = make_pre_post_processors(config, pretrained_path=checkpoint)
    data = np.load(obs_path)
    raw = {f"observation.images.{cam}": data[cam] for cam in CAMERAS}
    raw["observation.state"] = data["state"].astype(np.float32)
    policy.reset()
    rows = [predict_action(dict(raw), policy, torch.device("cpu"), preprocessor, postprocessor, use_amp=False,
                           task=str(data["task"]))[0].numpy() for _ in range(config.n_action_steps)]
    np.save(out, np.stack(rows))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    if len(sys.argv) == 6:
        reference(sys.argv[1], sys.argv[4], sys.argv[5])
