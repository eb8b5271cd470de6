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

**Rigs side by side** (``--rig NAME``, repeatable or a comma list: ``--rig robofollow,aloha``): the same trials on
each rig (``ROBOFOLLOW_RIG`` set in its workers, so the simulator, the kinematics and the oracle all load it), on
the new path only, one rig after the other so they never share the cores: the built-in rig's primitive boxes beside
the ALOHA twin's STL meshes. Per rig: trials/min over the run (first pictures included) and, over the warm trials
(each worker's first left out), seconds per trial and rendered observations per second (three cameras each), each
a mean with its 95 % interval (Student's t) and n. Rewrites the ``render-throughput-rigs`` section.
"""

from __future__ import annotations

import argparse
import hashlib
import math
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


def _worker(path: str, policy_spec: str, trials: list[tuple[str, int]], queue: Any, rig: str | None = None) -> None:
    if rig is not None:  # before anything loads the active rig: the world, the kinematics and the oracle read it
        os.environ["ROBOFOLLOW_RIG"] = rig
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
                   "pictures": digest.pictures, "rig": world.rig.name})
    world.close()
    queue.put(None)


def run_path(path: str, policy: str, trials: list[tuple[str, int]], workers: int,
             rig: str | None = None) -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")  # SAPIEN does not survive fork; every worker starts clean
    queue = ctx.Queue()
    shares = [trials[i::workers] for i in range(workers)]
    procs = [ctx.Process(target=_worker, args=(path, policy, share, queue, rig)) for share in shares if share]
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
        print(f"  {rig or path}: {len(rows)}/{len(trials)} {item['task'][:50]} {item['end'] - item['start']:.1f} s",
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


#: Student's t, two-sided 95 %, by degrees of freedom (1..30); 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % interval (Student's t; 0 with fewer than 2 values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * sd / math.sqrt(n)


def rig_names(values: list[str]) -> list[str]:
    """``--rig a --rig b`` and ``--rig a,b`` alike, in order, each once."""
    return list(dict.fromkeys(name.strip() for value in values for name in value.split(",") if name.strip()))


def summarise_rig(rig: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A rig's run: trials/min over it all, and per warm trial (each worker's first left out) its seconds and
    rendered observations per second."""
    first = {w: min(r["start"] for r in rows if r["worker"] == w) for w in {r["worker"] for r in rows}}
    warm = [r for r in rows if r["start"] != first[r["worker"]]] or rows
    seconds = [r["end"] - r["start"] for r in warm]
    rates = [r["pictures"] / 3 / (r["end"] - r["start"]) for r in warm]
    return {**summarise(rig, rows), "rig": rig, "loaded": {r["rig"] for r in rows},
            "completed": sum(bool(r["verdict"]["completion_ok"]) for r in rows),
            "warm_n": len(warm), "seconds": mean_ci(seconds), "obs_per_s": mean_ci(rates),
            "frames": sum(r["verdict"]["frames"] or 0 for r in rows) / len(rows)}


def compare_rigs(args: argparse.Namespace, rigs: list[str], trials: list[tuple[str, int]], load: float) -> None:
    """The same trials on each rig, one rig after the other, on the new path."""
    started = time.monotonic()
    results = {rig: run_path("new", args.policy, trials, args.workers, rig) for rig in rigs}
    took = time.monotonic() - started
    stats = [summarise_rig(rig, results[rig]) for rig in rigs]
    from robofollow_ros.robot.rig_config import load_rig_config

    for s in stats:
        if s["loaded"] != {load_rig_config(s["rig"]).name}:
            raise SystemExit(f"rig {s['rig']}: the workers loaded {sorted(s['loaded'])}")
    rows = [f"| {s['rig']} | {s['trials']} | {s['completed']}/{s['trials']} | {s['frames']:.0f} | "
            f"{s['wall_s']:.0f} s | **{s['per_min']:.1f}** | "
            f"{s['seconds'][0]:.2f} ± {s['seconds'][1]:.2f} s (n={s['warm_n']}) | "
            f"{s['obs_per_s'][0]:.1f} ± {s['obs_per_s'][1]:.1f} (n={s['warm_n']}) |" for s in stats]
    command = (f"bench/render_throughput.py --rig {','.join(rigs)} --trials {args.trials} --workers {args.workers} "
               f"--policy {args.policy}")
    text = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} with `{command}` on {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), CPU renderer (lavapipe, Mesa's llvmpipe-based Vulkan), "
        f"three cameras 320×240, warm renderer (the new path); load average {load:.1f} at the start; the whole run "
        f"took {took:.0f} s. Every rig runs the same {len(trials)} trials (tasks spread over all scenes and levels, "
        f"round 1) in {args.workers} fresh worker process(es), one rig after the other.",
        "",
        "| rig | trials | completed | scorer frames per trial | wall | trials/min | s per warm trial, mean ± 95 % | "
        "observations/s (3 cameras each), mean ± 95 % |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "*trials/min* counts every trial from the first start to the last end (each worker's first pictures "
        "included); the per-trial columns leave each worker's first trial out and give the mean with its 95 % "
        "interval (Student's t) over the n warm trials. A rig's trials differ in length (its arms, its planner "
        "segments), so *observations/s* is the column that compares the renderers.",
    ])
    print(text)
    if not args.no_doc:
        write_section("render-throughput-rigs", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="worker processes per path (default 2)")
    parser.add_argument("--policy", default="oracle", help="policy SPEC (default oracle: it moves and scores)")
    parser.add_argument("--rig", action="append", default=[], metavar="NAME",
                        help="compare rigs instead of the old and new path: a rig name or YAML, repeatable or a "
                        "comma list (--rig robofollow,aloha)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    trials = pick_trials(args.trials)
    load = os.getloadavg()[0]
    if args.rig:
        compare_rigs(args, rig_names(args.rig), trials, load)
        return
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
