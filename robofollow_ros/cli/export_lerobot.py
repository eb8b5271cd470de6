"""``robofollow export-lerobot``: ROS 2 bags of sim or rig runs → a LeRobot v3.0 dataset."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, integer
from robofollow_ros.exit_status import EXIT_OUTPUT_UNUSABLE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export-lerobot", help="convert recorded trials / teleop sessions (ROS 2 bags, MCAP) to a LeRobot dataset",
        description="Reads /joint_states, /robofollow/joint_command, /cameras/<camera>/image_raw[/compressed], "
                    "/robofollow/trial and /robofollow/instruction; one episode per trial (its running phase), "
                    "resampled at --fps. Refuses bags recorded at the policy rate (record with `eval --record "
                    "--record-rate N`) and episodes a stream covers for under 90 %. See docs/learning.md.",
    )
    p.add_argument("bags", nargs="+", type=Path, metavar="BAG", help="rosbag2 directories or .mcap files")
    p.add_argument("--output", required=True, type=Path, help="new or empty dataset directory")
    p.add_argument("--fps", type=integer(1, 100), default=10, help="frames per second of the dataset (default 10)")
    p.add_argument("--task", help="instruction for bags that carry none (teleop sessions)")
    p.add_argument("--vcodec", choices=("libsvtav1", "h264"), default="libsvtav1", help="video codec")
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from robofollow_ros.datasets.bags import BagError, episodes_from_bag
    from robofollow_ros.datasets.staging import load_staged, stage_episode, staging_root
    from robofollow_ros.datasets.video import VideoSettings
    from robofollow_ros.datasets.writer import assemble

    for bag in args.bags:
        if not bag.exists():
            raise CliError(f"BAG: {bag} does not exist")
    out: Path = args.output
    if out.exists() and not out.is_dir():
        raise CliError(f"--output: {out} exists and is not a directory; give a new or empty directory")
    if out.exists() and any(out.iterdir()):
        raise CliError(f"--output: {out} is not empty")
    video = VideoSettings(args.vcodec)
    staging = staging_root(out)
    count = 0
    try:
        for bag in args.bags:
            for episode in episodes_from_bag(bag, args.fps, args.task):
                stage_episode(staging, f"ep{count:06d}", episode.task, episode.state, episode.action, episode.images,
                              args.fps, video, episode.provenance, episode.intervention)
                count += 1
                print(f"episode {count - 1}: {episode.provenance['frames']} frames from {bag} "
                      f"({episode.provenance['episode']}): {episode.task}")
        done, _ = load_staged(staging)
        if not done:
            raise CliError("no episode found in the bags (no running trial with joint states and all three cameras)")
        ordered = [done[k] for k in sorted(done)]
        info = assemble(out, ordered, args.fps, video,
                        extra_meta={"episodes": [ep.meta["provenance"] for ep in ordered]})
    except BagError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"--output: {exc}", EXIT_OUTPUT_UNUSABLE) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"dataset {out}: {info['total_episodes']} episodes, {info['total_frames']} frames, "
          f"{info['total_tasks']} tasks")
    return 0
