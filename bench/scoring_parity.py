"""Agreement of the online scorer with the official-evaluator reference, thousands of edge cases per family.

The same strategies as ``test/test_scoring_parity.py`` (``test/scoring_families.py`` on
``test/scoring_edges.py``: every number a rule compares drawn on and +-0.1 / 1 mm around its
threshold, awkward timings), many more examples: for each action family, hypothesis
(derandomized, generation only) draws ``--examples`` trajectories; the ``StageMonitor`` result
must equal ``test/official_reference`` at every prefix (the return-timing family: the prefixes
around the return). Counts agreement, and how often the
cases land on each side of the verdicts (so agreement is not agreement on trivial zeros).
Rewrites the ``scoring-parity`` section of docs/benchmarks.md.

    .venv/bin/python bench/scoring_parity.py [--examples 2000] [--jobs 2] [--families scene1/pickup,...]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from benchdoc import write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from hypothesis import HealthCheck, Phase, given, settings

from scoring_edges import Case, compare
from scoring_families import FAMILIES


def run_family(job: tuple[str, int]) -> dict[str, Any]:
    family, examples = job
    stats: dict[str, Any] = {"family": family, "examples": 0, "prefixes": 0, "frames": 0, "mismatches": 0,
                             "first": [], "complete": 0, "intent_full": 0, "exec_full": 0, "any_credit": 0,
                             "tasks": set(), "seconds": 0.0}

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(FAMILIES[family])
    def run(case: Case) -> None:
        result = compare(case)
        stats["examples"] += 1
        stats["prefixes"] += result.prefixes
        stats["frames"] += len(case.frames)
        stats["tasks"].add(case.task.task_id)
        final = result.final
        stats["complete"] += bool(final["completion_ok"])
        stats["intent_full"] += bool(final["intent_ok"])
        stats["exec_full"] += bool(final["exec_ok"])
        stats["any_credit"] += final["intent_score"] > 0 or final["exec_score"] > 0
        if result.problem is not None:
            stats["mismatches"] += 1
            if len(stats["first"]) < 3:
                stats["first"].append(f"{case.task.task_id}: {result.problem}")

    started = time.monotonic()
    run()
    stats["seconds"] = time.monotonic() - started
    stats["tasks"] = len(stats["tasks"])
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per family")
    parser.add_argument("--jobs", type=int, default=2, help="families scored in parallel processes")
    parser.add_argument("--families", help="comma-separated subset (default: all)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    names = args.families.split(",") if args.families else sorted(FAMILIES)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        parser.error(f"--families: unknown {unknown}; known: {sorted(FAMILIES)}")
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    with Pool(args.jobs) as pool:
        for done, stats in enumerate(pool.imap_unordered(run_family, [(n, args.examples) for n in names]), start=1):
            rows.append(stats)
            elapsed = time.monotonic() - started
            eta = elapsed / done * (len(names) - done)
            print(f"[{done}/{len(names)}] {stats['family']}: {stats['examples']} examples, "
                  f"{stats['mismatches']} mismatches, {stats['examples'] / max(stats['seconds'], 1e-9):.1f} ex/s; "
                  f"elapsed {elapsed / 60:.1f} min, ETA {eta / 60:.1f} min", flush=True)
    rows.sort(key=lambda r: names.index(r["family"]))
    total = sum(r["examples"] for r in rows)
    agree = total - sum(r["mismatches"] for r in rows)
    lines = [
        f"`bench/scoring_parity.py --examples {args.examples}` — {time.strftime('%Y-%m-%d', time.gmtime())}, "
        f"CPython {platform.python_version()}; online `StageMonitor` vs `test/official_reference` (our reading of "
        "the official evaluator, AutoLab-SAI-SJTU/RoboFollow a867718), whole results.json entry compared at every "
        "prefix (return-timing family: the prefixes around the return).",
        "",
        "| family | tasks | examples | prefixes compared | agree | complete | IS full | ES full | some credit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = max(r["examples"], 1)
        lines.append(f"| {r['family']} | {r['tasks']} | {r['examples']:,} | {r['prefixes']:,} | "
                     f"{r['examples'] - r['mismatches']:,} | {r['complete'] / n:.0%} | {r['intent_full'] / n:.0%} | "
                     f"{r['exec_full'] / n:.0%} | {r['any_credit'] / n:.0%} |")
    lines += ["", f"Agreement: **{agree:,} of {total:,}** trajectories ({agree / max(total, 1):.2%}); "
              f"{sum(r['prefixes'] for r in rows):,} prefixes compared in {(time.monotonic() - started) / 60:.1f} min."]
    for r in rows:
        lines += [f"- mismatch in {r['family']}: {m}" for m in r["first"]]
    text = "\n".join(lines)
    print(text)
    if not args.no_doc:
        write_section("scoring-parity", text)
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main())
