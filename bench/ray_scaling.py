"""Ray scale-out: rendered trials per minute on one node and on two, and the scaling efficiency.

By default the cluster is ``ray.cluster_utils.Cluster`` on this machine (the two-node cluster the tests
use), with ``--cpus-per-node`` CPUs per node and one actor per CPU; the local backend with the same
number of workers as one node is the baseline. On a real cluster, give ``--address auto`` (on the head)
and ``--workers A,B`` (e.g. one node's CPUs, then two nodes'): each count is one measurement.

    .venv/bin/python bench/ray_scaling.py                      # 1 vs 2 nodes x 1 CPU, here
    .venv/bin/python bench/ray_scaling.py --cpus-per-node 4 --tasks 6 --rounds 2
    .venv/bin/python bench/ray_scaling.py --address auto --workers 16,32

Rates count every trial from the start of the run (worker start-up included: what a user waits for) and
also the steady rate after each worker's first trial. Rewrites the ``ray_scaling`` section of
docs/benchmarks.md (``--no-doc`` to only print). Wall-clock figures: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchdoc import write_section

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation


@dataclass
class Measurement:
    label: str
    nodes: int
    workers: int
    trials: int
    wall_s: float
    steady_per_min: float

    @property
    def per_min(self) -> float:
        return 60.0 * self.trials / self.wall_s


class _Clock(io.StringIO):
    """Progress stream that notes when each trial was recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[int, float]] = []

    def write(self, text: str) -> int:
        for done in re.findall(r"\] (\d+)/\d+ trials", text):
            self.times.append((int(done), time.monotonic()))
        return super().write(text)


def measure(label: str, nodes: int, workers: int, args: argparse.Namespace, **backend: object) -> Measurement:
    with tempfile.TemporaryDirectory(prefix="ray-scaling-") as tmp:
        config = EvalConfig(policy=args.policy, output=Path(tmp) / "run", limit=args.tasks, rounds=args.rounds,
                            render=args.render, workers=workers, **backend)  # type: ignore[arg-type]
        clock = _Clock()
        started = time.monotonic()
        outcome = run_evaluation(config, stream=clock)
        wall = time.monotonic() - started
    trials = outcome.recorded
    # steady state: from the moment every worker has delivered once to the last trial
    first_round = min(workers, trials)
    steady = [(n, t) for n, t in clock.times if n >= first_round]
    rate = 60.0 * (steady[-1][0] - steady[0][0]) / (steady[-1][1] - steady[0][1]) if len(steady) > 1 else float("nan")
    print(f"{label:<28} {trials:>4} trials in {wall:7.1f} s: {60 * trials / wall:6.1f}/min, steady {rate:6.1f}/min",
          flush=True)
    return Measurement(label, nodes, workers, trials, wall, rate)


def local_cluster(nodes: int, cpus: int) -> object:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    return cluster


def run(args: argparse.Namespace) -> list[Measurement]:
    results = []
    if args.address:
        for workers in args.workers:
            results.append(measure(f"ray, {workers} workers", 0, workers, args, backend="ray",
                                   ray_address=args.address))
        return results
    results.append(measure(f"local, {args.cpus_per_node} workers", 1, args.cpus_per_node, args, backend="local"))
    for nodes in args.nodes:
        cluster = local_cluster(nodes, args.cpus_per_node)
        try:
            results.append(measure(f"ray, {nodes} node(s) x {args.cpus_per_node} CPU", nodes,
                                   nodes * args.cpus_per_node, args, backend="ray",
                                   ray_address=cluster.address))  # type: ignore[attr-defined]
        finally:
            cluster.shutdown()  # type: ignore[attr-defined]
    return results


def table(results: list[Measurement], args: argparse.Namespace) -> str:
    one = next((m for m in results if m.nodes == 1 and "ray" in m.label), None)
    lines = ["| run | workers | trials | wall (s) | trials/min | steady trials/min | per node /min | efficiency |",
             "|---|---|---|---|---|---|---|---|"]
    for m in results:
        per_node = f"{m.per_min / m.nodes:.1f}" if m.nodes else "-"
        eff = f"{m.per_min / (m.nodes * one.per_min):.0%}" if one and m.nodes and "ray" in m.label else "-"
        lines.append(f"| {m.label} | {m.workers} | {m.trials} | {m.wall_s:.1f} | {m.per_min:.1f} | "
                     f"{m.steady_per_min:.1f} | {per_node} | {eff} |")
    where = (f"Ray cluster at {args.address}" if args.address else
             f"`ray.cluster_utils.Cluster` on one machine ({os.cpu_count()} CPUs, {platform.machine()})")
    setup = (f"policy `{args.policy}`, `--limit {args.tasks}` tasks per scene and level × {args.rounds} "
             f"round(s), all levels, "
             f"{'rendered (3 cameras)' if args.render else 'no rendering'}; {where}")
    note = ("Efficiency = trials/min of n nodes ÷ (n × trials/min of one node), start-up included. Nodes that "
            "share one machine share its cores and memory bandwidth: the figure on a real cluster is the one "
            "that counts (`--address auto --workers A,B`).")
    return "\n".join(["## Ray scale-out (`bench/ray_scaling.py`)", "", setup, "", *lines, "", note])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default="oracle")
    p.add_argument("--tasks", type=int, default=2, help="--limit: tasks per scene and level (default 2: 32 tasks)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--cpus-per-node", type=int, default=1)
    p.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument("--address", help="measure an existing cluster (auto, HOST:PORT, ray://HOST:10001)")
    p.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2],
                   help="with --address: worker counts to measure")
    render = p.add_mutually_exclusive_group()
    render.add_argument("--render", dest="render", action="store_true", default=True)
    render.add_argument("--no-render", dest="render", action="store_false")
    p.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = p.parse_args(argv)
    text = table(run(args), args)
    print(text)
    if not args.no_doc:
        write_section("ray_scaling", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
