"""What the rig operator must set up before a trial: the settled layout as a picture and a list.

The positions come from the simulator settling the very layout and seed the trial uses (physics
only, no renderer), drawn by the same top-down plot as ``robofollow sim snapshot``, so the operator
reproduces what the sim evaluation would start from.
"""

from __future__ import annotations

from pathlib import Path

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.sim.snapshot import plot_layout, yaw_of


def write_operator_layout(task: EvalTask, seed: int, out_dir: Path, trial_id: str) -> tuple[Path, list[str]]:
    """Write ``<trial_id>_layout.png`` in ``out_dir``; return its path and one line per object."""
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False)
    try:
        world.reset(task, seed)
        frame = world.scorer_frame()
    finally:
        world.close()
    assert world.layout is not None
    yaws = {name: yaw_of(q) for name, q in frame["object_quats"].items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = plot_layout(out_dir / f"{trial_id.replace('/', '_')}_layout.png", world.layout, frame["objects"], yaws,
                       {"left": frame["ee_left"], "right": frame["ee_right"]},
                       f"{task.task_id} (seed {seed}): set the table up like this")
    lines = []
    for spec in world.layout.objects:
        x, y, z = frame["objects"][spec.name]
        lines.append(f"{spec.name:>24s}: x {x:+.3f} y {y:+.3f} m, {z - TABLE_TOP_Z:.3f} m above the table, "
                     f"yaw {yaws[spec.name]:+.2f} rad ({spec.shape}, {spec.role})")
    return path, lines
