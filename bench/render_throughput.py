"""Rendered throughput, old path vs new path side by side in one run (issue 16, item 5).

Both paths run the same trials (task, seed) with the same policy and three rendered cameras:

- **old**: ``SimWorld(render=True, keep_renderer=False)``, what every run did before issue 16: each
  fresh scene rebuilds SAPIEN's renderer state, so its first picture costs seconds;
- **new**: ``SimWorld(render=True)``: the renderer stays warm across resets (``sim/renderer.py``).

Each path runs in fresh worker processes (``--workers`` of them, trials dealt round-robin), so one
path's warm renderer can never help the other. Timing runs from the first trial's start to the
last one's end (process start-up and imports excluded, first pictures included). The run also
checks that both paths give the same verdicts (IS, ES, completion, frames, steps) and the same
pictures (SHA-256 of every camera image of every observation), trial by trial.

Rewrites the ``render-throughput`` section of docs/benchmarks.md. Smoke run:
``.venv/bin/python bench/render_throughput.py --trials 4 --no-doc``; the full measurement:
``.venv/bin/python bench/render_throughput.py --trials 40 --workers 2``.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from typing import Any

from benchdoc import write_section

FULL_PROTOCOL_TRIALS = 5540
COMPARED = ("intent_score", "exec_score", "completion_ok", "frames", "policy_steps", "policy_error")


class _ImageDigest:
    """Episode observer that hashes every picture the policy is shown (it never changes the trial)."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.pictures = 0

    def on_start(self, task: Any, seed: int, world: Any) -> None:
        pass

    def on_frame(self, index: int, frame: dict[str, Any], live: dict[str, Any]) -> None:
        pass

    def on_observation(self, observation: dict[str, Any]) -> None:
        for key in sorted(observation["observation"]):
            rgb = observation["observation"][key]["rgb"]
            self.sha.update(key.encode())
            self.sha.update(rgb.tobytes())
            self.pictures += 1

    def on_end(self, result: dict[str, Any], live: dict[str, Any]) -> None:
        pass


def _worker(path: str, policy_spec: str, trials: list[tuple[str, int]], queue: Any) -> None:
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.policy.spec import load_policy
    from robofollow_ros.sim.world import SimWorld

    registry = default_registry()
    world = SimWorld(render=True, keep_renderer=(path == "new"))
    policy = load_policy(policy_spec)
    for task_id, seed in trials:
        task = registry.eval_task(task_id)
        digest = _ImageDigest()
        started = time.time()
        result = run_episode(world, policy, task, seed, EpisodeSettings(), observer=digest)
        queue.put({"task": task_id, "seed": seed, "start": started, "end": time.time(), "worker": os.getpid(),
                   "verdict": {k: result.get(k) for k in COMPARED}, "images": digest.sha.hexdigest(),
                   "pictures": digest.pictures})
    world.close()
    queue.put(None)


def run_path(path: str, policy: str, trials: list[tuple[str, int]], workers: int) -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")  # SAPIEN does not survive fork; every worker starts clean
    queue = ctx.Queue()
    shares = [trials[i::workers] for i in range(workers)]
    procs = [ctx.Process(target=_worker, args=(path, policy, share, queue)) for share in shares if share]
    for proc in procs:
        proc.start()
    rows: list[dict[str, Any]] = []
    finished = 0
    while finished < len(procs):
        item = queue.get(timeout=3600)
        if item is None:
            finished += 1
            continue
        rows.append(item)
        print(f"  {path}: {len(rows)}/{len(trials)} {item['task'][:50]} {item['end'] - item['start']:.1f} s",
              file=sys.stderr, flush=True)
    for proc in procs:
        proc.join(60)
        if proc.exitcode != 0:
            raise SystemExit(f"{path} worker exited with {proc.exitcode}")
    return sorted(rows, key=lambda r: (r["task"], r["seed"]))


def pick_trials(count: int) -> list[tuple[str, int]]:
    """``count`` tasks spread evenly over the registry's order (all scenes and levels), round 1."""
    from robofollow_ros.benchmark import default_registry

    tasks = default_registry().eval_tasks()
    step = max(1, len(tasks) // count)
    return [(t.task_id, t.seed(1)) for t in tasks[::step][:count]]


def summarise(path: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    wall = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    per_trial = [r["end"] - r["start"] for r in rows]
    workers = len({r["worker"] for r in rows})
    median = statistics.median(per_trial)
    return {"path": path, "trials": len(rows), "wall_s": wall, "per_min": 60.0 * len(rows) / wall,
            "median_s": median, "steady_per_min": 60.0 * workers / median}


def _hours(trials_per_min: float) -> str:
    minutes = FULL_PROTOCOL_TRIALS / trials_per_min
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="worker processes per path (default 2)")
    parser.add_argument("--policy", default="oracle", help="policy SPEC (default oracle: it moves and scores)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    trials = pick_trials(args.trials)
    load = os.getloadavg()[0]
    results = {path: run_path(path, args.policy, trials, args.workers) for path in ("old", "new")}
    old, new = (summarise(p, results[p]) for p in ("old", "new"))
    same_verdicts = sum(a["verdict"] == b["verdict"] for a, b in zip(results["old"], results["new"], strict=True))
    same_images = sum(a["images"] == b["images"] for a, b in zip(results["old"], results["new"], strict=True))
    pictures = sum(r["pictures"] for r in results["new"])
    speedup = new["per_min"] / old["per_min"]
    rows = [f"| {s['path']} | {s['trials']} | {s['wall_s']:.0f} s | **{s['per_min']:.1f}** | {s['median_s']:.2f} s | "
            f"{_hours(s['per_min'])} | {s['steady_per_min']:.1f} → {_hours(s['steady_per_min'])} |"
            for s in (old, new)]
    text = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} with `bench/render_throughput.py --trials {args.trials} --workers "
        f"{args.workers} --policy {args.policy}` on {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), "
        f"CPU renderer (lavapipe), three cameras 320×240; load average {load:.1f} at the start. Both paths run "
        f"the same {len(trials)} trials (tasks spread over all scenes and levels, round 1), each path in "
        f"{args.workers} fresh worker process(es).",
        "",
        "| path | trials | wall | trials/min | median per trial | full protocol (5,540 trials) at this rate | "
        "steady state: trials/min → full protocol |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "*trials/min* counts every trial from the first start to the last end, so each worker's first "
        "picture (the renderer's start-up, paid by both paths) is included; *steady state* is workers × 60 s "
        "/ median trial, what a long run approaches.",
        "",
        f"Speed-up new/old: **{speedup:.1f}×** (goal ≥ 3×); steady state "
        f"{new['steady_per_min'] / old['steady_per_min']:.1f}×. Same verdicts in {same_verdicts}/{len(trials)} trials; "
        f"bit-identical pictures in {same_images}/{len(trials)} trials ({pictures} camera images compared).",
    ])
    print(text)
    if not args.no_doc:
        write_section("render-throughput", text)
    if same_verdicts != len(trials) or same_images != len(trials):
        raise SystemExit("old and new path disagree; see the table")


if __name__ == "__main__":
    main()
