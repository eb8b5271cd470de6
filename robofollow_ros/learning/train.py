"""``robofollow train``: behaviour cloning of the chunk policy on the CPU, resumable and seeded.

Everything random (initial weights, batch order, image shifts) comes from one seed, and the RNG
states travel in the checkpoint, so a resumed run continues the same sequence of batches.
Checkpoints are written every ``checkpoint_every`` steps and at the end, each with a loss plot
(``<CKPT>.loss.png``) and the loss log (``<CKPT>.loss.json``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from robofollow_ros.datasets.reader import DatasetError, LoadedDataset, fingerprint, load_dataset, read_info
from robofollow_ros.evaluation.progress import Heartbeat, Ticker, waited
from robofollow_ros.learning.batches import Batches
from robofollow_ros.policy.learned.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from robofollow_ros.policy.learned.model import ChunkPolicyNet, ModelConfig
from robofollow_ros.policy.learned.scaling import Normaliser

#: Steps per point of the loss curve (``CKPT.loss.json``, ``CKPT.loss.png``).
LOSS_EVERY = 50

@dataclass(frozen=True)
class TrainConfig:
    dataset: Path
    output: Path
    steps: int = 20_000
    batch: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0
    checkpoint_every: int = 1000
    image_width: int = 64
    image_height: int = 48
    chunk: int = 50
    threads: int = 2
    resume: bool = False

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "checkpoint_every", "chunk", "threads", "image_width", "image_height"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"--lr: must be > 0, got {self.lr}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(dataset=str(self.dataset), output=str(self.output))
        return data


def learning_rate(config: TrainConfig, step: int) -> float:
    """Short linear warm-up, then cosine decay to a tenth."""
    warm = min(500, config.steps // 10 or 1)
    if step < warm:
        return config.lr * (step + 1) / warm
    progress = (step - warm) / max(1, config.steps - warm)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def _check_resume(config: TrainConfig, payload: dict[str, Any], data_fingerprint: str) -> None:
    trained_on = payload["dataset"]
    if trained_on.get("fingerprint") != data_fingerprint:
        raise DatasetError(f"--resume: {config.output} was trained on dataset {trained_on.get('root')!r} "
                           f"({trained_on.get('fingerprint')}); {config.dataset} is a different dataset "
                           f"({data_fingerprint})")
    model = payload["model_config"]
    if (model["chunk"], model["image_width"], model["image_height"]) != (config.chunk, config.image_width,
                                                                         config.image_height):
        raise DatasetError(f"--resume: {config.output} has chunk {model['chunk']} and images "
                           f"{model['image_width']}x{model['image_height']}; the command asks for {config.chunk} and "
                           f"{config.image_width}x{config.image_height}")


def train(config: TrainConfig, stream: TextIO | None = None) -> dict[str, Any]:
    """Train (or resume) and return the final checkpoint's summary."""
    stream = stream or sys.stderr
    torch.set_num_threads(config.threads)
    read_info(config.dataset)  # a foreign directory fails before anything heavy
    previous = load_checkpoint(config.output) if config.resume else None
    if not config.resume and Path(config.output).exists():
        raise CheckpointError(f"--output: {config.output} exists (add --resume to continue that training)")
    if previous is not None and int(previous["step"]) >= config.steps:  # done: no need to load (minutes, GBs)
        _check_resume(config, previous, fingerprint(config.dataset))
        stream.write(f"{config.output} already at step {previous['step']}; nothing to do\n")
        return {"checkpoint": str(config.output), "step": int(previous["step"]),
                "final_loss": previous["losses"][-1][1] if previous["losses"] else None,
                "frames": previous["dataset"]["frames"], "episodes": previous["dataset"]["episodes"]}
    stream.write(f"loading {config.dataset} ...\n")
    stream.flush()
    since = time.monotonic()
    with Heartbeat(lambda: f"… loading {config.dataset} (decoding its videos), {waited(since)}", stream):
        data: LoadedDataset = load_dataset(config.dataset, (config.image_width, config.image_height))
    if previous is not None:
        _check_resume(config, previous, data.fingerprint)
    model_config = ModelConfig(image_width=config.image_width, image_height=config.image_height, chunk=config.chunk)
    torch.manual_seed(config.seed)
    model = ChunkPolicyNet(model_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    batches = Batches(data, config.chunk, model_config.text_buckets,
                      Normaliser.from_dict(previous["norm"]) if previous else None)
    step, losses = 0, []
    if previous is not None:
        model.load_state_dict(previous["model"])
        optimizer.load_state_dict(previous["optimizer"])
        generator.set_state(previous["rng"]["batches"])
        torch.set_rng_state(previous["rng"]["torch"])
        step, losses = int(previous["step"]), list(previous["losses"])
    stream.write(f"{len(batches)} frames, {len(data.episode_lengths)} episodes, {len(set(data.episode_tasks))} "
                 f"instructions; training steps {step}..{config.steps}\n")
    recent: list[float] = []
    ticker = Ticker(config.steps, "step", stream=stream, already_done=step)

    def checkpoint() -> None:
        save_checkpoint(config.output, {
            "model_config": model_config.to_dict(), "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "norm": batches.norm.to_dict(), "step": step, "train_config": config.to_dict(), "losses": losses,
            "rng": {"batches": generator.get_state(), "torch": torch.get_rng_state()},
            "dataset": {"root": str(config.dataset), "fingerprint": data.fingerprint, "fps": data.fps,
                        "frames": len(batches), "episodes": len(data.episode_lengths)}})
        write_loss_report(Path(config.output), losses)

    model.train()
    with ticker.keep_alive():  # a line every few seconds, also while one step outlasts them
        while step < config.steps:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, step)
            images, tokens, state, target = batches.sample(config.batch, generator)
            loss = torch.nn.functional.l1_loss(model(images, tokens, state), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            recent.append(loss.item())
            if step % LOSS_EVERY == 0 or step == config.steps:
                losses.append([step, float(np.mean(recent))])
                recent.clear()
            # a line every few seconds (or redrawn on a terminal), however long a step takes: with slow steps a
            # line every LOSS_EVERY steps left minutes of silence, with fast ones it flooded the log
            ticker.tick(step, note=f"loss {float(np.mean(recent)) if recent else losses[-1][1]:.4f}")
            if step % config.checkpoint_every == 0 or step == config.steps:
                checkpoint()
    return {"checkpoint": str(config.output), "step": step, "final_loss": losses[-1][1] if losses else None,
            "frames": len(batches), "episodes": len(data.episode_lengths)}


def write_loss_report(checkpoint: Path, losses: list[list[float]]) -> None:
    checkpoint.with_name(checkpoint.name + ".loss.json").write_text(json.dumps(losses), encoding="utf-8")
    if not losses:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    steps, values = zip(*losses, strict=True)
    ax.plot(steps, values)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("L1 loss (normalised action chunk)")
    ax.set_title(checkpoint.name, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(checkpoint.with_name(checkpoint.name + ".loss.png"))
    plt.close(fig)
