"""OWDA speed and execution figures; rewrites the ``owda`` section of docs/benchmarks.md.

Measures: suite generation and validation (seconds, median of --repeats), reference-decider
evaluation throughput (instances/s, incl. bootstrap), the chat adapter's loopback round trip against
a local chat-completions server answering from the reference decider, the suite's table (families,
distinct sentences and rejected seeds per operator and type, as `robofollow owda stats` prints it), and
the share of a seeded sample of suite decisions that executes in SAPIEN (oracle planner) with every
step's preconditions true in the world model, every postcondition met and the simulator showing the
world model's state after every step.

    nice -n 10 .venv/bin/python bench/owda_suite.py [--execute 60] [--repeats 3] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchdoc import write_section

from robofollow_ros.decisions.chat_client import ChatClient
from robofollow_ros.decisions.deciders import ChatDecider, ReferenceDecider
from robofollow_ros.decisions.evaluate import run_evaluation
from robofollow_ros.decisions.execute import execute_decision
from robofollow_ros.decisions.generator import generate_suite
from robofollow_ros.decisions.suite_io import load_suite, write_suite
from robofollow_ros.decisions.suite_stats import markdown_table, suite_table
from robofollow_ros.decisions.validate import validate_suite


def _timed(fn, repeats: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _chat_roundtrip(suite, n: int) -> float:  # type: ignore[no-untyped-def]
    anchors = {a.anchor_id: a for a in suite.anchors}
    reference = ReferenceDecider()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            anchor_id = re.search(r"^Table state (\S+)\.", prompt, re.M).group(1)  # type: ignore[union-attr]
            instruction = re.search(r"^Instruction: (.+)$", prompt, re.M).group(1)  # type: ignore[union-attr]
            decision = reference.decide(anchors[anchor_id], instruction).decision or ()
            payload = json.dumps({"choices": [{"message": {"role": "assistant",
                                                           "content": json.dumps({"decision": list(decision)})}}]})
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    decider = ChatDecider(ChatClient(f"http://127.0.0.1:{httpd.server_address[1]}/v1", "bench"))
    instances = [(anchors[f.anchor_id], i) for f in suite.families for i in f.instances][:n]
    times = []
    for anchor, inst in instances:
        t0 = time.perf_counter()
        answer = decider.decide(anchor, inst.text)
        times.append(time.perf_counter() - t0)
        assert answer.decision is not None
    httpd.shutdown()
    httpd.server_close()
    return statistics.median(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--execute", type=int, default=60, help="decisions to execute in SAPIEN (seeded sample)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--chat-calls", type=int, default=300)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args()

    gen_s, suite = _timed(lambda: generate_suite(0), args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        write_suite(suite, Path(tmp) / "s")  # type: ignore[arg-type]
        load_s, loaded = _timed(lambda: load_suite(Path(tmp) / "s"), args.repeats)
        val_s, _ = _timed(lambda: validate_suite(loaded), args.repeats)  # type: ignore[arg-type]
        n_inst = sum(len(f.instances) for f in suite.families)  # type: ignore[attr-defined]
        eval_s, result = _timed(lambda: run_evaluation(loaded, ReferenceDecider(), Path(tmp) / f"e{time.time_ns()}"),
                                1)
    chat_ms = _chat_roundtrip(suite, args.chat_calls)

    rng = random.Random(0)
    anchors = {a.anchor_id: a for a in suite.anchors}  # type: ignore[attr-defined]
    pool = [(anchors[f.anchor_id], i) for f in suite.families for i in f.instances]  # type: ignore[attr-defined]
    sample = rng.sample(pool, args.execute)
    ok_oc = ok_as = n_oc = n_as = post_ok = 0
    failures: list[str] = []
    drifts: list[str] = []
    exec_times = []
    started = time.perf_counter()
    for n, (anchor, inst) in enumerate(sample, start=1):
        t0 = time.perf_counter()
        report = execute_decision(anchor, inst.decision, spec=inst.spec)
        exec_times.append(time.perf_counter() - t0)
        if anchor.kind == "object_centric":
            n_oc += 1
            ok_oc += report["satisfied"]
        else:
            n_as += 1
            ok_as += report["satisfied"]
        post_ok += report["postconditions_met"]
        if report["postconditions_met"] and not report["satisfied"]:
            drifts.append(f"{inst.instance_id}: {report['state_mismatches'][0]}")
        elif not report["satisfied"]:
            bad = next((s for s in report["steps"] if not s["ok"]), None)
            why = (f"initial state: {report['initial_state']}" if report["initial_state"] != "matches the anchor"
                   else f"{bad['action']} - {bad['detail']}" if bad else report["final_check"])
            failures.append(f"{inst.instance_id}: {why}")
        elapsed = time.perf_counter() - started
        print(f"  executed {n}/{len(sample)}, {n / elapsed:.2f}/s, ETA {(len(sample) - n) * elapsed / n:.0f} s, "
              f"satisfied {ok_oc + ok_as}", file=sys.stderr)

    m = result["metrics"]  # type: ignore[index]
    load = os.getloadavg()[0]
    lines = [
        f"`bench/owda_suite.py` — CPython {platform.python_version()}, {platform.machine()}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d}; load average {load:.1f} on {os.cpu_count()} cores (shared machine).",
        "",
        "| measurement | result |",
        "|---|---:|",
        f"| generate the default suite (85 anchors, 1,090 families, 4,360 instances), median of {args.repeats} "
        f"| {gen_s:.2f} s |",
        f"| load the suite from disk | {load_s:.2f} s |",
        f"| validate every task (read-back, solve, world model, activity, one-word, distinctness, matched "
        f"instances) | {val_s:.2f} s |",
        f"| `reference` evaluation incl. 1,000-rep bootstrap | {eval_s:.2f} s ({n_inst / eval_s:,.0f} instances/s) |",
        f"| chat adapter round trip on loopback (prompt + HTTP + reading the reply), median of {args.chat_calls} "
        f"| {chat_ms:.2f} ms |",
        f"| SAPIEN execution (oracle planner), seeded sample of {args.execute} decisions, every step checked "
        f"against the world model: satisfied "
        f"| {ok_oc + ok_as}/{args.execute} (object-centric {ok_oc}/{n_oc}, action-sequence {ok_as}/{n_as}) |",
        f"| the same sample by the earlier criterion (postconditions and final state only, no state check) "
        f"| {post_ok}/{args.execute} |",
        f"| SAPIEN execution time per decision, median (physics only, no rendering) "
        f"| {statistics.median(exec_times):.2f} s |",
        "",
        f"Reference decider on that suite: atomic {m['atomic_accuracy']['value']:.3f}, compositional "
        f"{m['compositional_accuracy']['value']:.3f}, DI {m['decision_invariance']['value']:.3f}, "
        f"DS {m['decision_sensitivity']['value']:.3f}, CCS {m['conditional_composition_success']['value']:.3f}.",
        "",
        "The suite (`robofollow owda stats`): families, instances and distinct instructions (per anchor) per operator "
        "and composition type, and the family seeds the validator's checks turned down while generating, and why.",
        "",
        markdown_table(suite_table(suite)),  # type: ignore[arg-type]
    ]
    if failures:
        lines += ["", "Executions where a primitive failed (the decision was proved executable in the world "
                  "model; these are the simulator's and planner's failures):", ""]
        lines += [f"- {f}" for f in failures]
    if drifts:
        lines += ["", "Executions whose primitives all met their postconditions but whose state drifted from the "
                  "world model (first mismatch):", ""]
        lines += [f"- {f}" for f in drifts]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("owda", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
