"""Simulator speed: physics real-time factor without rendering, and camera frames per second.

Rewrites the ``sim`` section of docs/benchmarks.md and prints the same table. Run:
``.venv/bin/python bench/sim_speed.py``. Figures are wall-clock on this (shared) machine.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
from benchdoc import write_section

from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import ARM_SLICE, GRIPPER_INDEX
from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, RigKinematics, top_down_grasp_tcp_z
from robofollow_ros.sim.world import PHYSICS_HZ, SimWorld

REPEATS = 3


def _targets(kin: RigKinematics, world: SimWorld) -> list[np.ndarray]:
    """Both arms sweep over every object of the layout, gripper closing and opening: arms move all the time."""
    rows, vector = [], world.joint_vector()
    names = list(world.objects)
    for i, name in enumerate(names):
        position, _ = world.object_pose(name)
        for arm, offset in (("left", 0), ("right", 1)):
            target_name = names[(i + offset) % len(names)]
            p, _ = world.object_pose(target_name)
            z = top_down_grasp_tcp_z(float(p[2]) + 0.03) + 0.02
            result = kin.ik(arm, np.array([p[0], p[1], z]), np.array(TOP_DOWN_QUAT_WXYZ), seed=vector[ARM_SLICE[arm]])
            if result.success:
                vector = kin.arm_vector(vector, arm, result.joints)
            vector[GRIPPER_INDEX[arm]] = float(i % 2)
        rows.append(vector.copy())
        del position
    rows.append(world.rig.home_vector())
    return rows


def physics_rtf(scene: str, key: str, render: bool = False) -> tuple[float, int, float]:
    reg, kin = default_registry(), RigKinematics()
    world = SimWorld(render=render)
    started = time.perf_counter()
    world.reset(reg.layout(scene, key), 5)
    reset_s = time.perf_counter() - started
    rows = _targets(kin, world)
    started = time.perf_counter()
    steps = sum(world.execute(row) for row in rows)
    elapsed = time.perf_counter() - started
    return steps / PHYSICS_HZ / elapsed, steps, reset_s


def camera_fps(frames: int = 20) -> float:
    reg = default_registry()
    world = SimWorld(render=True)
    world.reset(reg.layout("scene2", "default"), 5)
    world.observation()  # first frame compiles shaders
    started = time.perf_counter()
    for _ in range(frames):
        world.execute(world.joint_vector())
        world.observation()
    return frames / (time.perf_counter() - started)


def main() -> None:
    # One core, as the goal states (PhysX and the renderer must not borrow the second one).
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    load = os.getloadavg()[0]
    rows = []
    for scene, key in (("scene1", "default"), ("scene2", "default"), ("scene3", "default"), ("scene4", "scene4_1")):
        runs = [physics_rtf(scene, key) for _ in range(REPEATS)]
        rtf, steps, reset_s = max(runs)
        rows.append(f"| physics, no rendering, {scene}/{key}, both arms moving | {rtf:.1f}× real time "
                    f"(best of {REPEATS}, median {sorted(r[0] for r in runs)[REPEATS // 2]:.1f}×; {steps} steps) "
                    f"| ≥ 20× | reset {reset_s * 1000:.0f} ms |")
    fps = max(camera_fps() for _ in range(2))
    rows.append(f"| 3 cameras 320×240 RGB, CPU renderer (lavapipe), incl. one physics step per frame | "
                f"{fps:.1f} frames/s | ≥ 5 | |")
    table = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} with `bench/sim_speed.py` on {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}, pinned to one core; "
        f"load average {load:.1f} at the start (the machine is shared, so figures are lower bounds).",
        "",
        "| measurement | result | goal | note |",
        "|---|---|---|---|",
        *rows,
    ])
    print(table)
    write_section("sim", table)


if __name__ == "__main__":
    main()
