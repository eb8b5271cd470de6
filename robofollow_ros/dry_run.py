"""The sim-in-the-loop dry run, as users run a model: the policy served in its own process, the ROS
graph (``robofollow bringup sim``) in another, and the headless evaluator as the reference.

The sim profile is the rig's graph with SAPIEN playing the drivers: every row the policy sends goes
through ``arm_bridge_node``'s safety filter and the rig's driver mapping to the arm drivers'
command topics, as it will on the rig. The ROS graph and the headless evaluator run the same core
objects, so for the same tasks and seeds their verdicts must be equal; the dry run checks that on
every trial and says where they differ.

The demo serves the ``oracle``, which plans from the privileged state (task id, true object poses).
Nothing privileged leaves a process by default, so the dry run asks for it explicitly: ``robofollow
bringup sim --privileged`` (policy_node's ``tcp://`` client then forwards it), and the headless
reference runs with ``privileged`` too; both runs say so (``privileged: true`` in run.json's
arguments) and are references, not results comparable with published ones.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from robofollow_ros.benchmark import LEVELS, SCENES, Registry
from robofollow_ros.child_process import child_command, child_env
from robofollow_ros.evaluation.progress import Heartbeat, waited
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from robofollow_ros.rundir.atomic import read_json
from robofollow_ros.rundir.layout import RESULTS_FILE

#: The built-in default: the first task of every scene at L0 and L1 (one round), 8 trials.
DRY_RUN_LEVELS = ("L0", "L1")
#: Longest waits: the server to listen, and the whole ROS run.
SERVER_START_TIMEOUT_S = 120.0
BRINGUP_TIMEOUT_S = 1800.0
VERDICT_FIELDS = ("intent_score", "exec_score", "completion_ok")


def dry_run_task_ids(registry: Registry, levels: Sequence[str] = DRY_RUN_LEVELS) -> list[str]:
    return [registry.eval_tasks(s, lv)[0].task_id for s in SCENES for lv in LEVELS if lv in levels]


@contextmanager
def served_policy(policy: str, log: Path, stream: TextIO | None = None) -> Iterator[str]:
    """``robofollow serve --policy POLICY --port 0`` in its own process; yields its ``tcp://`` SPEC. While it
    starts, ``stream`` (if given) is told every few seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as err:
        cmd = child_command("robofollow_ros.cli", ["serve", "--policy", policy, "--port", "0"])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env())
        try:
            assert proc.stdout is not None
            since = time.monotonic()
            with Heartbeat(lambda: f"… waiting for the policy server to listen, {waited(since)} (log: {log})",
                           stream) if stream is not None else nullcontext():
                line = _read_line(proc, SERVER_START_TIMEOUT_S)
            match = re.match(r"Policy server: (?P<host>[\w.]+):(?P<port>\d+)", line)
            if not match:
                raise RuntimeError(f"policy server did not start: {line.strip() or 'no output'} (log: {log})")
            yield f"tcp://{match['host']}:{match['port']}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """First stdout line of a child, bounded in time (a thread reads; the wait is bounded)."""
    import threading

    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout)
    return box[0] if box else ""


@dataclass
class DryRunOutcome:
    ros_dir: Path
    headless_dir: Path
    compared: int
    differences: list[str]
    table: str


def run_dry_run(output: Path, registry: Registry, policy: str = "oracle", render: bool = True,
                stream: TextIO | None = None, foxglove_port: int | None = None,
                privileged: bool = True) -> DryRunOutcome:
    """Serve ``policy``, run the trials over ROS against it, rerun them headless, compare verdicts.

    ``privileged`` (the served oracle needs it): both runs are started with ``--privileged``."""
    tasks = dry_run_task_ids(registry)
    ros_dir, headless_dir = output / "ros", output / "headless"
    if stream is not None:
        stream.write(f"==> serving {policy} with robofollow serve, in its own process\n")
        stream.flush()
    with served_policy(policy, output / "logs" / "policy_server.log", stream) as spec:
        if stream is not None:
            stream.write(f"==> {policy} served at {spec}; robofollow bringup sim over {len(tasks)} trials\n")
            stream.flush()
        cmd = child_command("robofollow_ros.cli", [
            "bringup", "sim", "--policy", spec, "--tasks", ",".join(tasks), "--rounds", "1", "--output", str(ros_dir),
            "--exit-when-done", *([] if render else ["--no-render"]), *(["--privileged"] if privileged else []),
            *([] if foxglove_port is None else ["--foxglove-port", str(foxglove_port)])])
        returncode, table = _run_relayed(cmd, stream, BRINGUP_TIMEOUT_S)
    if returncode != 0:
        raise RuntimeError(f"robofollow bringup sim exited {returncode}; see the log above")
    if stream is not None:
        stream.write(f"==> headless reference: the same {len(tasks)} trials in-process\n")
    run_evaluation(EvalConfig(policy=policy, output=headless_dir, tasks=tuple(tasks), rounds=1, render=False,
                              privileged=privileged), stream=stream)
    compared, differences = compare_verdicts(read_json(ros_dir / RESULTS_FILE),
                                             read_json(headless_dir / RESULTS_FILE))
    return DryRunOutcome(ros_dir, headless_dir, compared, differences, table.strip())


#: A ROS log line's level and wall-clock stamp, left out where a heartbeat quotes the line.
_ROS_LOG_PREFIX = re.compile(r"^\[\w+\] \[[\d.]+\] ")


def _run_relayed(cmd: list[str], stream: TextIO | None, timeout: float) -> tuple[int, str]:
    """Run ``cmd``: its stdout is returned, its stderr goes to ``stream`` line by line, and while it says nothing
    a line every few seconds quotes its last one. The child cannot speak itself while one call holds its
    interpreter (bringup's in-process sim_node taking its first picture: up to a minute on a CPU renderer)."""
    if stream is None:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=timeout,
                              env=child_env())
        return done.returncode, done.stdout
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    last, since = ["it started"], [time.monotonic()]
    beat = Heartbeat(lambda: f"… robofollow bringup: {waited(since[0])} since its last line: {last[0]}", stream)

    def relay() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with beat.lock:
                stream.write(line)
                stream.flush()
            beat.touch()
            last[0], since[0] = _ROS_LOG_PREFIX.sub("", line.strip())[:120], time.monotonic()

    out: list[str] = []
    threads = [threading.Thread(target=relay, daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else ""), daemon=True)]
    with beat:
        for thread in threads:
            thread.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        for thread in threads:
            thread.join(timeout=30)
    return proc.returncode, "".join(out)


def compare_verdicts(ros: list[dict[str, Any]], headless: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """Trials compared and, for each that differs, ``task r<round>: field ros vs headless``."""
    by_key = {(e["task"], e["round"]): e for e in headless}
    differences = []
    for entry in ros:
        ref = by_key.get((entry["task"], entry["round"]))
        if ref is None:
            differences.append(f"{entry['task']} r{entry['round']}: no headless trial")
            continue
        for name in VERDICT_FIELDS:
            if entry[name] != ref[name]:
                differences.append(f"{entry['task']} r{entry['round']}: {name} {entry[name]} over ROS vs {ref[name]}")
    missing = set(by_key) - {(e["task"], e["round"]) for e in ros}
    differences += [f"{task} r{rnd}: missing over ROS" for task, rnd in sorted(missing)]
    return len(ros), differences
