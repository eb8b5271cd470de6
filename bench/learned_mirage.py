"""The mirage, learned: collect oracle demonstrations of the training tasks, train the BC chunk
policy on the CPU, evaluate it on L0–L3 beside oracle / memorizer / blind and the published models.

Run by hand (hours on 2 cores; not part of CI or `make bench`'s quick scripts):

    .venv/bin/python bench/learned_mirage.py --workdir /var/tmp/learned_mirage

Every stage resumes (collect --resume, train --resume, eval --resume), so a killed run continues.
A pilot on a few tasks: ``--tasks ID,ID --steps 2000 --eval-tasks-from-training --no-doc``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.benchdoc import write_section  # noqa: E402

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
LEVELS = ("L0", "L1", "L2", "L3")
PUBLISHED = ("PI05", "PI0", "XVLA")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def step(args: list[str]) -> None:
    print("==>", " ".join(args), flush=True)
    subprocess.run([*ROBOFOLLOW, *args], check=True)


def level_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    results = json.loads((run_dir / "results.json").read_text())
    entries = results["results"] if isinstance(results, dict) else results
    rows: dict[str, dict[str, Any]] = {}
    for level in LEVELS:
        mine = [e for e in entries if e.get("level", e["task"].split("_", 1)[0]) == level]
        if not mine:
            continue
        k = sum(1 for e in mine if e.get("completion_ok"))
        rows[level] = {"n": len(mine), "k": k, "IS": sum(e["intent_score"] for e in mine) / len(mine),
                       "ES": sum(e["exec_score"] for e in mine) / len(mine), "CR": k / len(mine),
                       "ci": wilson(k, len(mine))}
    return rows


def evaluate(policy: str, out: Path, common: list[str], render: bool, extra: list[str]) -> Path:
    args = ["eval", "--policy", policy, "--output", str(out), *common, *extra, "--render" if render else "--no-render"]
    step(args + (["--resume"] if (out / "run.json").exists() else []))
    return out


def table(runs: dict[str, Path]) -> str:
    lines = ["| policy | " + " | ".join(f"{lv} IS / ES / CR [95% CI of CR] (n)" for lv in LEVELS) + " |",
             "|---|" + "---:|" * len(LEVELS)]
    for name, run_dir in runs.items():
        rows = level_rows(run_dir)
        cells = [f"{r['IS']:.3f} / {r['ES']:.3f} / **{r['CR']:.3f}** [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] "
                 f"(n={r['n']})" if (r := rows.get(lv)) else "—" for lv in LEVELS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    from robofollow_ros.evaluation.report import published_models, published_table, with_mean

    names = published_models()
    for model in PUBLISHED:
        mean = with_mean(published_table(model)).get("mean", {})
        cells = [f"{c['IS'] / 100:.3f} / {c['ES'] / 100:.3f} / **{c['CR'] / 100:.3f}** (paper)" if (c := mean.get(lv))
                 else "—" for lv in LEVELS]
        lines.append(f"| {names[model]} (published, mean of scenes) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def first_per_scene_and_level(k: int) -> list[str]:
    """The first ``k`` evaluation tasks of every scene at every level: what ``eval --limit k`` now selects too
    (it counted per scene when this bench was written, so its first tasks were all L0); kept as an explicit
    task list, which the run records as such."""
    from robofollow_ros.benchmark import default_registry

    registry = default_registry()
    return [t.task_id for scene in ("scene1", "scene2", "scene3", "scene4") for level in ("L0", "L1", "L2", "L3")
            for t in registry.eval_tasks(scene, level)[:k]]


def yield_to_other_sessions() -> None:
    """Give this run's autogroup its process niceness: with the kernel's autogroup scheduling (Debian's default),
    `nice` only ranks processes of one session, so a `setsid nice -n 19` job still took half of a 2-core machine
    from a test run in another session. Children inherit the autogroup."""
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(os.getpriority(os.PRIO_PROCESS, 0)))
    except OSError:  # no autogroup scheduling here, or not allowed: plain nice still applies
        pass


def main() -> int:
    yield_to_other_sessions()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/learned_mirage"))
    p.add_argument("--tasks", default="", help="training task ids (default: all 75)")
    p.add_argument("--episodes-per-task", type=int, default=10)
    p.add_argument("--steps", type=int, default=25_000, help="training steps (≈1 h on 2 cores at ~7 steps/s)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--eval-tasks-from-training", action="store_true",
                   help="evaluate only the L0 tasks of --tasks (a pilot)")
    p.add_argument("--eval-limit", type=int, help="first K tasks per scene and level")
    p.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = p.parse_args()
    work = args.workdir
    data, ckpt = work / "dataset", work / "bc.pt"
    collect = ["collect", "--output", str(data), "--episodes-per-task", str(args.episodes_per_task),
               "--workers", str(args.workers)] + (["--tasks", args.tasks] if args.tasks else [])
    step(collect + (["--resume"] if data.exists() else []))
    step(["train", "--dataset", str(data), "--output", str(ckpt), "--steps", str(args.steps)]
         + (["--resume"] if ckpt.exists() else []))
    common = ["--rounds", str(args.rounds), "--workers", str(args.workers)]
    if args.eval_tasks_from_training and args.tasks:
        common += ["--tasks", ",".join(f"L0_{t}" for t in args.tasks.split(","))]
    if args.eval_limit:
        common += ["--tasks", ",".join(first_per_scene_and_level(args.eval_limit))]
    runs = {"learned (BC chunk policy)": evaluate(f"learned:{ckpt}", work / "eval_learned", common, True, [])}
    for baseline in ("oracle", "memorizer", "blind"):
        runs[baseline] = evaluate(baseline, work / f"eval_{baseline}", common, False, [])
    text = table(runs)
    info = json.loads((data / "meta" / "info.json").read_text())
    trained = json.loads(ckpt.with_name(ckpt.name + ".loss.json").read_text())
    header = (f"`bench/learned_mirage.py` — {info['total_episodes']} oracle demonstrations ({info['total_frames']} "
              f"frames at {info['fps']} Hz, {info['total_tasks']} instructions), {trained[-1][0]} training steps "
              f"(final L1 loss {trained[-1][1]:.3f}); evaluation `--rounds {args.rounds}`, TOPP stepper, "
              "learned policy with 320×240 rendering. CR = completed trials / trials, Wilson 95 % interval.\n\n")
    print(header + text)
    if not args.no_doc:
        write_section("learned_mirage", header + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
