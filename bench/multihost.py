"""A served model across the test bed's network: requests/s of a 100 ms model behind 20 ms +- 5 ms RTT for
server batch sizes 1, 4 and 8 (``robofollow serve --batch-size``), 8 clients at once.

Two hosts of ``tools/testbed.sh`` (root): the "GPU box" (host 2, its cable shaped to 10 ms +- 2.5 ms each
way) serves ``shared_echo`` with ``delay_s=0.1``, a model whose every call (one observation, or one batch)
takes 100 ms; host 1 runs 8 RoboFollow TCP clients, each sending full observations (three 320x240 RGB
images, 14 joints, an instruction) back to back. The ``latency:100:SPEC`` wrapper gives the same 100 ms
per call but has no ``predict_batch``, so it cannot be served batched: the echo stands in for it.

    sudo .venv/bin/python bench/multihost.py            # rewrites the `multihost` section of docs/benchmarks.md
    sudo .venv/bin/python bench/multihost.py --no-doc

Both hosts share this machine's cores with each other and with the switch that carries their frames.
Not measured here yet: trials/min for 1, 2 and 4 Ray worker hosts (see the report of issue 29).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
                               "--kwargs", json.dumps({"delay_s": MODEL_S}), "--host", "0.0.0.0", "--port", str(port),
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-doc", action="store_true", help="only print the table")
    ap.add_argument("--client", nargs=2, metavar=("HOST", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        client_main(args.client[0], int(args.client[1]), CLIENTS, REQUESTS)
        return 0
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
        "## A served model across the network (`bench/multihost.py`)",
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
        "(the batch-1 row). Trials/min for 1, 2 and 4 Ray worker hosts on the bed: not measured yet.",
    ])
    print(text)
    if not args.no_doc:
        write_section("multihost", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
