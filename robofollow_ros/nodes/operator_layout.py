"""What the rig operator must set up before a trial: the layout as a picture and a list.

The positions are the layout's resting poses for the trial's seed (``rig.layout_poses``: the same
jitter the simulator spawns at, every object at rest), drawn by the same top-down plot as
``robofollow sim snapshot``, so the operator reproduces what the sim evaluation starts from. No
simulator and no renderer: this runs on the rig.
"""

from __future__ import annotations

from pathlib import Path

from robofollow_ros.benchmark import EvalTask, Registry, default_registry
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.rig.layout_picture import plot_layout
from robofollow_ros.rig.layout_poses import layout_rest_poses


def write_operator_layout(task: EvalTask, seed: int, out_dir: Path, trial_id: str,
                          registry: Registry | None = None) -> tuple[Path, list[str]]:
    """Write ``<trial_id>_layout.png`` in ``out_dir``; return its path and one line per object."""
    from robofollow_ros.robot.kinematics import RigKinematics

    layout = (registry or default_registry()).layout_of(task)
    poses = layout_rest_poses(layout, seed)
    kinematics = RigKinematics()
    ee = kinematics.ee_points(kinematics.home_vector(), task.scene)
    out_dir.mkdir(parents=True, exist_ok=True)
    positions = {name: [float(v) for v in pose.position] for name, pose in poses.items()}
    yaws = {name: pose.yaw for name, pose in poses.items()}
    path = plot_layout(out_dir / f"{trial_id.replace('/', '_')}_layout.png", layout, positions, yaws,
                       {arm: [float(v) for v in point] for arm, point in ee.items()},
                       f"{task.task_id} (seed {seed}): set the table up like this")
    lines = []
    for spec in layout.objects:
        x, y, z = positions[spec.name]
        lines.append(f"{spec.name:>24s}: x {x:+.3f} y {y:+.3f} m, {z - TABLE_TOP_Z:.3f} m above the table, "
                     f"yaw {yaws[spec.name]:+.2f} rad ({spec.shape}, {spec.role})")
    return path, lines
