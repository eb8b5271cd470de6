"""Real-time execution under inference latency (issue 26): what latency does to scores and motion.

For each policy (the oracle, privileged, in process; the ``memorizer`` standing in for the learned baseline,
see docs/benchmarks.md) × latency (``latency:MS:`` wrapper) × executor, runs ``robofollow eval --execution
realtime`` in process (inline backend, no rendering) and reports completion rate (Wilson 95 % interval), IS/ES
(mean, normal 95 % interval), arm idle ticks (holds after the first chunk), the largest joint step, step and
jerk at chunk boundaries vs within chunks (ratio), and requests per simulated second. Executors:

* ``sync``: request only when the queue is empty, never earlier (``--threshold 0 --fixed-threshold``): the arm
  holds while every chunk is computed;
* ``async-drop``: request at half a chunk, newest chunk wins, rows executed meanwhile dropped (merge latest);
* ``weighted``: as async-drop, overlapping rows 0.3·old + 0.7·new;
* ``ensemble``: ACT temporal ensembling, a request always in flight (threshold = chunk), m = 0.01.

Run by hand (not in the test suite)::

    .venv/bin/python bench/realtime.py                    # default: ~15 min on 2 cores
    .venv/bin/python bench/realtime.py --limit 2 --latencies 0,200 --no-doc   # a quick look

Writes the table into docs/benchmarks.md (section *realtime*) and the plot to docs/images/realtime.png.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.benchdoc import write_section  # noqa: E402
from robofollow_ros.evaluation.episode import EpisodeSettings  # noqa: E402
from robofollow_ros.evaluation.execution_mode import ExecutionSettings  # noqa: E402
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation  # noqa: E402

EXECUTORS: dict[str, dict[str, Any]] = {
    "sync": {"merge": "latest", "threshold": 0, "adapt_threshold": False},
    "async-drop": {"merge": "latest"},
    "weighted": {"merge": "weighted"},
    "ensemble": {"merge": "ensemble", "threshold": 50},
}
IMAGE = ROOT / "docs" / "images" / "realtime.png"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95 % interval (0 with fewer than 2 values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, 1.96 * sd / math.sqrt(n)


def pooled(trials: list[dict[str, Any]], key: str, count: str) -> float | None:
    pairs = [(m[key], m[count]) for m in (t["execution"]["motion"] for t in trials) if m[key] is not None and m[count]]
    total = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / total if total else None


def summarise(trials: list[dict[str, Any]], control_hz: int) -> dict[str, Any]:
    n = len(trials)
    k = sum(bool(t["completion_ok"]) for t in trials)
    ex = [t["execution"] for t in trials]
    boundary_step, within_step = pooled(trials, "boundary_step_rad", "boundary_ticks"), \
        pooled(trials, "within_step_rad", "within_ticks")
    boundary_jerk, within_jerk = pooled(trials, "boundary_jerk_rad_s3", "boundary_ticks"), \
        pooled(trials, "within_jerk_rad_s3", "within_ticks")
    ticks = sum(e["ticks"] for e in ex)
    return {
        "n": n, "k": k, "cr": k / n, "cr_ci": wilson(k, n),
        "is": mean_ci([t["intent_score"] for t in trials]), "es": mean_ci([t["exec_score"] for t in trials]),
        "cold_holds": sum(e["hold_ticks"] - e["starved_ticks"] for e in ex) / n,
        "starved": sum(e["starved_ticks"] for e in ex) / n,
        "idle_in_flight_after_first": sum(e["idle_in_flight_ticks"] - (e["hold_ticks"] - e["starved_ticks"])
                                          for e in ex) / n,
        "late_chunks": sum(e["late_chunks"] for e in ex) / n,
        "max_step": max(e["motion"]["max_step_rad"] for e in ex),
        "boundary_step": boundary_step, "within_step": within_step,
        "step_ratio": boundary_step / within_step if boundary_step is not None and within_step else None,
        "boundary_jerk": boundary_jerk, "within_jerk": within_jerk,
        "jerk_ratio": boundary_jerk / within_jerk if boundary_jerk is not None and within_jerk else None,
        "requests_per_s": sum(e["requests"] for e in ex) / (ticks / control_hz),
        "errors": sum("policy_error" in t for t in trials),
    }


def run_cell(policy: str, latency: int, executor: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    execution = ExecutionSettings(mode="realtime", control_hz=args.control_hz, **EXECUTORS[executor])
    out = work / f"{policy}_{latency}_{executor}"
    config = EvalConfig(policy=f"latency:{latency}:{policy}", output=out, levels=tuple(args.levels.split(",")),
                        rounds=args.rounds, limit=args.limit,
                        settings=EpisodeSettings(args.max_steps, 50, execution), render=False, stepper="direct",
                        backend="inline", policy_timeout_s=60.0)
    run_evaluation(config, stream=None)
    trials = json.loads((out / "results.json").read_text())
    return summarise(trials, args.control_hz)


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def table(cells: dict[tuple[str, int, str], dict[str, Any]]) -> str:
    head = ("| policy | latency ms | executor | n | CR [95% CI] | IS ± 95% | ES ± 95% | cold-start holds | "
            "starved ticks / trial | late chunks / trial | max step rad | boundary / within step (ratio) | "
            "boundary / within jerk rad/s³ (ratio) | requests/s |\n|" + "---|" * 14)
    rows = [head]
    for (policy, latency, executor), c in cells.items():
        lo, hi = c["cr_ci"]
        rows.append(
            f"| {policy} | {latency} | {executor} | {c['n']} | **{c['cr']:.2f}** [{lo:.2f}, {hi:.2f}] | "
            f"{c['is'][0]:.2f} ± {c['is'][1]:.2f} | {c['es'][0]:.2f} ± {c['es'][1]:.2f} | {c['cold_holds']:.1f} | "
            f"{c['starved']:.1f} | {c['late_chunks']:.1f} | {c['max_step']:.3f} | "
            f"{fmt(c['boundary_step'], '.4f')} / {fmt(c['within_step'], '.4f')} ({fmt(c['step_ratio'])}) | "
            f"{fmt(c['boundary_jerk'], '.0f')} / {fmt(c['within_jerk'], '.0f')} ({fmt(c['jerk_ratio'])}) | "
            f"{c['requests_per_s']:.1f} |")
    return "\n".join(rows)


def goals(cells: dict[tuple[str, int, str], dict[str, Any]], executors: list[str]) -> list[str]:
    out = []
    for executor in executors:
        for policy in sorted({p for p, _, _ in cells}):
            at = cells.get((policy, 200, executor))
            zero = cells.get((policy, 0, executor))
            if at is None:
                continue
            idle = at["starved"]
            ratio = at["step_ratio"]
            line = (f"- {policy}, {executor}, 200 ms at 25 Hz: starved ticks after the first chunk {idle:.1f}/trial "
                    f"({'met' if idle == 0 else 'NOT met'}); boundary/within step {fmt(ratio)} "
                    f"({'met' if ratio is not None and ratio <= 1.5 else 'NOT met'})")
            if policy == "oracle" and zero is not None:
                drop = (zero["cr"] - at["cr"]) * 100
                line += f"; completion {at['cr']:.2f} vs {zero['cr']:.2f} at 0 ms ({'met' if drop <= 5 else 'NOT met'})"
            out.append(line)
    return out


def plot(cells: dict[tuple[str, int, str], dict[str, Any]], latencies: list[int], executors: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = sorted({p for p, _, _ in cells})
    fig, axes = plt.subplots(len(policies), 3, figsize=(13, 3.4 * len(policies)), squeeze=False)
    for row, policy in enumerate(policies):
        for executor in executors:
            xs = [lat for lat in latencies if (policy, lat, executor) in cells]
            cs = [cells[(policy, lat, executor)] for lat in xs]
            axes[row][0].plot(xs, [c["cr"] for c in cs], marker="o", label=executor)
            axes[row][1].plot(xs, [c["starved"] for c in cs], marker="o", label=executor)
            axes[row][2].plot(xs, [c["step_ratio"] if c["step_ratio"] is not None else float("nan") for c in cs],
                              marker="o", label=executor)
        for col, title in enumerate(("completion rate", "starved ticks / trial", "boundary / within step")):
            axes[row][col].set_title(f"{policy}: {title}")
            axes[row][col].set_xlabel("latency (ms)")
        axes[row][2].axhline(1.5, color="grey", linestyle="--", linewidth=1)
        axes[row][0].legend(fontsize=8)
    fig.tight_layout()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMAGE, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="oracle,memorizer")
    parser.add_argument("--latencies", default="0,50,100,200,300", help="ms, comma list")
    parser.add_argument("--executors", default=",".join(EXECUTORS))
    parser.add_argument("--levels", default="L0")
    parser.add_argument("--limit", type=int, default=2, help="tasks per scene and level (default 2: 8 tasks at L0)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=10, help="budget: max_steps × 50 ticks (default 500)")
    parser.add_argument("--control-hz", type=int, default=25)
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--no-doc", action="store_true", help="print the table; do not touch docs/")
    args = parser.parse_args()
    policies = args.policies.split(",")
    latencies = [int(v) for v in args.latencies.split(",")]
    executors = args.executors.split(",")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-realtime-"))
    work.mkdir(parents=True, exist_ok=True)
    cells: dict[tuple[str, int, str], dict[str, Any]] = {}
    total, started = len(policies) * len(latencies) * len(executors), time.monotonic()
    for policy in policies:
        for latency in latencies:
            for executor in executors:
                cell = run_cell(policy, latency, executor, args, work)
                cells[(policy, latency, executor)] = cell
                elapsed = time.monotonic() - started
                print(f"[{len(cells)}/{total}] {policy} {latency} ms {executor}: CR {cell['cr']:.2f} "
                      f"starved {cell['starved']:.1f} ratio {fmt(cell['step_ratio'])}  "
                      f"({elapsed:.0f} s, ETA {elapsed / len(cells) * (total - len(cells)):.0f} s)", flush=True)
    text = table(cells)
    lines = goals(cells, executors)
    print(text)
    print("\n".join(lines))
    if args.no_doc:
        return
    plot(cells, latencies, executors)
    size = (f"`bench/realtime.py --policies {args.policies} --latencies {args.latencies} --levels {args.levels} "
            f"--limit {args.limit} --rounds {args.rounds} --max-steps {args.max_steps} --control-hz {args.control_hz}`")
    write_section("realtime", f"{size} — {time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s.\n\n"
                  f"{text}\n\nGoals (issue 26):\n\n" + "\n".join(lines) + "\n\n![realtime](images/realtime.png)")


if __name__ == "__main__":
    main()
