"""Cost of ``StageMonitor.update()`` per frame, and the ratio against naive rescoring per frame.

For each scene's richest task a scripted successful trial (grasp, carry, place, return home) is
repeated until the trajectory has N frames, so closes, lifts, opens and anchor restarts keep
happening all along. Online: median and p99 of the per-call time of ``update`` over the whole
trajectory. Naive: rescoring the whole history on every frame costs one ``score_trajectory`` of
the history so far per frame; it is measured directly at N = 500 and 5,000 (the time to score
N frames once = the naive cost of frame N) and extrapolated linearly (it is O(N)) to 50,000.
Rewrites the ``scoring`` section of docs/benchmarks.md and prints the same table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from benchdoc import write_section

from robofollow_ros.benchmark import default_registry
from robofollow_ros.scoring import StageMonitor, score_trajectory
from robofollow_ros.scoring.frame import Frame
from robofollow_ros.scoring.synthetic import Puppet

SIZES = (500, 5_000, 50_000)
NAIVE_MEASURED = (500, 5_000)


def trial_s1(reg) -> Puppet:  # type: ignore[no-untyped-def]
    p = Puppet("L0_place_yellow_block_1_behind_red_cylinder", reg)
    tgt, src = p.objects["red_cylinder"], p.objects["yellow_block_1"]
    return p.pick("right", "yellow_block_1").place("right", (tgt[0], tgt[1] + 0.06, src[2])).home("right")


def trial_s2(reg) -> Puppet:  # type: ignore[no-untyped-def]
    p = Puppet("L0_push_left_cube_to_red_cylinder", reg)
    s = p.objects["large_blue_cube"]
    p.move("left", (s[0], s[1] - 0.04, s[2] + 0.12)).close("left")
    ee = p.ee["left"]
    for k in range(1, 6):
        p.ee["left"] = (ee[0], ee[1] + 0.01 * k, ee[2])
        p.objects["large_blue_cube"] = (s[0], s[1] + 0.01 * k, s[2])
        p.snap()
    return p.open("left").home("left")


def trial_s3(reg) -> Puppet:  # type: ignore[no-untyped-def]
    p = Puppet("L0_r_pick2_via4_to6_short_front", reg)
    over, label = p.objects["yellow_bar_4"], p.objects["blue_label_6"]
    p.pick("right", "red_bar_2").move("right", (over[0], over[1], 0.9))
    return p.place("right", (label[0], label[1], 0.76)).home("right")


def trial_s4(reg) -> Puppet:  # type: ignore[no-untyped-def]
    p = Puppet("L0_s41_seq_l_bowl_then_r_green_cylinder", reg)
    return p.pick("left", "red_cube_in_bowl").pick("right", "green_cylinder_top").home("left").home("right")


def frames_of(p: Puppet, n: int) -> list[Frame]:
    base = p.frames
    return [base[i % len(base)] for i in range(n)]


def online_us(task, frames: list[Frame], reg) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    monitor = StageMonitor(task, reg)
    clock = time.perf_counter_ns
    costs = []
    for f in frames:
        t0 = clock()
        monitor.update(f)
        costs.append(clock() - t0)
    costs.sort()
    return statistics.median(costs) / 1000, costs[int(0.99 * (len(costs) - 1))] / 1000


def live_us(task, frames: list[Frame], reg) -> float:  # type: ignore[no-untyped-def]
    """Mean cost of update() followed by live() (what the ROS stage-monitor node does per frame)."""
    monitor = StageMonitor(task, reg)
    t0 = time.perf_counter()
    for f in frames:
        monitor.update(f)
        monitor.live()
    return (time.perf_counter() - t0) / len(frames) * 1e6


def naive_us(task, frames: list[Frame], reg) -> float:  # type: ignore[no-untyped-def]
    """Time to rescore the whole history once = naive cost of the last frame (best of 3)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        score_trajectory(task, frames, reg)
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="trajectory lengths (smoke: 500,2000)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    sizes = tuple(int(v) for v in args.sizes.split(","))
    reg = default_registry()
    rows = []
    for scene, build in (("scene1", trial_s1), ("scene2", trial_s2), ("scene3", trial_s3), ("scene4", trial_s4)):
        p = build(reg)
        naive_per_frame_at: dict[int, float] = {}
        measured = [n for n in NAIVE_MEASURED if n <= max(sizes)] or [min(sizes)]
        for n in measured:
            naive_per_frame_at[n] = naive_us(p.task, frames_of(p, n), reg)
        slope = naive_per_frame_at[measured[-1]] / measured[-1]
        for n in sizes:
            frames = frames_of(p, n)
            med, p99 = online_us(p.task, frames, reg)
            with_live = live_us(p.task, frames, reg)
            naive = naive_per_frame_at.get(n, slope * n)
            rows.append((scene, p.task.task_id, p.task.action, n, med, p99, with_live, naive,
                         n not in naive_per_frame_at))
    lines = [
        f"`bench/scoring_update.py` — {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}; goal: median <= 20 µs per update, flat from 500 to 50,000 frames.",
        "",
        "| scene | task (action) | frames | update median µs | update p99 µs | update+live mean µs "
        "| naive µs/frame at N | naive / online |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scene, tid, action, n, med, p99, with_live, naive, extrapolated in rows:
        mark = " (extrap.)" if extrapolated else ""
        lines.append(f"| {scene} | {tid} ({action}) | {n:,} | {med:.1f} | {p99:.1f} | {with_live:.1f} | "
                     f"{naive:,.0f}{mark} | {naive / med:,.0f}× |")
    lines += ["", "Naive = rescoring the whole N-frame history on frame N (one `score_trajectory`), measured at "
              "500 and 5,000 frames, extrapolated linearly to 50,000. update+live = `update()` then `live()` "
              "(the live-score JSON the ROS node publishes), mean per frame."]
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        write_section("scoring", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
