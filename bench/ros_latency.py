"""Camera-publish → joint-command latency of policy_node, and the CPU it costs (issue 7).

A stand-in camera driver in this process publishes three 320×240 rgb8 images and then a joint state,
all with one stamp, at 30 Hz; policy_node runs in its own process (as on the rig) with ``hold``
(one row per call, lock-step: one command per new state). The command carries the stamp of the
state it was computed from, so latency = command received − first image of that stamp published,
over real DDS. The policy's own time (``hold``) is measured apart and subtracted. CPU = the policy
node process's user+system time over the measured window. No rendering: this is the bridge itself.

Usage: .venv/bin/python bench/ros_latency.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from benchdoc import write_section

ROOT = Path(__file__).resolve().parents[1]
RATE_HZ = 30.0
WARMUP_FRAMES = 30


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def policy_own_ms(samples: int = 2000) -> float:
    """Median time of ``hold``'s predict on one such observation (what the goal excludes)."""
    from robofollow_ros.policy.spec import load_policy

    policy = load_policy("hold", {"chunk_size": 1})
    rgb = np.zeros((240, 320, 3), dtype=np.uint8)
    obs = {"observation": {k: {"rgb": rgb} for k in ("head_camera", "left_camera", "right_camera")},
           "joint_action": {"vector": np.zeros(14)}, "instruction": "x"}
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        policy.predict(obs)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return float(np.median(times))


def relay_main() -> None:
    """The floor: a bare rclpy node that subscribes to the same images and answers every joint state
    with a command at once (no policy node, no observation building). Run as a subprocess."""
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState

    from robofollow_ros.contract import CAMERA_NAMES, camera_image_topic
    from robofollow_ros.nodes import trial_protocol as tp

    rclpy.init()
    node = Node("bench_bare_relay")
    latest: dict[str, Image] = {}
    command = node.create_publisher(JointState, "/robofollow/joint_command", tp.STATE_STREAM)
    for camera in CAMERA_NAMES:
        node.create_subscription(Image, camera_image_topic(camera), lambda m, c=camera: latest.__setitem__(c, m), 5)
    node.create_subscription(JointState, "/joint_states", command.publish, tp.STATE_STREAM)
    with contextlib.suppress(KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        rclpy.spin(node)


def measure(seconds: float, relay: bool = False) -> dict[str, float]:
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String

    from robofollow_ros.contract import CAMERA_NAMES, camera_image_topic
    from robofollow_ros.nodes import trial_protocol as tp
    from robofollow_ros.nodes.conversions import image_msg, joint_state_msg, stamp_ns

    frames = int(seconds * RATE_HZ) + WARMUP_FRAMES
    env = dict(os.environ, ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", str(150 + os.getpid() % 50)))
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    command = [sys.executable, __file__, "--relay-node"] if relay else [
        sys.executable, "-m", "robofollow_ros.nodes.policy_node", "--ros-args", "-p", "policy:=hold",
        "-p", """policy_kwargs:='{"chunk_size": 1}'""", "-p", "mode:=lockstep", "-p", "privileged:=false"]
    node_proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rclpy.init()
    node = Node("bench_camera_driver")
    published: dict[int, int] = {}
    received: dict[int, int] = {}
    done = threading.Event()
    images = {c: node.create_publisher(Image, camera_image_topic(c), 5) for c in CAMERA_NAMES}
    joints = node.create_publisher(JointState, "/joint_states", tp.STATE_STREAM)
    trial = node.create_publisher(String, "/robofollow/trial", tp.LATCHED)

    def on_command(msg: JointState) -> None:
        received.setdefault(stamp_ns(msg.header.stamp), time.time_ns())
        if len(received) >= frames - 2:
            done.set()

    node.create_subscription(JointState, "/robofollow/joint_command", on_command, tp.STATE_STREAM)
    pixels = [np.random.default_rng(i).integers(0, 255, (240, 320, 3), dtype=np.uint8) for i in range(3)]
    counter = [0]

    def tick() -> None:
        counter[0] += 1
        ns = counter[0] * 33_333_333
        published[ns] = time.time_ns()
        for camera, rgb in zip(CAMERA_NAMES, pixels, strict=True):
            images[camera].publish(image_msg(rgb, ns, f"{camera}_camera_optical"))
        joints.publish(joint_state_msg(np.zeros(14), ns))

    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while node.count_subscribers("/joint_states") < 1 or node.count_publishers("/robofollow/joint_command") < 1:
            if node_proc.poll() is not None:
                raise RuntimeError(f"policy_node exited with {node_proc.returncode} before it came up")
            executor.spin_once(timeout_sec=0.1)
        trial.publish(String(data=tp.encode({"id": "bench", "phase": "running", "task": "L0_pickup_red_cylinder",
                                             "instruction": "hold", "max_steps": frames * 2, "actions_per_step": 1,
                                             "start_stamp_ns": 0})))
        timer = node.create_timer(1.0 / RATE_HZ, tick)
        cpu_start: float | None = None
        wall_start = 0.0
        deadline = time.monotonic() + seconds + 30
        while not done.is_set() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            if cpu_start is None and counter[0] >= WARMUP_FRAMES:
                cpu_start, wall_start = cpu_seconds(node_proc.pid), time.monotonic()
        cpu_used = cpu_seconds(node_proc.pid) - (cpu_start or 0.0)
        wall = time.monotonic() - wall_start
        timer.cancel()
    finally:
        node.destroy_node()
        rclpy.shutdown()
        node_proc.terminate()
        node_proc.wait(timeout=10)
    warm = sorted(s for s in received if s > WARMUP_FRAMES * 33_333_333)
    latency = np.array([(received[s] - published[s]) / 1e6 for s in warm if s in published])
    return {"frames": float(len(latency)), "median_ms": float(np.median(latency)),
            "p99_ms": float(np.percentile(latency, 99)), "max_ms": float(latency.max()),
            "answered": len(warm) / max(1, counter[0] - WARMUP_FRAMES), "cores": cpu_used / wall}


def _median_of(runs: list[dict[str, float]], key: str) -> float:
    return float(np.median([r[key] for r in runs]))


def _spread(runs: list[dict[str, float]], key: str) -> str:
    values = sorted(r[key] for r in runs)
    return f"{values[0]:.1f}–{values[-1]:.1f}"


def render(node: list[dict[str, float]], floor: list[dict[str, float]], own_ms: float, seconds: float,
           load: float) -> str:
    p99 = _median_of(node, "p99_ms")
    p99_beyond = p99 - own_ms
    cores = _median_of(node, "cores")
    frames = int(sum(r["frames"] for r in node))
    rows = [
        f"| measurement (median of {len(node)} runs; range in brackets) | policy_node | bare relay (floor) | goal |",
        "|---|---:|---:|---|",
        f"| camera publish → joint command, median | {_median_of(node, 'median_ms'):.2f} ms "
        f"({_spread(node, 'median_ms')}) | {_median_of(floor, 'median_ms'):.2f} ms ({_spread(floor, 'median_ms')}) | |",
        f"| camera publish → joint command, p99 | {p99:.2f} ms ({_spread(node, 'p99_ms')}) | "
        f"{_median_of(floor, 'p99_ms'):.2f} ms ({_spread(floor, 'p99_ms')}) | |",
        f"| p99 beyond the policy's own time ({own_ms * 1000:.0f} µs for `hold`) | {p99_beyond:.2f} ms | | "
        f"≤ 10 ms: {'met' if p99_beyond <= 10 else 'NOT met'} |",
        f"| CPU of the receiving process at 30 Hz, three 320×240 cameras | {cores:.2f} cores | "
        f"{_median_of(floor, 'cores'):.2f} cores | < 0.5: {'met' if cores < 0.5 else 'NOT met'} |",
        f"| states answered with a command | {100 * min(r['answered'] for r in node):.0f} % of {frames} | | |",
    ]
    head = (f"`bench/ros_latency.py --seconds {seconds:g} --runs {len(node)}` — policy_node (`hold`, lock-step) in "
            f"its own process, camera stand-in at 30 Hz in the bench process, Fast DDS over loopback; Python "
            f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}; load average {load:.1f} on "
            f"{os.cpu_count()} cores (a shared machine: stalls of other work land in the p99). The floor column is the "
            f"same measurement with a bare rclpy relay in place of policy_node (no observation, no policy): what "
            f"Python + DDS + this machine cost by themselves; runs alternate between the two.")
    return head + "\n\n" + "\n".join(rows)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per run (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (policy_node, relay), alternating")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--relay-node", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay_node:
        relay_main()
        return
    own = policy_own_ms()
    load = os.getloadavg()[0]
    node, floor = [], []
    for _ in range(args.runs):
        node.append(measure(args.seconds))
        floor.append(measure(args.seconds, relay=True))
    table = render(node, floor, own, args.seconds, load)
    print(table)
    if not args.no_write:
        write_section("ros", table)


if __name__ == "__main__":
    main()
