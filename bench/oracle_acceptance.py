"""Acceptance figures of issue 5: oracle, memorizer (and blind) over all 554 evaluation tasks (1 round, no
rendering, ``--workers 2``), per scene × level IS/ES/CR, the oracle's failed tasks with reasons, and
throughput with and without rendering. Rewrites the ``oracle`` section of docs/benchmarks.md.

Runs go through ``robofollow eval`` (subprocesses, the real CLI).

    .venv/bin/python bench/oracle_acceptance.py [--out /tmp/oracle_acceptance] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchdoc import write_section

ROOT = Path(__file__).resolve().parents[1]
SCENES = ("scene1", "scene2", "scene3", "scene4")
LEVELS = ("L0", "L1", "L2", "L3")


def run_cli(policy: str, scenes: list[str], out: Path, workers: int, render: bool,
            limit: int | None = None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(ROOT / ".venv" / "bin" / "robofollow"), "eval", "--policy", policy, "--scene", ",".join(scenes),
           "--levels", ",".join(LEVELS), "--rounds", "1", "--render" if render else "--no-render",
           "--workers", str(workers), "--output", str(out)]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    started = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def evaluate(policy: str, base: Path, workers: int) -> tuple[list[dict[str, Any]], float]:
    """All 554 tasks through the CLI; returns the results and the wall seconds."""
    wall = run_cli(policy, list(SCENES), base / f"{policy}_cli", workers, render=False)
    return json.loads((base / f"{policy}_cli" / "results.json").read_text()), wall


def table(results: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, float]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[f"{r['scene']}/{r['level_tag']}"].append(r)
        groups[f"all/{r['level_tag']}"].append(r)
        groups[f"{r['scene']}/all"].append(r)
        groups["all/all"].append(r)
    stats = {k: {"n": len(v), "IS": sum(r["intent_score"] for r in v) / len(v),
                 "ES": sum(r["exec_score"] for r in v) / len(v),
                 "CR": sum(bool(r["completion_ok"]) for r in v) / len(v)} for k, v in groups.items()}
    lines = ["| scene | " + " | ".join(f"{lv} IS / ES / CR" for lv in (*LEVELS, "all")) + " |",
             "|---|" + "---:|" * (len(LEVELS) + 1)]
    for scene in (*SCENES, "all"):
        cells = []
        for level in (*LEVELS, "all"):
            s = stats.get(f"{scene}/{level}")
            cells.append("—" if s is None else f"{s['IS']:.3f} / {s['ES']:.3f} / {s['CR']:.3f} (n={s['n']})")
        lines.append(f"| {scene} | " + " | ".join(cells) + " |")
    return lines, stats


def failures(results: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in results:
        if r["completion_ok"] and r["intent_score"] >= 0.999 and r["exec_score"] >= 0.999:
            continue
        bad = [f"{p['phase']}: {p['exec_reason'] if p['intent_score'] >= p['max_score'] - 1e-6 else p['intent_reason']}"
               for p in r.get("phases", []) if min(p["intent_score"], p["exec_score"]) < p["max_score"] - 1e-6]
        reason = r.get("policy_error") or "; ".join(bad) or "not complete"
        out.append(f"- `{r['task']}` (IS {r['intent_score']:.2f}, ES {r['exec_score']:.2f}, "
                   f"CR {bool(r['completion_ok'])}): {reason}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/oracle_acceptance"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--render-limit", type=int, default=5, help="tasks per scene and level for the rendering rate")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    oracle, oracle_wall = evaluate("oracle", args.out, args.workers)
    oracle_cli_trials = len(oracle)
    memo, _ = evaluate("memorizer", args.out, args.workers)
    blind, _ = evaluate("blind", args.out, args.workers)
    render_wall = run_cli("oracle", list(SCENES), args.out / "oracle_render", args.workers, render=True,
                          limit=args.render_limit)
    render_trials = len(json.loads((args.out / "oracle_render" / "results.json").read_text()))

    o_lines, o_stats = table(oracle)
    m_lines, m_stats = table(memo)
    b_lines, _ = table(blind)
    fails = failures(oracle)
    norender_rate = oracle_cli_trials / oracle_wall * 60
    render_rate = render_trials / render_wall * 60
    total = o_stats["all/all"]
    mem_l0, mem_l1 = m_stats["all/L0"]["IS"], m_stats["all/L1"]["IS"]
    verdict = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    doc = [
        f"`bench/oracle_acceptance.py` — {time.strftime('%Y-%m-%d', time.gmtime())}, "
        f"Python {platform.python_version()}, "
        f"2 shared cores, `robofollow eval --rounds 1 --no-render --workers {args.workers}` over all "
        f"{len(oracle)} evaluation tasks (round 1 seeds).",
        "",
        "**Oracle** (mean IS / mean ES / CR; CR is the task-macro completion rate, 1 round):",
        "",
        *o_lines,
        "",
        "**Memorizer** (same settings):",
        "",
        *m_lines,
        "",
        "**Blind** (same settings; ignores the instruction):",
        "",
        *b_lines,
        "",
        "Goals (issue 5):",
        f"- oracle mean IS ≥ 0.95: {verdict(total['IS'] >= 0.95)} ({total['IS']:.3f}); mean ES ≥ 0.90: "
        f"{verdict(total['ES'] >= 0.90)} ({total['ES']:.3f}); CR ≥ 0.90: {verdict(total['CR'] >= 0.90)} "
        f"({total['CR']:.3f})",
        f"- memorizer L0 mean IS ≥ 0.8: {verdict(mem_l0 >= 0.8)} ({mem_l0:.3f}); L1 mean IS ≤ 0.5: "
        f"{verdict(mem_l1 <= 0.5)} ({mem_l1:.3f})",
        f"- throughput, oracle, no rendering, `--workers {args.workers}`: **{norender_rate:.0f} trials/min** "
        f"({oracle_cli_trials} trials in {oracle_wall:.0f} s incl. start-up); the full 554 would take "
        f"≈ {554 / norender_rate:.1f} min (goal < 60 min: {verdict(554 / norender_rate < 60)})",
        f"- throughput, oracle, rendering three 320×240 cameras, `--workers {args.workers}`: "
        f"**{render_rate:.1f} trials/min** ({render_trials} trials, first {args.render_limit} tasks per scene and "
        f"level, "
        f"{render_wall:.0f} s incl. start-up)",
        "",
        f"Oracle tasks not at full IS/ES/CR: {len(fails)}" + ("" if fails else " (none)."),
        *fails,
    ]
    text = "\n".join(doc)
    print(text)
    write_section("oracle", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
