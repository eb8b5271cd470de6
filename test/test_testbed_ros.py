"""The sim profile's ROS graph split across two hosts of the test bed (tools/testbed.sh), 20 ms RTT apart
(docs/scale-out.md, "The ROS graph across hosts"): the "rig PC" (host 1) runs sim_node (standing in for the
arm drivers), arm_bridge_node, robot_state_node, stage_monitor_node and trial_manager_node; the "GPU box"
(host 2) runs policy_node with its in-process policy (the oracle, privileged as the sim profile runs it).
Every node is its own process, started as ``robofollow bringup sim --processes`` starts it (the profile
through bringup's loader and choices, ``--params-file``), but inside its host's namespaces, over real Fast
DDS with ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET`` through the bed's switch.

* Lock-step, 20 ms RTT: the two trials' verdicts equal the headless evaluator's for the same tasks and
  seeds (the dry run's comparison, ``dry_run.compare_verdicts``).
* The GPU box's cable pulled mid-trial (rate execution, so the sim's clock keeps running as on a rig):
  the policy's joint commands stop reaching the rig, the arm bridge's watchdog holds the arms and says so
  on its status topic, and the trial fails as ``node-died`` naming policy_node, recorded in results.json
  with the watchdog hold counted beside it; the run ends failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import yaml

from robofollow_ros.bringup import Choices, Profile, apply_choices, load_profile, node_arguments, ros_params_file
from robofollow_ros.bringup.profiles import with_overrides
from robofollow_ros.exit_status import EXIT_OK, EXIT_TRIALS_FAILED
from testbed import PREFIX, PY, Testbed, bed
from waiting import poll_until

pytestmark = pytest.mark.timeout(300)

RIG, GPU_BOX, VIEWER = 1, 2, 3
#: Where a node runs other than on the rig PC: the policy on the GPU box, the Foxglove server on a third host.
HOST_OF = {"policy_node": GPU_BOX, "foxglove_node": VIEWER}
FOXGLOVE_PORT = 8765
#: DDS across hosts (docs/scale-out.md); ROS_DOMAIN_ID is the test session's own (conftest).
DDS = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_STATIC_PEERS": ""}
TASKS = ("L0_pickup_red_cylinder", "L1_scene2_1_01_pickup_red_cylinder_larger_red_object")
#: The arm bridge's watchdog in the cable test (sim seconds; the profile's 10 s spans a lock-step row): well
#: inside the trial manager's 3 s liveliness lease, so the hold comes before the trial is recorded.
WATCHDOG_S = 0.5
#: Sim-time rows at the rig's control rate (rate execution): the cable test's trial runs until pulled.
LONG_STEPS = 200
#: Watches the rig side: trial phases, the policy's commands, the bridge's status, where policy_node runs.
PROBE = """
import json, sys, time, rclpy
from std_msgs.msg import String
from sensor_msgs.msg import JointState
from robofollow_ros.contract import TOPIC_BRIDGE_STATUS, TOPIC_JOINT_COMMAND, TOPIC_TRIAL
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.graph_peers import ALIVE_QOS, alive_topic
rclpy.init()
node = rclpy.create_node("rfb_rig_probe")
def out(kind, **fields):
    print(json.dumps({"t": time.time(), "kind": kind, **fields}), flush=True)
node.create_subscription(String, TOPIC_TRIAL, lambda m: out("trial", **json.loads(m.data)), tp.LATCHED)
node.create_subscription(String, TOPIC_BRIDGE_STATUS, lambda m: out("bridge", **json.loads(m.data)), 100)
node.create_subscription(JointState, TOPIC_JOINT_COMMAND, lambda m: out("command"), tp.STATE_STREAM)
node.create_subscription(String, alive_topic("policy_node"), lambda m: out("policy_alive", **json.loads(m.data)),
                         ALIVE_QOS)
rclpy.spin(node)
"""
#: A Foxglove viewer on the rig PC, watching the server on the viewer host: it subscribes before the trials
#: begin and prints each trial's final score as the viewer saw it.
VIEWER_CLIENT = """
import asyncio, json, sys
from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.ws_client import FoxgloveProbe
async def main(url):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while True:
        probe = FoxgloveProbe(url)
        try:
            await probe.connect()
            break
        except OSError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)
    want = [topics.TRIAL, topics.SCORE]
    await probe.wait_for(lambda: {c["topic"] for c in probe.channels.values()} >= set(want), 60, "advertisements")
    await probe.subscribe(want)
    print("subscribed", flush=True)
    def phases():
        return [json.loads(probe.decode(m).data).get("phase") for m in probe.messages(topics.TRIAL)]
    await probe.wait_for(lambda: "finished" in phases(), 240, "the run's end")
    scores = [json.loads(probe.decode(m).data) for m in probe.messages(topics.SCORE)]
    print(json.dumps({"final_intents": [s["intent"] for s in scores if s.get("final")]}), flush=True)
    await probe.close()
asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def two() -> Iterator[Testbed]:
    for testbed in bed(3):
        testbed.shape(GPU_BOX, delay_ms=10)  # RTT 20 ms between the rig PC and the GPU box (and the viewer)
        yield testbed


def sim_profile(output: Path, tasks: tuple[str, ...] = TASKS, **choices: Any) -> Profile:
    """The sim profile as ``robofollow bringup sim --policy oracle --no-render [--no-foxglove]`` makes it."""
    return apply_choices(load_profile("sim"), Choices(
        policy="oracle", tasks=",".join(tasks), rounds=1, render=False, output=str(output), **choices),
        lambda name: f"--{name}")


class SplitGraph:
    """The profile's nodes, one process each, on the hosts :data:`HOST_OF` names (else the rig PC)."""

    def __init__(self, testbed: Testbed, profile: Profile, logs: Path) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        params = logs / "params.yaml"
        params.write_text(yaml.safe_dump(ros_params_file(profile)))
        self.testbed, self.profile, self.logs = testbed, profile, logs
        self.arguments = node_arguments(profile, params)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, only: set[str] | None = None) -> SplitGraph:
        """Start the profile's nodes (``only`` those) not started yet."""
        for spec in self.profile.nodes:
            if spec.executable in self.procs or (only is not None and spec.executable not in only):
                continue
            self.procs[spec.executable] = self.testbed.popen(
                HOST_OF.get(spec.executable, RIG), PY, "-m", spec.module, *self.arguments[spec.executable],
                log=self.logs / f"{spec.executable}.log", **DDS)
        return self

    def wait_manager(self, timeout_s: float) -> int:
        """The trial manager's exit status (nsenter passes it on) once the trials ended."""
        try:
            return self.procs["trial_manager_node"].wait(timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the trial manager did not end within {timeout_s:g} s: {self.tail('trial_manager_node')}")

    def tail(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        """SIGTERM to each node (nsenter does not forward it: the node is nsenter's child), then SIGKILL."""
        for proc in self.procs.values():
            stop_inside(proc, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                stop_inside(proc, signal.SIGKILL)
                with suppress(subprocess.TimeoutExpired):
                    proc.wait(15)  # the bed's teardown is the backstop


def stop_inside(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process ``testbed.sh exec`` started inside the host (the child of its nsenter)."""
    if proc.poll() is not None:
        return
    for children in Path(f"/proc/{proc.pid}/task").glob("*/children"):
        with suppress(OSError):
            for pid in children.read_text().split():
                with suppress(ProcessLookupError):
                    os.kill(int(pid), sig)


def results(run_dir: Path) -> list[dict[str, Any]]:
    return json.loads((run_dir / "results.json").read_text())


def test_verdicts_across_hosts_equal_the_headless_evaluators(two: Testbed, tmp_path: Path) -> None:
    from robofollow_ros.dry_run import compare_verdicts
    from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation

    run_dir = tmp_path / "ros"
    profile = sim_profile(run_dir, foxglove_host=two.ip(VIEWER), foxglove_port=FOXGLOVE_PORT)
    graph = SplitGraph(two, profile, tmp_path / "logs").start({"foxglove_node"})
    viewer_log = tmp_path / "viewer.log"
    viewer = two.popen(RIG, "timeout", "240", PY, "-c", VIEWER_CLIENT, f"ws://{two.ip(VIEWER)}:{FOXGLOVE_PORT}",
                       log=viewer_log)
    try:  # the viewer watches from the first trial on: the rest of the graph starts once it has subscribed
        assert poll_until(lambda: "subscribed" in viewer_log.read_text() or viewer.poll() is not None, 150), \
            f"the viewer did not subscribe: {viewer_log.read_text()[-2000:]} {graph.tail('foxglove_node')}"
        code = graph.start().wait_manager(180)
        assert viewer.wait(60) == 0, viewer_log.read_text()[-2000:]
    finally:
        graph.stop()
        stop_inside(viewer, signal.SIGTERM)
    assert code == EXIT_OK, graph.tail("trial_manager_node")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    ros = results(run_dir)
    assert [r["task"] for r in ros] == list(TASKS)
    assert all(r["policy_steps"] > 0 and not r.get("fault") for r in ros), ros
    run_evaluation(EvalConfig(policy="oracle", output=tmp_path / "headless", tasks=TASKS, rounds=1, render=False))
    compared, differences = compare_verdicts(ros, results(tmp_path / "headless"))
    assert (compared, differences) == (len(TASKS), [])
    # the viewer on another host saw each trial's final score, and the server there recorded every trial
    seen = json.loads(viewer_log.read_text().splitlines()[-1])
    assert seen["final_intents"] == [r["intent_score"] for r in ros]
    assert len(list((run_dir / "mcap").glob("*.mcap"))) == len(TASKS)


def test_pulled_gpu_box_cable_holds_the_arms_and_fails_the_trial(two: Testbed, tmp_path: Path) -> None:
    run_dir = tmp_path / "ros"
    profile = sim_profile(run_dir, TASKS[:1], execution="rate", max_steps=LONG_STEPS, foxglove=False)
    profile = with_overrides(profile, extra={"arm_bridge_node": {"watchdog_timeout_s": WATCHDOG_S}})
    probe_log = tmp_path / "probe.log"
    probe = two.popen(RIG, "timeout", "240", PY, "-c", PROBE, log=probe_log, **DDS)
    graph = SplitGraph(two, profile, tmp_path / "logs").start()

    def seen() -> list[dict[str, Any]]:
        return [json.loads(line) for line in probe_log.read_text().splitlines() if line.startswith("{")]

    def running_with_commands() -> bool:
        events = seen()
        start = next((i for i, e in enumerate(events) if e["kind"] == "trial" and e.get("phase") == "running"), None)
        return start is not None and sum(e["kind"] == "command" for e in events[start:]) >= 25

    try:
        assert poll_until(running_with_commands, 150), \
            f"no trial running with commands from the GPU box: {graph.tail('trial_manager_node')}"
        pulling = time.time()
        two.link(GPU_BOX, up=False)  # tools/testbed.sh link: the switch drops the port when it answers
        pulled = time.time()
        code = graph.wait_manager(60)
        # Plugged back while the bridge still runs: reliable DDS delivers what the policy node queued meanwhile,
        # stamped with the states it had before the cable went. The bridge refuses that backlog (rig/safety.py).
        replugged = time.time()
        two.link(GPU_BOX, up=True)

        def backlog_judged() -> bool:
            after = [e for e in seen() if e["t"] > replugged]
            late = [e for e in after if e["kind"] == "command"]
            refused = [e for e in after if e["kind"] == "bridge" and "backlog delivered late" in str(e.get("reasons"))]
            return bool(late) and len(refused) >= len(late)

        backlog_seen = poll_until(backlog_judged, 20)
    finally:
        replugged = locals().get("replugged", time.time())
        with suppress(RuntimeError):
            two.link(GPU_BOX, up=True)
        graph.stop()
        stop_inside(probe, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            probe.wait(15)
    events = seen()
    # policy_node ran on the GPU box: its alive topic names that host
    assert {e["host"] for e in events if e["kind"] == "policy_alive"} == {f"{PREFIX}-h{GPU_BOX}"}
    # the commands stopped with the cable (a pulled port's queued frames are dropped; the probe may still be
    # handling one received just before); those the policy node queued meanwhile come after the replug
    late = [e for e in events if e["kind"] == "command" and pulled + 0.1 < e["t"] < replugged]
    assert not late, f"{len(late)} commands between the cable pull and the replug"
    last_command = max(e["t"] for e in events if e["kind"] == "command" and e["t"] < replugged)
    holds = [e for e in events if e["kind"] == "bridge" and e.get("hold") and e["t"] > pulling
             and any(str(r).startswith("watchdog") for r in e.get("reasons", []))]
    assert holds, [e for e in events if e["kind"] == "bridge"]
    assert holds[0]["t"] < replugged  # the bridge held while the GPU box was gone
    assert code == EXIT_TRIALS_FAILED, graph.tail("trial_manager_node")
    (trial,) = results(run_dir)
    assert trial["fault"] == "node-died" and "policy_node" in trial["fault_reason"], trial
    assert trial["safety_holds"].get("watchdog", 0) >= 1, trial
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed" and "policy_node" in run.get("error", ""), run
    after = [e for e in events if e["t"] > replugged]
    backlog = [e for e in after if e["kind"] == "command"]
    passed = [e for e in after if e["kind"] == "bridge" and not e.get("hold")]
    assert not passed, passed  # nothing of the backlog reached the drivers
    # Every command delivered after the replug was refused as a backlog (when the link delivered any).
    assert backlog_seen or not backlog, [e for e in after if e["kind"] == "bridge"]
    recorded = next(e["t"] for e in events if e["kind"] == "trial" and e.get("fault") == "node-died")
    print(f"\ncable pulled in {pulled - pulling:.2f} s; last command {last_command - pulling:+.2f} s, watchdog hold "
          f"{holds[0]['t'] - last_command:.2f} s after it ({holds[0]['reasons'][0]}), trial recorded "
          f"{recorded - last_command:.2f} s after it: {trial['fault']}: {trial['fault_reason']}; "
          f"{len(backlog)} commands delivered after the replug, all refused as a backlog")
