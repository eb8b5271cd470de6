"""Real-time execution under inference latency (issue 26): what latency does to scores and motion.

For each policy × latency (``latency:MS:`` wrapper) × executor, runs ``robofollow eval --execution realtime``
in process (inline backend) and reports completion rate (Wilson 95 % interval), IS/ES (mean, normal 95 %
interval), arm idle ticks (cold-start holds; starved ticks: holds after the first row), the largest joint
step, the largest and mean steps at chunk boundaries vs within chunks (ratios), the jerk, and requests per
simulated second. Policies:

* ``oracle`` (privileged, in process) and ``memorizer`` (instruction + joints: the mirage baseline), with
  ``dense_hz`` = the control rate: dense chunks of 50 rows at 25 Hz interpolated from their waypoints
  (``policy.expert.dense``), as a real chunked policy emits them (``--waypoints``: the sparse waypoint
  chunks of lock-step instead);
* ``learned:CKPT``: the BC baseline (``robofollow train``), run with the cameras rendered; its rows are at
  the rate of the demonstrations it was trained on (collect them at ``--fps 25`` for a 25 Hz clock).

Executors:

* ``sync``: request only when the queue is empty, never earlier (``--threshold 0 --fixed-threshold``): the arm
  holds while every chunk is computed;
* ``async-drop``: request at half a chunk, newest chunk wins, rows executed meanwhile dropped (merge latest);
* ``weighted``: as async-drop, overlapping rows 0.3·old + 0.7·new;
* ``ensemble``: ACT temporal ensembling, a request always in flight (threshold = chunk), m = 0.01.

Cells are kept in ``--cells`` (JSON; default ``<workdir>/cells.json``) and not run again, so a long grid runs
in parts (e.g. one policy per invocation) and the table is written from every cell of the requested grid.

Run by hand (not in the test suite)::

    .venv/bin/python bench/realtime.py --policies oracle,memorizer --cells /tmp/rt.json   # 40 cells
    .venv/bin/python bench/realtime.py --policies learned:CKPT --cells /tmp/rt.json \
        --doc-policies oracle,memorizer,learned:CKPT                                       # adds 20, one table
    .venv/bin/python bench/realtime.py --limit 1 --latencies 0,200 --no-doc              # a quick look

With ``--limit 1`` (4 trials per cell) the 28 oracle/memorizer cells took 142 s on 2 idle cores and ~20 min
when ~7 other jobs shared them; learned cells render the cameras (ensemble at 0 ms: a request every tick).

Writes the table into docs/benchmarks.md (section *realtime*) and the plot to docs/images/realtime.png.
"""

from __future__ import annotations

import argparse
import json
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
from robofollow_ros.evaluation.intervals import WILSON_BOUND, mean_interval, wilson_at  # noqa: E402
from robofollow_ros.evaluation.intervals import wilson as _wilson  # noqa: E402
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation  # noqa: E402

EXECUTORS: dict[str, dict[str, Any]] = {
    "sync": {"merge": "latest", "threshold": 0, "adapt_threshold": False},
    "async-drop": {"merge": "latest"},
    "weighted": {"merge": "weighted"},
    "ensemble": {"merge": "ensemble", "threshold": 50},
}
IMAGE = ROOT / "docs" / "images" / "realtime.png"


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95 % interval of k of n (``evaluation.intervals``, as every report of the package)."""
    return _wilson(k, n).pair()


def mean_ci(values: list[float], tasks: list[str]) -> list[Any]:
    """[mean, lo, hi, method]: the mean and its 95 % interval as ``report`` gives it (``intervals.mean_interval``:
    a seeded bootstrap, over tasks when a task has several rounds; the Wilson bound at the mean where it collapses,
    so never a point for n > 0)."""
    ci = mean_interval(values, tasks, n_resamples=10_000, seed=0)
    return [sum(values) / len(values), ci.lo, ci.hi, ci.method]


def score_text(value: list[Any], n: int) -> str:
    """A cell's IS or ES with its interval (``*``: the Wilson bound at the mean). A cell measured before the
    intervals module (``[mean, half-width]`` of a normal interval, 0 when every score was equal) is shown with
    that interval where it has a width, else with the Wilson bound at the mean, as the module gives."""
    if len(value) == 4:
        mean, lo, hi, method = value
    else:
        mean, half = value
        lo, hi, method = max(0.0, mean - half), min(1.0, mean + half), "normal"
        if half == 0:
            bound = wilson_at(min(1.0, max(0.0, mean)), n)
            lo, hi, method = bound.lo, bound.hi, WILSON_BOUND
    return f"{mean:.2f} [{lo:.2f}, {hi:.2f}]{'*' if method == WILSON_BOUND else ''}"


#: Under the table: how its intervals are made.
TABLE_NOTE = ("95 % intervals: CR Wilson on completed/n; IS, ES the seeded bootstrap of the mean over tasks (rounds "
              "of a task together) when tasks have several rounds, else over trials; * = every score equal, so the "
              "Wilson bound at the mean (never a point for n > 0); cells measured before this version carry a normal "
              "interval where it had a width (`intervals.py`, docs/reports.md)")


def pooled(trials: list[dict[str, Any]], key: str, count: str) -> float | None:
    pairs = [(m[key], m[count]) for m in (t["execution"]["motion"] for t in trials) if m[key] is not None and m[count]]
    total = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / total if total else None


def largest(trials: list[dict[str, Any]], key: str) -> float | None:
    values = [t["execution"]["motion"].get(key) for t in trials]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def summarise(trials: list[dict[str, Any]], control_hz: int) -> dict[str, Any]:
    n = len(trials)
    k = sum(bool(t["completion_ok"]) for t in trials)
    ex = [t["execution"] for t in trials]
    boundary_step, within_step = pooled(trials, "boundary_step_rad", "boundary_ticks"), \
        pooled(trials, "within_step_rad", "within_ticks")
    boundary_jerk, within_jerk = pooled(trials, "boundary_jerk_rad_s3", "boundary_ticks"), \
        pooled(trials, "within_jerk_rad_s3", "within_ticks")
    ticks = sum(e["ticks"] for e in ex)
    max_boundary, max_within = largest(trials, "max_boundary_step_rad"), largest(trials, "max_within_step_rad")
    return {
        "n": n, "k": k, "cr": k / n, "cr_ci": wilson(k, n),
        "is": mean_ci([t["intent_score"] for t in trials], [t["task"] for t in trials]),
        "es": mean_ci([t["exec_score"] for t in trials], [t["task"] for t in trials]),
        "cold_holds": sum(e["hold_ticks"] - e["starved_ticks"] for e in ex) / n,
        "starved": sum(e["starved_ticks"] for e in ex) / n,
        "idle_in_flight_after_first": sum(e["idle_in_flight_ticks"] - (e["hold_ticks"] - e["starved_ticks"])
                                          for e in ex) / n,
        "late_chunks": sum(e["late_chunks"] for e in ex) / n,
        "max_step": max(e["motion"]["max_step_rad"] for e in ex),
        "boundary_step": boundary_step, "within_step": within_step,
        "step_ratio": boundary_step / within_step if boundary_step is not None and within_step else None,
        "max_boundary_step": max_boundary, "max_within_step": max_within,
        "max_step_ratio": max_boundary / max_within if max_boundary is not None and max_within else None,
        "boundary_jerk": boundary_jerk, "within_jerk": within_jerk,
        "jerk_ratio": boundary_jerk / within_jerk if boundary_jerk is not None and within_jerk else None,
        "requests_per_s": sum(e["requests"] for e in ex) / (ticks / control_hz),
        "errors": sum("policy_error" in t for t in trials),
    }


PLANNERS = ("oracle", "memorizer", "blind")


def label(policy: str) -> str:
    """The table's name of a policy: ``learned:CKPT`` is ``learned``."""
    return "learned" if policy.startswith("learned:") else policy


def policy_kwargs(policy: str, args: argparse.Namespace) -> dict[str, Any]:
    return {"dense_hz": args.control_hz} if policy in PLANNERS and not args.waypoints else {}


def cell_key(policy: str, latency: int, executor: str, args: argparse.Namespace) -> str:
    """What a stored cell was measured with: a cell of other settings is run again."""
    chunks = "waypoints" if args.waypoints else "dense"
    return (f"{label(policy)}|{latency}|{executor}|{chunks}|{args.levels}|{args.limit}|{args.rounds}|"
            f"{args.max_steps}|{args.control_hz}")


def run_cell(policy: str, latency: int, executor: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    execution = ExecutionSettings(mode="realtime", control_hz=args.control_hz, **EXECUTORS[executor])
    out = work / f"{label(policy)}_{latency}_{executor}_{time.time_ns()}"
    config = EvalConfig(policy=f"latency:{latency}:{policy}", policy_kwargs=policy_kwargs(policy, args), output=out,
                        levels=tuple(args.levels.split(",")), rounds=args.rounds, limit=args.limit,
                        settings=EpisodeSettings(args.max_steps, 50, execution),
                        render=policy.startswith("learned:"), stepper="direct", backend="inline",
                        policy_timeout_s=60.0)
    run_evaluation(config, stream=None)
    trials = json.loads((out / "results.json").read_text())
    return summarise(trials, args.control_hz)


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def table(cells: dict[tuple[str, int, str], dict[str, Any]]) -> str:
    head = ("| policy | latency ms | executor | n | CR [95% CI] | IS [95% CI] | ES [95% CI] | cold-start holds | "
            "starved ticks / trial | late chunks / trial | max step rad | largest boundary / within step (ratio) | "
            "mean boundary / within step (ratio) | mean boundary / within jerk rad/s³ (ratio) | requests/s |\n|"
            + "---|" * 15)
    rows = [head]
    for (policy, latency, executor), c in cells.items():
        lo, hi = c["cr_ci"]
        rows.append(
            f"| {policy} | {latency} | {executor} | {c['n']} | **{c['cr']:.2f}** [{lo:.2f}, {hi:.2f}] | "
            f"{score_text(c['is'], c['n'])} | {score_text(c['es'], c['n'])} | {c['cold_holds']:.1f} | "
            f"{c['starved']:.1f} | {c['late_chunks']:.1f} | {c['max_step']:.3f} | "
            f"{fmt(c.get('max_boundary_step'), '.4f')} / {fmt(c.get('max_within_step'), '.4f')} "
            f"({fmt(c.get('max_step_ratio'))}) | "
            f"{fmt(c['boundary_step'], '.4f')} / {fmt(c['within_step'], '.4f')} ({fmt(c['step_ratio'])}) | "
            f"{fmt(c['boundary_jerk'], '.0f')} / {fmt(c['within_jerk'], '.0f')} ({fmt(c['jerk_ratio'])}) | "
            f"{c['requests_per_s']:.1f} |")
    return "\n".join(rows) + "\n\n" + TABLE_NOTE


#: Why the idle-tick goal is not met, per policy, when it is not (read off the executor's counters).
IDLE_WHY = {
    "oracle": "the closed-loop oracle plans a phase only once it sees the previous one end (a grasp is verified "
              "before the retry or the next phase is planned), so each phase end waits one request",
    "learned": "see the notes below the table",
}


def goals(cells: dict[tuple[str, int, str], dict[str, Any]], executors: list[str]) -> list[str]:
    """One line per policy × executor at 200 ms: each of the issue's goals, met or not, and why not."""
    out = []
    for executor in executors:
        for policy in sorted({p for p, _, _ in cells}):
            at = cells.get((policy, 200, executor))
            zero = cells.get((policy, 0, executor))
            if at is None:
                continue
            idle, ratio = at["starved"], at.get("max_step_ratio")
            if executor == "sync":
                idle_text = f"{idle:.1f} starved ticks/trial (sync holds during every call by design; no goal)"
            else:
                why = "" if idle == 0 else f": {IDLE_WHY.get(policy, 'see the notes')}"
                verdict = "met" if idle == 0 else "NOT met"
                idle_text = f"{idle:.1f} starved ticks/trial after the first row ({verdict}{why})"
            line = (f"- {policy}, {executor}, 200 ms at 25 Hz (n = {at['n']}): {idle_text}; largest boundary / within "
                    f"step {fmt(ratio)} ({'met' if ratio is not None and ratio <= 1.5 else 'NOT met'})")
            if policy == "oracle" and zero is not None:
                drop = (zero["cr"] - at["cr"]) * 100
                line += (f"; completion {at['cr']:.2f} vs {zero['cr']:.2f} at 0 ms "
                         f"({'met' if drop <= 5 else 'NOT met'}, n = {at['n']} each)")
            out.append(line)
    return out


def plot(cells: dict[tuple[str, int, str], dict[str, Any]], latencies: list[int], executors: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = sorted({p for p, _, _ in cells})
    fig, axes = plt.subplots(len(policies), 3, figsize=(13, 3.4 * len(policies)), squeeze=False)
    for row, policy in enumerate(policies):
        for i, executor in enumerate(executors):
            xs = [lat for lat in latencies if (policy, lat, executor) in cells]
            shift = (i - (len(executors) - 1) / 2) * 6.0  # executors side by side: equal rates would hide each other
            cs = [cells[(policy, lat, executor)] for lat in xs]
            crs = [c["cr"] for c in cs]
            lo = [max(0.0, c["cr"] - c["cr_ci"][0]) for c in cs]
            hi = [max(0.0, c["cr_ci"][1] - c["cr"]) for c in cs]
            ns = sorted({c["n"] for c in cs})
            axes[row][0].errorbar([x + shift for x in xs], crs, yerr=[lo, hi], marker="o", capsize=3,
                                  label=f"{executor} (n={'/'.join(map(str, ns))} per point)")
            axes[row][1].plot(xs, [c["starved"] for c in cs], marker="o", label=executor)
            axes[row][2].plot(xs, [c["max_step_ratio"] if c.get("max_step_ratio") is not None else float("nan")
                                   for c in cs], marker="o", label=executor)
        for col, title in enumerate(("completion rate", "starved ticks / trial", "largest boundary / within step")):
            axes[row][col].set_title(f"{policy}: {title}")
            axes[row][col].set_xlabel("latency (ms)")
        axes[row][0].set_ylim(-0.05, 1.05)  # a fixed completion axis: 0.96-1.04 autoscaled reads as a spread
        axes[row][0].set_ylabel("completion (Wilson 95 % CI)")
        axes[row][2].axhline(1.5, color="grey", linestyle="--", linewidth=1)
        axes[row][0].legend(fontsize=8)
    fig.tight_layout()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMAGE, dpi=90)


def load_cells(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="oracle,memorizer", help="comma list: oracle, memorizer, learned:CKPT")
    parser.add_argument("--latencies", default="0,50,100,200,300", help="ms, comma list")
    parser.add_argument("--executors", default=",".join(EXECUTORS))
    parser.add_argument("--levels", default="L0")
    parser.add_argument("--limit", type=int, default=2, help="tasks per scene and level (default 2: 8 tasks at L0)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=10, help="budget: max_steps × 50 ticks (default 500)")
    parser.add_argument("--control-hz", type=int, default=25)
    parser.add_argument("--waypoints", action="store_true",
                        help="oracle/memorizer emit their sparse waypoints (lock-step's chunks), not dense chunks")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--cells", type=Path, help="measured cells, kept and reused (default: WORKDIR/cells.json)")
    parser.add_argument("--doc-policies", help="policies of the table written to docs/ (default: --policies); "
                                               "their cells must be in --cells")
    parser.add_argument("--no-doc", action="store_true", help="print the table; do not touch docs/")
    args = parser.parse_args()
    policies = args.policies.split(",")
    latencies = [int(v) for v in args.latencies.split(",")]
    executors = args.executors.split(",")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-realtime-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = args.cells or work / "cells.json"
    store = load_cells(store_path)
    todo = [(p, lat, e) for p in policies for lat in latencies for e in executors
            if cell_key(p, lat, e, args) not in store]
    started = time.monotonic()
    for done, (policy, latency, executor) in enumerate(todo, 1):
        cell = run_cell(policy, latency, executor, args, work)
        store[cell_key(policy, latency, executor, args)] = {**cell, "wall_s": round(time.monotonic() - started, 1)}
        store_path.write_text(json.dumps(store, indent=1))
        elapsed = time.monotonic() - started
        print(f"[{done}/{len(todo)}] {label(policy)} {latency} ms {executor}: CR {cell['cr']:.2f} "
              f"starved {cell['starved']:.1f} largest boundary/within {fmt(cell['max_step_ratio'])}  "
              f"({elapsed:.0f} s, ETA {elapsed / done * (len(todo) - done):.0f} s)", flush=True)
    shown = (args.doc_policies or args.policies).split(",")
    cells: dict[tuple[str, int, str], dict[str, Any]] = {}
    for policy in shown:
        for latency in latencies:
            for executor in executors:
                key = cell_key(policy, latency, executor, args)
                if key in store:
                    cells[(label(policy), latency, executor)] = store[key]
    text = table(cells)
    lines = goals(cells, executors)
    print(text)
    print("\n".join(lines))
    if args.no_doc:
        return
    plot(cells, latencies, executors)
    chunks = " --waypoints" if args.waypoints else ""
    size = (f"`bench/realtime.py --policies {','.join(label(p) for p in shown)} --latencies {args.latencies} "
            f"--levels {args.levels} --limit {args.limit} --rounds {args.rounds} --max-steps {args.max_steps} "
            f"--control-hz {args.control_hz}{chunks}`")
    write_section("realtime", f"{size} — {time.strftime('%Y-%m-%d')}, n per cell in the table.\n\n"
                  f"{text}\n\nGoals (issue 26):\n\n" + "\n".join(lines) + "\n\n![realtime](images/realtime.png)")


if __name__ == "__main__":
    main()
