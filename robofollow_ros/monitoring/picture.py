"""A picture of a recording at one moment: the three camera images and a top-down view of the 3-D scene.

What a user sees in the Foxglove layout, drawn without Foxglove (docs, reports, a quick look over SSH):
the last camera image of each camera up to the chosen time, and from above the table the scene
markers (objects, highlighted source and target, the checked region, EE points) with the robot's
links, placed by composing the recorded ``/tf_static`` and ``/tf`` as a TF buffer would.
Reads the file with ``mcap_ros2`` from the schemas stored in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, WORLD_FRAME
from robofollow_ros.monitoring import topics


@dataclass
class Moment:
    """The latest message of each topic at or before ``time_ns``, and the TF tree then."""

    time_ns: int
    start_ns: int
    images: dict[str, np.ndarray] = field(default_factory=dict)
    scene: Any = None
    parents: dict[str, tuple[str, np.ndarray, np.ndarray]] = field(default_factory=dict)  # child -> parent, p, q
    trial: str = ""


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


class PastTheEndError(ValueError):
    """``at_s`` lies after the recording's last message: the picture would show the end and say another time."""

    def __init__(self, at_s: float, length_s: float) -> None:
        super().__init__(f"{at_s:g} s is past the end of the recording ({length_s:.3f} s long)")
        self.at_s, self.length_s = at_s, length_s


def read_moment(path: Path, at_s: float | None = None) -> Moment:
    """Everything up to ``at_s`` seconds after the first message (None: the end of the recording);
    :class:`PastTheEndError` when ``at_s`` lies after the last message."""
    import cv2
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    wanted = {topics.camera_topic(c): c for c in CAMERA_NAMES}
    with Path(path).open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        stats = reader.get_summary()
        start = stats.statistics.message_start_time if stats and stats.statistics else 0
        end = None if at_s is None else start + int(at_s * 1e9)
        last = stats.statistics.message_end_time if stats and stats.statistics else None
        if end is not None and last is not None and end > last:
            raise PastTheEndError(float(at_s or 0.0), (last - start) / 1e9)
        moment = Moment(time_ns=start if end is None else end, start_ns=start)
        for _, channel, message, msg in reader.iter_decoded_messages(
                topics=[*wanted, topics.SCENE, topics.TF, topics.TF_STATIC, topics.TRIAL],
                end_time=None if end is None else end + 1):
            if channel.topic in wanted:
                bgr = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
                moment.images[wanted[channel.topic]] = bgr[:, :, ::-1]
            elif channel.topic == topics.SCENE:
                moment.scene = msg
            elif channel.topic == topics.TRIAL:
                moment.trial = str(msg.data)
            else:
                for t in msg.transforms:
                    tr, r = t.transform.translation, t.transform.rotation
                    moment.parents[t.child_frame_id] = (t.header.frame_id, np.array([tr.x, tr.y, tr.z]),
                                                        np.array([r.x, r.y, r.z, r.w]))
            if end is None:
                moment.time_ns = max(moment.time_ns, message.log_time)
    return moment


def world_positions(parents: Mapping[str, tuple[str, np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Each frame's position in ``world`` by composing the TF tree (frames not connected to world are left out)."""
    out: dict[str, np.ndarray] = {}

    def resolve(frame: str, depth: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        if frame == WORLD_FRAME:
            return np.zeros(3), np.eye(3)
        if frame not in parents or depth > 64:
            return None
        parent, p, q = parents[frame]
        up = resolve(parent, depth + 1)
        if up is None:
            return None
        return up[0] + up[1] @ p, up[1] @ _quat_matrix(q)

    for frame in parents:
        got = resolve(frame)
        if got is not None:
            out[frame] = got[0]
    return out


def render(moment: Moment, out: Path, title: str = "") -> Path:
    """Three camera images over a top-down view of the scene; written as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 8.2))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.45])
    for k, camera in enumerate(CAMERA_NAMES):
        ax = fig.add_subplot(grid[0, k])
        if camera in moment.images:
            ax.imshow(moment.images[camera])
        ax.set_title(f"{camera} camera", fontsize=10)
        ax.axis("off")
    ax = fig.add_subplot(grid[1, :])
    _top_down(ax, moment)
    seconds = (moment.time_ns - moment.start_ns) / 1e9
    fig.suptitle(f"{title or 'recording'} at t = {seconds:.2f} s", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _top_down(ax: Any, moment: Moment) -> None:
    from matplotlib.patches import Circle, Rectangle

    for marker in (moment.scene.markers if moment.scene is not None else []):
        if marker.action == 3:  # DELETEALL
            continue
        x, y = marker.pose.position.x, marker.pose.position.y
        c = marker.color
        colour = (c.r, c.g, c.b, max(c.a, 0.15))
        if marker.type == 1:  # CUBE
            ax.add_patch(Rectangle((x - marker.scale.x / 2, y - marker.scale.y / 2), marker.scale.x, marker.scale.y,
                                   color=colour, zorder=1 if marker.ns == "table" else 3))
        elif marker.type in (2, 3):  # SPHERE, CYLINDER
            ax.add_patch(Circle((x, y), marker.scale.x / 2, color=colour, zorder=3))
        elif marker.type == 4:  # LINE_STRIP
            ax.plot([p.x for p in marker.points], [p.y for p in marker.points], color=colour[:3], lw=1.5, zorder=4)
        elif marker.type == 9:  # TEXT_VIEW_FACING
            ax.text(x, y + 0.03, marker.text, color=colour[:3], fontsize=8, ha="center", zorder=5)
    links = world_positions(moment.parents)
    for arm, arm_colour in (("left", "#8e24aa"), ("right", "#00897b")):
        chain = [f"{arm}_base", *(f"{arm}_link{i}" for i in range(1, 7)), f"{arm}_tcp"]
        points = np.array([links[n] for n in chain if n in links])
        if len(points):
            ax.plot(points[:, 0], points[:, 1], "-o", color=arm_colour, lw=2.5, ms=3, zorder=6, label=f"{arm} arm")
    ax.set_aspect("equal")
    ax.set_xlim(-0.65, 0.65)
    ax.set_ylim(-0.45, 0.35)
    ax.set_xlabel("world x (m)")
    ax.set_ylabel("world y (m)")
    ax.set_title("scene from above (markers of /robofollow/scene, robot links from /tf)", fontsize=10)
    if links:
        ax.legend(loc="lower right", fontsize=8)
