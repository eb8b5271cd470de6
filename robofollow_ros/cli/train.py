"""``robofollow train``: fit the learned chunk policy to a LeRobot v3.0 dataset on the CPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import SEED, CliError, image_size, integer, number
from robofollow_ros.exit_status import EXIT_OUTPUT_UNUSABLE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "train", help="train the learned baseline (language-conditioned visuomotor BC) from a LeRobot dataset",
        description="Behaviour cloning with action chunking on the CPU; writes CKPT (load it as "
                    "--policy learned:CKPT), CKPT.loss.png and CKPT.loss.json.",
    )
    p.add_argument("--dataset", required=True, type=Path, help="a LeRobot v3.0 dataset (robofollow collect)")
    p.add_argument("--output", required=True, type=Path, help="checkpoint file to write")
    p.add_argument("--steps", type=integer(1, 10_000_000), default=20_000,
                   help="optimizer steps in total (default 20000)")
    p.add_argument("--batch", type=integer(1, 4096), default=64, help="batch size (default 64)")
    p.add_argument("--lr", type=number(0, 10, low_open=True), default=1e-3, help="peak learning rate (default 1e-3)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of weights, batches and augmentation (default 0)")
    p.add_argument("--checkpoint-every", type=integer(1, 10_000_000), default=1000,
                   help="steps between checkpoints (default 1000)")
    p.add_argument("--chunk", type=integer(1, 1000), default=50, help="future actions predicted per call (default 50)")
    p.add_argument("--image-size", type=image_size, default="64x48",
                   help="network input per camera, WIDTHxHEIGHT (default 64x48)")
    p.add_argument("--threads", type=integer(1, 256), default=2, help="torch CPU threads (default 2)")
    p.add_argument("--resume", action="store_true", help="continue the training saved in --output")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    import time

    from robofollow_ros.datasets.reader import DatasetError, read_info
    from robofollow_ros.evaluation.progress import Heartbeat, waited

    try:
        read_info(args.dataset)  # a foreign directory is one line at once, before torch loads
    except DatasetError as exc:
        raise CliError(str(exc)) from None
    since = time.monotonic()
    with Heartbeat(lambda: f"… importing torch, {waited(since)}", sys.stderr):  # seconds on a cold start
        from robofollow_ros.learning.train import TrainConfig, train
        from robofollow_ros.policy.learned.checkpoint import CheckpointError

    width, height = args.image_size
    try:
        config = TrainConfig(dataset=args.dataset, output=args.output, steps=args.steps, batch=args.batch, lr=args.lr,
                             seed=args.seed, checkpoint_every=args.checkpoint_every, image_width=width,
                             image_height=height, chunk=args.chunk, threads=args.threads, resume=args.resume)
        summary = train(config, stream=sys.stderr)
    except (DatasetError, CheckpointError, ValueError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"--output: {exc}", EXIT_OUTPUT_UNUSABLE) from None
    print(json.dumps(summary))
    return 0
