"""Boundary step ratio of a ROS run in real-time execution (issue 26's smoothness check).

``robofollow bringup sim --execution realtime`` records every trial's ``/robofollow/joint_command`` in
``<run>/mcap/<trial>.mcap`` (one command per control tick, holds included) and, in ``results.json``, the
ticks on which a new chunk arrived (``execution.chunk_ticks``) and on which the arm held
(``execution.hold_tick_list``; ``realtime.*`` in ROS runs written before the name was eval's).
The step of tick i is ``max |command[i] - command[i-1]|`` over the 12 arm
joints (rad; the grippers, 0..1 open fraction, close and open in one command by design and are left out);
a boundary step is that of a tick on which a chunk arrived, a within-chunk step that of any other tick
that sent a row after a row. The ratio is the largest boundary step over the largest within-chunk step
(the issue's goal: at most 1.5).

Usage: ``python tools/boundary_steps.py RUN_DIR`` (prints one line per trial and the run's ratio; ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

TOPIC = "/robofollow/joint_command"


def commands(mcap_path: Path) -> np.ndarray:
    """The trial's joint commands, in recorded order, as [n, 14] (contract joint order)."""
    from mcap.reader import make_reader
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    from robofollow_ros.nodes.conversions import joint_vector

    rows = []
    with mcap_path.open("rb") as f:
        for _schema, _channel, message in make_reader(f).iter_messages(topics=[TOPIC], log_time_order=True):
            rows.append(joint_vector(deserialize_message(message.data, JointState)))
    return np.asarray(rows, dtype=np.float64).reshape(-1, 14)


def step_ratio(sent: np.ndarray, chunk_ticks: list[int], hold_ticks: list[int]) -> dict[str, Any]:
    """Largest boundary and within-chunk steps of one trial's commands, and their ratio."""
    from robofollow_ros.contract import GRIPPER_INDEX

    arm = [j for j in range(sent.shape[1]) if j not in set(GRIPPER_INDEX.values())]
    steps = np.abs(np.diff(sent[:, arm], axis=0)).max(axis=1) if len(sent) > 1 else np.zeros(0)
    chunks, holds = set(chunk_ticks), set(hold_ticks)
    boundary = [float(steps[i - 1]) for i in range(1, len(sent)) if i in chunks]
    within = [float(steps[i - 1]) for i in range(1, len(sent))
              if i not in chunks and i not in holds and i - 1 not in holds]
    big_b, big_w = max(boundary, default=0.0), max(within, default=0.0)
    return {"commands": len(sent), "boundaries": len(boundary), "boundary_max_rad": big_b,
            "within_max_rad": big_w, "ratio": big_b / big_w if big_w > 0 else None}


def run_ratios(run_dir: Path) -> dict[str, Any]:
    from robofollow_ros.evaluation.execution_mode import trial_execution

    results = json.loads((run_dir / "results.json").read_text())
    trials = {}
    for result in results:
        realtime = trial_execution(result)
        if not realtime:
            continue
        trial_id = f"{result['task']}_r{result['round']}_s{result['seed']}"
        path = run_dir / "mcap" / f"{trial_id}.mcap"
        if not path.is_file():
            raise SystemExit(f"{path}: no recording for trial {trial_id}")
        trials[trial_id] = step_ratio(commands(path), realtime["chunk_ticks"], realtime["hold_tick_list"])
    boundary = max((t["boundary_max_rad"] for t in trials.values()), default=0.0)
    within = max((t["within_max_rad"] for t in trials.values()), default=0.0)
    return {"trials": trials, "boundary_max_rad": boundary, "within_max_rad": within,
            "ratio": boundary / within if within > 0 else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = run_ratios(args.run_dir)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for trial_id, t in out["trials"].items():
        print(f"{trial_id}: {t['commands']} commands, {t['boundaries']} chunk boundaries, largest step at a "
              f"boundary {t['boundary_max_rad']:.4f} rad, within a chunk {t['within_max_rad']:.4f} rad, "
              f"ratio {t['ratio'] if t['ratio'] is None else round(t['ratio'], 2)}")
    ratio = out["ratio"]
    print(f"run: ratio {ratio if ratio is None else round(ratio, 2)} (goal <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
