"""``robofollow video BAG... [--out DIR]``: an MP4 and a contact sheet per recorded trial (docs/reports.md).

Every bag is read and checked first (exists, is a bag, has camera pictures while a trial ran), then the output
folders; only then is anything written, a line per trial as it is done.
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, writing
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OUTPUT_UNUSABLE
from robofollow_ros.rundir.layout import RECORDINGS_DIR, VIDEOS_DIR


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "video", help="an MP4 per recorded trial (cameras, instruction, stage states, IS/ES burned in) and a "
                      "contact sheet",
        description="Write <trial>.mp4 (the three cameras side by side; the instruction, each stage's state as the "
                    "live score had it, the live and final IS/ES burned in; H.264, yuv420p, at the recorded "
                    "times) and <trial>.png (a contact sheet of six frames) for every trial of each bag.")
    p.add_argument("bags", nargs="+", type=Path, metavar="BAG",
                   help="trial recordings: RUN/mcap/<trial>.mcap (eval --record, the ROS graph), rosbag2 "
                        "directories or .mcap files of `ros2 bag record` (one video per trial in it)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help=f"folder for the videos (default: RUN/{VIDEOS_DIR} for a bag in RUN/{RECORDINGS_DIR}, "
                        f"where `report --failures` links them; else the bag's folder)")
    p.set_defaults(func=_video)


def default_out(bag: Path) -> Path:
    """``RUN/videos`` for a run's recording ``RUN/mcap/<trial>.mcap``; else the folder the bag is in."""
    folder = bag.parent
    return folder.parent / VIDEOS_DIR if folder.name == RECORDINGS_DIR else folder


def check_out(out: Path, flag: str = "--out") -> None:
    """``out`` is (or can be made) a folder this process can write in; else one line naming it."""
    if out.exists() and not out.is_dir():
        raise CliError(f"{flag}: {out} is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-check.{secrets.token_hex(4)}.tmp"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        code = EXIT_BAD_INPUT if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.ENOENT) else EXIT_OUTPUT_UNUSABLE
        raise CliError(f"{flag}: cannot write in {out} ({exc.strerror or exc})", code) from None


def _video(args: argparse.Namespace) -> int:
    from robofollow_ros.monitoring.trial_video import write_videos
    from robofollow_ros.monitoring.video_bag import VideoBagError, plan_bag

    plans = []
    for bag in args.bags:
        try:
            plans.append(plan_bag(bag))
        except VideoBagError as exc:
            raise CliError(f"BAG: {exc}") from None
    by_out: dict[Path, list[Any]] = {}
    for plan in plans:
        by_out.setdefault(args.out or default_out(plan.path), []).append(plan)
    for out, group in by_out.items():
        owner: dict[str, Path] = {}
        for plan in group:
            for clip in plan.clips:
                if clip.name in owner:
                    raise CliError(f"BAG: trial {clip.name} is in {owner[clip.name]} and in {plan.path}; "
                                   f"their videos would overwrite each other in {out}")
                owner[clip.name] = plan.path
        check_out(out)
    written = 0
    for out, group in by_out.items():
        with writing(out, "--out"):
            try:
                written += len(write_videos(group, out, say=lambda line: print(line, flush=True)))
            except VideoBagError as exc:
                raise CliError(f"BAG: {exc}") from None
    folders = ", ".join(os.fspath(out) for out in by_out)
    print(f"{written} video{'s' if written != 1 else ''} with contact sheets in {folders}")
    return 0
