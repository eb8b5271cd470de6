"""A LeRobot checkpoint as a RoboFollow policy, loaded with LeRobot's own factory; runs wherever
lerobot is installed (``.venv-lerobot``: lerobot 0.4.4), never in RoboFollow's environment.

``python -m robofollow_model_server --policy robofollow_model_server.lerobot:load --kwargs
'{"checkpoint": "outputs/train/.../pretrained_model"}'`` serves it to ``robofollow eval --policy tcp://...``.

Loading is what LeRobot's own servers do: ``PreTrainedConfig.from_pretrained`` for the type,
``lerobot.policies.factory.get_policy_class(type).from_pretrained`` for the weights, and
``make_pre_post_processors(config, pretrained_path=checkpoint)`` for the saved normalisation
pipelines (device overridden to ``device``).

Observation → features (the names ``robofollow collect`` / ``export-lerobot`` write, so a policy
trained on our datasets needs no rename map): ``observation.images.{head,left_wrist,right_wrist}``
float32 CHW in [0, 1] from our uint8 HWC images (resized to the feature's H×W when the rig renders
another size), ``observation.state`` the 14 joints in RoboFollow's order (grippers 1 = open, as the
dataset recorded them), ``task`` the instruction. Only the features the checkpoint declares are
built; a feature we cannot provide is refused at load with one line naming it.

Actions: the chunk API (``predict_action_chunk``, as LeRobot's async-inference server uses it), the
first ``rows`` rows (default the config's ``n_action_steps``), each row through the postprocessor
(unnormalisation), returned as float32 [T, 14] absolute joint targets. A policy that keeps an
observation history (diffusion: ``n_obs_steps``) has its queues filled as its ``select_action``
would fill them; one without the chunk API falls back to ``select_action`` (one row per call).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: LeRobot feature → RoboFollow camera key.
IMAGE_FEATURES = {"observation.images.head": "head_camera", "observation.images.left_wrist": "left_camera",
                  "observation.images.right_wrist": "right_camera"}
STATE_FEATURE = "observation.state"
ACTION_FEATURE = "action"
ACTION_DIM = 14


class LeRobotPolicy:
    """reset / set_instruction / predict around one LeRobot ``PreTrainedPolicy`` and its processors."""

    def __init__(self, checkpoint: str, device: str = "cpu", rows: int | None = None) -> None:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors

        self.torch = torch
        self.checkpoint = str(checkpoint)
        config = PreTrainedConfig.from_pretrained(self.checkpoint)
        config.device = device
        self.policy = get_policy_class(config.type).from_pretrained(self.checkpoint, config=config)
        self.policy.to(device)
        self.policy.eval()
        self.config = self.policy.config
        self.device = torch.device(device)
        self.preprocessor, self.postprocessor = make_pre_post_processors(
            self.config, pretrained_path=self.checkpoint,
            preprocessor_overrides={"device_processor": {"device": device}})
        self._check_features()
        default_rows = getattr(self.config, "n_action_steps", None) or 1
        self.rows = int(rows or default_rows)
        if self.rows < 1:
            raise ValueError(f"rows: {rows!r}; expected a positive number of action rows")
        self.instruction = ""

    def _check_features(self) -> None:
        inputs = dict(self.config.input_features)
        unknown = [key for key in inputs if key not in IMAGE_FEATURES and key != STATE_FEATURE]
        if unknown:
            raise ValueError(f"checkpoint {self.checkpoint}: input features {unknown} are not RoboFollow's "
                             f"(it provides {[*IMAGE_FEATURES, STATE_FEATURE]})")
        state = inputs.get(STATE_FEATURE)
        if state is not None and tuple(state.shape) != (ACTION_DIM,):
            raise ValueError(f"checkpoint {self.checkpoint}: {STATE_FEATURE} has shape {tuple(state.shape)}; "
                             f"RoboFollow's is ({ACTION_DIM},)")
        action = dict(self.config.output_features).get(ACTION_FEATURE)
        if action is None or tuple(action.shape) != (ACTION_DIM,):
            raise ValueError(f"checkpoint {self.checkpoint}: output feature {ACTION_FEATURE!r} is "
                             f"{None if action is None else tuple(action.shape)}; RoboFollow needs ({ACTION_DIM},)")
        self.image_shapes = {key: tuple(ft.shape) for key, ft in inputs.items() if key in IMAGE_FEATURES}

    # ------------------------------------------------------------------ policy interface
    def reset(self) -> None:
        self.policy.reset()
        for pipeline in (self.preprocessor, self.postprocessor):
            reset = getattr(pipeline, "reset", None)
            if callable(reset):
                reset()

    def set_instruction(self, text: str) -> None:
        self.instruction = text or ""

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            batch = self.preprocessor(self._batch(obs))
            chunk = self._chunk(batch)[:, :self.rows]
            rows = [self.postprocessor(chunk[:, i]) for i in range(chunk.shape[1])]
            actions = torch.stack(rows, dim=1)[0]
        return actions.detach().to("cpu", torch.float32).numpy()

    def server_info(self) -> dict[str, Any]:
        """What serves, for the client's run.json (openpi's metadata frame)."""
        import lerobot

        return {"lerobot": getattr(lerobot, "__version__", "?"), "policy_type": self.config.type,
                "checkpoint": self.checkpoint, "input_features": sorted(self.config.input_features),
                "rows": self.rows, "device": str(self.device)}

    def close(self) -> None:
        self.policy = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ mapping
    def _batch(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Our observation as LeRobot's raw batch (what ``prepare_observation_for_inference`` builds)."""
        torch = self.torch
        batch: dict[str, Any] = {}
        for key, shape in self.image_shapes.items():
            image = np.ascontiguousarray(obs["observation"][IMAGE_FEATURES[key]]["rgb"])
            x = torch.from_numpy(image).to(self.device).permute(2, 0, 1).float().div_(255.0)[None]
            if tuple(x.shape[1:]) != shape:
                x = torch.nn.functional.interpolate(x, size=shape[1:], mode="bilinear", align_corners=False,
                                                    antialias=True).clamp_(0.0, 1.0)
            batch[key] = x
        if STATE_FEATURE in self.config.input_features:
            state = np.asarray(obs["joint_action"]["vector"], dtype=np.float32).reshape(1, ACTION_DIM)
            batch[STATE_FEATURE] = torch.from_numpy(state.copy()).to(self.device)
        batch["task"] = obs.get("instruction") or self.instruction
        batch["robot_type"] = ""
        return batch

    def _chunk(self, batch: dict[str, Any]) -> Any:
        policy, torch = self.policy, self.torch
        queues = getattr(policy, "_queues", None)
        if isinstance(queues, dict) and hasattr(policy, "predict_action_chunk"):
            from lerobot.policies.utils import populate_queues

            batch = dict(batch)  # the history select_action keeps (diffusion), filled the same way
            image_keys = list(getattr(self.config, "image_features", None) or [])
            if image_keys:
                batch["observation.images"] = torch.stack([batch[key] for key in image_keys], dim=-4)
            policy._queues = populate_queues(queues, batch)
            chunk = policy.predict_action_chunk(batch)
        elif hasattr(policy, "predict_action_chunk"):
            chunk = policy.predict_action_chunk(batch)
        else:
            chunk = policy.select_action(batch)
        if chunk.ndim == 2:
            chunk = chunk[:, None]
        return chunk


def load(checkpoint: str, device: str = "cpu", rows: int | None = None) -> LeRobotPolicy:
    """``--policy robofollow_model_server.lerobot:load --kwargs '{"checkpoint": DIR}'``."""
    return LeRobotPolicy(checkpoint, device=device, rows=rows)
