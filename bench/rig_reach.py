"""Which evaluation tasks a rig's arms can reach: top-down IK at every source object's grasp, pre-grasp and lift
poses, for the task's arm, over rounds 1 and 10 of all 554 evaluation tasks (no physics, NumPy only).

    .venv/bin/python bench/rig_reach.py --rig aloha [--json out.json]

Prints one line per unreachable task with the reason (which pose, how far off) and the totals with a Wilson
interval; docs/rigs.md keeps the result beside the oracle's completion rate on the same rig.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, RigKinematics, top_down_grasp_tcp_z
from robofollow_ros.robot.rig_config import load_rig_config
from robofollow_ros.scoring.summary import wilson_interval

POSES = {"grasp": 0.0, "pre-grasp": 0.08, "lift": 0.10}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rig", default=None, help="rig name or YAML (default: the active rig)")
    parser.add_argument("--json", default=None, help="write the per-task verdicts here")
    args = parser.parse_args()
    kin = RigKinematics(load_rig_config(args.rig))
    registry = default_registry()
    tasks = list(registry.eval_tasks())
    verdicts: dict[str, str | None] = {}
    start = time.monotonic()
    for i, task in enumerate(tasks, 1):
        layout = registry.layout_of(task)
        spec = layout.object(task.source)
        reason = None
        for round_index in (1, 10):
            x, y = layout.jittered_xy(task.seed(round_index))[task.source]
            grasp_z = top_down_grasp_tcp_z(TABLE_TOP_Z + 2 * spec.half_height)
            for pose, dz in POSES.items():
                result = kin.ik(task.arm, np.array([x, y, grasp_z + dz]), np.array(TOP_DOWN_QUAT_WXYZ))
                if not result.success:
                    reason = (f"{task.arm} arm cannot reach the {pose} pose above {task.source} at ({x:.3f}, {y:.3f}) "
                              f"in round {round_index}: {result.position_error * 1000:.0f} mm, "
                              f"{math.degrees(result.rotation_error):.0f} deg off")
                    break
            if reason:
                break
        verdicts[task.task_id] = reason
        if i % 50 == 0 or i == len(tasks):
            print(f"  {i}/{len(tasks)} tasks checked ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    unreachable = {t: r for t, r in verdicts.items() if r}
    for task_id, reason in unreachable.items():
        print(f"unreachable  {task_id}: {reason}")
    n, k = len(verdicts), len(verdicts) - len(unreachable)
    low, high = wilson_interval(k, n)
    print(f"rig {kin.rig.name}: {k}/{n} evaluation tasks reachable ({100 * k / n:.1f} %, Wilson 95 % "
          f"[{100 * low:.1f}, {100 * high:.1f}])")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"rig": kin.rig.provenance(), "reachable": k, "tasks": n, "unreachable": unreachable}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
