"""A labelled top-down picture of a layout: what the operator sets up on the rig, or where physics put it.

The rig's trial manager draws it from the layout's resting poses (``rig.layout_poses``) so the
operator can reproduce the table the simulator starts from; ``robofollow sim snapshot`` draws the
same picture from the settled physics state. The dashed box is the scorer's operation area.
"""

from __future__ import annotations

import math
from pathlib import Path

from robofollow_ros.benchmark.records import Layout
from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.robot.bowl import BowlGeometry
from robofollow_ros.scoring.thresholds import OPERATION_AREA_X, OPERATION_AREA_Y


def plot_layout(path: Path, layout: Layout, positions: dict[str, list[float]], yaws: dict[str, float],
                ee: dict[str, list[float]], title: str) -> Path:
    """Top-down picture (world x right, y up = away from the robot) with every object named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Polygon, Rectangle

    fig, ax = plt.subplots(figsize=(7.0, 5.2), dpi=100)
    (x0, x1), (y0, y1) = OPERATION_AREA_X, OPERATION_AREA_Y
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, linestyle="--", edgecolor="grey",
                           label="operation area"))
    placed: list[tuple[float, float]] = []
    for spec in layout.objects:
        x, y, z = positions[spec.name]
        crowd = sum(1 for px, py in placed if math.hypot(px - x, py - y) < 0.035)  # stacked / in-bowl neighbours
        placed.append((x, y))
        colour = tuple(float(c) for c in spec.color_rgb)
        if spec.shape == "bowl":
            ax.add_patch(Circle((x, y), BowlGeometry(spec.scale).outer_radius, fill=False, edgecolor=colour, lw=3))
        elif spec.shape in ("sphere", "cylinder"):
            ax.add_patch(Circle((x, y), spec.size[0], color=colour, alpha=0.85))
        else:
            hx, hy = (spec.size[0], spec.size[0]) if spec.shape == "cube" else (spec.size[0], spec.size[1])
            c, s = math.cos(yaws[spec.name]), math.sin(yaws[spec.name])
            corners = [(x + c * dx - s * dy, y + s * dx + c * dy) for dx, dy in ((-hx, -hy), (hx, -hy), (hx, hy),
                                                                                (-hx, hy))]
            ax.add_patch(Polygon(corners, color=colour, alpha=0.85 if spec.role == "object" else 0.45))
        lifted = f" (z+{z - TABLE_TOP_Z:.3f})" if z - TABLE_TOP_Z > 0.06 else ""
        ax.annotate(spec.name + lifted, (x, y), xytext=(0, 12 + 10 * crowd), textcoords="offset points",
                    ha="center", fontsize=7)
    for arm, point in ee.items():
        ax.plot(point[0], point[1], marker="x", color="black")
        ax.annotate(f"{arm} TCP", (point[0], point[1]), xytext=(0, -12), textcoords="offset points",
                    ha="center", fontsize=7)
    ax.set_xlim(-0.36, 0.36)
    ax.set_ylim(-0.34, 0.18)
    ax.set_aspect("equal")
    ax.set_xlabel("world x (m, robot's right)")
    ax.set_ylabel("world y (m, away from robot)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
