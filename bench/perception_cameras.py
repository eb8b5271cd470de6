"""Perception's rate per camera with three RGB-D cameras on one core (issue 37, item 5).

Three camera streams at 30 Hz with depth, one core: does perception keep up, and if not, how many
frames does it drop? Each of three ``Perception`` instances (one per stream, each its own tracker) is fed
the head camera's RGB-D pictures of each scene's oracle trial (after every executed row: arms moving,
objects carried) in turn, round-robin, pinned to one core (``bench/perception_speed.py``'s pictures).
Per-camera rate = pictures each stream got through / CPU time of all three (CPU time: what one core's
worth of work gives when other processes share the core; wall time is printed beside it). Below 30 Hz a
stream drops ``1 − rate / 30`` of its frames, which ``perception_node`` reports in its status
(``frames.dropped``: the stamp gaps) and logs. Writes the ``perception-cameras`` section of
docs/benchmarks.md (``--smoke``: few laps, prints only).
"""

from __future__ import annotations

import argparse
import os
import time

import cv2
from benchdoc import write_section
from perception_speed import _pictures

from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.tracker import Perception, load_colour_model
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

CAMERAS = 3
CAMERA_HZ = 30.0


def measure(laps: int) -> dict[str, tuple[float, float, int]]:
    """Per scene: (per-camera frames/s of CPU time, of wall time, frames per camera)."""
    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour, _ = load_colour_model(DEFAULT_CALIBRATION_DIR)
    _, trials = _pictures()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    cv2.setNumThreads(1)
    out = {}
    for scene, (layout, frames) in trials.items():
        count, started, cpu = 0, time.perf_counter(), time.process_time()
        for _ in range(laps):
            streams = [Perception(camera, layout, colour=colour) for _ in range(CAMERAS)]
            for i, (rgb, depth) in enumerate(frames):
                for perception in streams:
                    perception.update(rgb, depth, i / CAMERA_HZ)
                count += 1
        out[scene] = (count / (time.process_time() - cpu), count / (time.perf_counter() - started), count)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laps", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one lap, print, write no docs")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = measure(1 if args.smoke else args.laps)
    rows = ["| scene (oracle trial, every row) | frames per camera | per-camera fps (CPU time) | per-camera fps (wall) "
            "| keeps up with 30 Hz | frames dropped per camera at 30 Hz |", "|---|---:|---:|---:|---|---:|"]
    for scene, (cpu, wall, count) in results.items():
        dropped = max(0.0, 1.0 - cpu / CAMERA_HZ)
        rows.append(f"| {scene} | {count} | {cpu:.1f} | {wall:.1f} | {'yes' if cpu >= CAMERA_HZ else 'no'} "
                    f"| {dropped:.0%} |")
    text = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} with `bench/perception_cameras.py --laps {args.laps}`: three RGB-D "
        f"streams (320×240, depth) through three `Perception` instances round-robin on one pinned core "
        f"(load average {load:.1f} on {os.cpu_count()} cores when it started: wall rates are pessimistic). A "
        f"stream below 30 Hz drops the rest, counted in `/robofollow/perception/status` `frames.dropped` and "
        f"logged (never silently).", "", *rows])
    print(text)
    if not args.smoke:
        write_section("perception-cameras", text)


if __name__ == "__main__":
    main()
