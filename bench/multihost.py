"""Across the test bed's network: trials/min for 1, 2 and 4 Ray worker hosts, and requests/s of a 100 ms
model behind 20 ms +- 5 ms RTT for server batch sizes 1, 4 and 8 (``robofollow serve --batch-size``).

Ray: six hosts of ``tools/testbed.sh``: a head (no CPUs), worker hosts with one CPU each (one actor each),
and the driver's host (a CPU-less raylet), every process started by ``ray start`` as docs/scale-out.md
says; worker hosts join one after another, and after each step the same ``robofollow eval --backend ray``
(oracle, no rendering) runs from the driver host. Rates count from the evaluator's start to its exit.

Served model:
Two hosts of ``tools/testbed.sh`` (root): the "GPU box" (host 2, its cable shaped to 10 ms +- 2.5 ms each
way) serves ``shared_echo`` with ``delay_s=0.1``, a model whose every call (one observation, or one batch)
takes 100 ms; host 1 runs 8 RoboFollow TCP clients, each sending full observations (three 320x240 RGB
images, 14 joints, an instruction) back to back. The ``latency:100:SPEC`` wrapper gives the same 100 ms
per call but has no ``predict_batch``, so it cannot be served batched: the echo stands in for it.

    sudo .venv/bin/python bench/multihost.py            # rewrites the `multihost` section of docs/benchmarks.md
    sudo .venv/bin/python bench/multihost.py --no-doc

All hosts share this machine's cores with each other and with the switch that carries their frames:
the figures show what the network and the set-up cost, not what more machines would give.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchdoc import write_section

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "testbed.sh"
PREFIX = "rfbbench"
CLIENTS, REQUESTS = 8, 12
BATCHES = (1, 4, 8)
MODEL_S = 0.1


def client_main(host: str, port: int, clients: int, requests: int) -> None:
    """On host 1: ``clients`` threads, each its own connection, ``requests`` predicts each; prints JSON."""
    from robofollow_ros.policy.drills.scripted import make_observation
    from robofollow_ros.policy.wire.robofollow.client import RoboFollowTcpPolicy

    latencies: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(clients + 1)

    def one(index: int) -> None:
        policy = RoboFollowTcpPolicy(host, port, timeout_s=60)
        obs = make_observation(seed=index, instruction=f"client {index}")
        policy.reset()
        policy.set_instruction(f"client {index}")
        ready.wait()
        for _ in range(requests):
            start = time.monotonic()
            policy.predict(obs)
            with lock:
                latencies.append(time.monotonic() - start)
        policy.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.monotonic()
    for t in threads:
        t.join()
    print(json.dumps({"wall_s": time.monotonic() - start, "latencies": latencies}))


def testbed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, RFB_PREFIX=PREFIX), check=True)


def measure(batch: int) -> dict[str, float]:
    env = dict(os.environ, RFB_PREFIX=PREFIX, PYTHONPATH=str(REPO))
    port = 9000 + batch
    server = subprocess.Popen(["bash", str(SCRIPT), "exec", "2", sys.executable, "-m", "robofollow_ros.cli", "serve",
                               "--policy", "robofollow_ros.policy.drills.echo:shared_echo",
                               "--kwargs", json.dumps({"delay_s": MODEL_S}), "--host", "10.213.0.2",
                               "--port", str(port),
                               "--batch-size", str(batch), "--batch-wait-ms", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert server.stdout is not None
    for line in server.stdout:  # waits for the server's own announcement
        if "Policy server:" in line:
            break
    else:
        raise RuntimeError(f"the server (batch {batch}) did not start")
    done = subprocess.run(["bash", str(SCRIPT), "exec", "1", sys.executable, __file__, "--client", "10.213.0.2",
                           str(port)], capture_output=True, text=True, timeout=900, env=env, check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    lat = sorted(data["latencies"])
    return {"n": len(lat), "per_s": len(lat) / data["wall_s"], "median_ms": 1000 * statistics.median(lat),
            "p05_ms": 1000 * lat[int(0.05 * (len(lat) - 1))], "p95_ms": 1000 * lat[int(0.95 * (len(lat) - 1))]}


RAY = str(Path(sys.executable).parent / "ray")
RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
RAY_HOSTS = (2, 3, 4, 5)  # the worker hosts, joined in this order; head 1, driver 6
EVAL_ARGS = ("--policy", "oracle", "--levels", "L0", "--limit", "2", "--rounds", "1", "--no-render")


def ray_start(host: int, *args: str) -> None:
    env = dict(os.environ, RFB_PREFIX=PREFIX, PYTHONPATH=str(REPO), **RAY_ENV)
    subprocess.run(["bash", str(SCRIPT), "exec", str(host), RAY, "start", "--node-ip-address", f"10.213.0.{host}",
                    "--disable-usage-stats", "--object-store-memory", str(100 * 2**20), *args],
                   capture_output=True, text=True, timeout=300, env=env, check=True)


def ray_rates(out_root: Path) -> list[str]:
    """Rows ``| worker hosts | n trials | wall s | trials/min |`` for 1, 2 and 4 worker hosts."""
    env = dict(os.environ, RFB_PREFIX=PREFIX, PYTHONPATH=str(REPO), **RAY_ENV)
    ray_start(1, "--head", "--port", "6379", "--num-cpus", "0", "--include-dashboard", "false")
    ray_start(6, "--address", "10.213.0.1:6379", "--num-cpus", "0")
    rows, joined = [], 0
    for want in (1, 2, 4):
        while joined < want:
            ray_start(RAY_HOSTS[joined], "--address", "10.213.0.1:6379", "--num-cpus", "1")
            joined += 1
        out = out_root / f"ray{want}"
        start = time.monotonic()
        subprocess.run(["bash", str(SCRIPT), "exec", "6", sys.executable, "-m", "robofollow_ros.cli", "eval",
                        "--backend", "ray", "--ray-address", "10.213.0.1:6379", "--workers", str(want), *EVAL_ARGS,
                        "--output", str(out)], capture_output=True, text=True, timeout=1800, env=env, check=True)
        wall = time.monotonic() - start
        n = len(json.loads((out / "results.json").read_text()))
        print(f"ray {want} worker host(s): {n} trials in {wall:.1f} s", flush=True)
        rows.append(f"| {want} | {n} | {wall:.1f} | {60 * n / wall:.1f} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-doc", action="store_true", help="only print the table")
    ap.add_argument("--client", nargs=2, metavar=("HOST", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        client_main(args.client[0], int(args.client[1]), CLIENTS, REQUESTS)
        return 0
    import tempfile

    testbed("up", "6")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ray_rows = ray_rates(Path(tmp))
    finally:
        testbed("down")
    testbed("up", "2")
    try:
        testbed("shape", "2", "--delay", "10", "--jitter", "2.5")
        rows = []
        for batch in BATCHES:
            m = measure(batch)
            print(f"batch {batch}: {m}", flush=True)
            rows.append(f"| {batch} | {m['n']} | {m['per_s']:.1f} | {m['median_ms']:.0f} "
                        f"[{m['p05_ms']:.0f}, {m['p95_ms']:.0f}] |")
    finally:
        testbed("down")
    text = "\n".join([
        "## Across hosts: Ray worker hosts and a served model (`bench/multihost.py`)",
        "",
        f"Ray on the test bed (tools/testbed.sh): head, driver host and 1, 2, 4 worker hosts of one CPU each, all "
        f"started by `ray start`; `robofollow eval --backend ray` with `{' '.join(EVAL_ARGS)}` from the driver "
        f"host, timed from its start to its exit (actor start-up included). The hosts are namespaces of one "
        f"machine ({os.cpu_count()} CPUs, shared with other jobs): more worker hosts add network hops and "
        "processes, not cores, so this shows the cost of going multi-host, not a speed-up.",
        "",
        "| worker hosts | n trials | wall (s) | trials/min |",
        "|---|---|---|---|",
        *ray_rows,
        "",
        "One run per row (n trials each), so no interval: the differences between rows are not shown to exceed "
        "run-to-run noise on this shared machine; rerun with more trials (`--limit`) before reading them.",
        "",
        f"Test bed (tools/testbed.sh): `robofollow serve` of a 100 ms model (`shared_echo`, `delay_s` 0.1: 100 ms "
        f"per call, one observation or one batch) on host 2 behind 20 ms ± 5 ms RTT; {CLIENTS} RoboFollow TCP "
        f"clients on host 1, {REQUESTS} back-to-back predicts each (three 320×240 images per request), "
        f"`--batch-wait-ms 20`. Both hosts and the test bed's user-space switch share this machine "
        f"({os.cpu_count()} CPUs, {platform.machine()}, with other jobs running).",
        "",
        "| server batch size | n requests | requests/s | latency ms, median [5th, 95th percentile] |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Ideal with {CLIENTS} clients: batch 1 serves one call per 100 ms (10/s); batch B up to B per call. "
        "The `latency:100:SPEC` wrapper has no `predict_batch`, so it is served one call at a time only "
        "(the batch-1 row).",
    ])
    print(text)
    if not args.no_doc:
        write_section("multihost", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
