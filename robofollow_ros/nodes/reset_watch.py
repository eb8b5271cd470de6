"""The trial manager's eyes on the table before a trial: perceived objects against the layout (``rig.reset_check``).

It reads ``/robofollow/objects`` (perception on the rig, the mock's or the sim's ground truth) and, when
perception publishes it, ``/robofollow/perception/status``'s ``unexplained`` blobs (things on the table
that match no object), as they are: a pose counts as seen only at the confidence the publisher gives it
(the marker's ``text`` JSON ``{"confidence", "visible"}``; a publisher without it is ground truth).
Only messages received after :meth:`ResetWatch.begin` count, so the last trial's table never verifies
this one's.

What the operator sees live, on ``/robofollow/reset_check`` (``visualization_msgs/MarkerArray``, latched;
Foxglove's 3D panel): each object's place as a translucent ghost — green when the object is there,
red when it is not — an arrow from where the object is to where it must go, and a label naming it
and what to do (``MOVE red_bar_2: 3.2 cm off; move it 3.0 cm right (+x) ...``); extra things as red
spheres labelled ``REMOVE``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from robofollow_ros.benchmark.records import Layout, ObjectSpec
from robofollow_ros.contract import TOPIC_OBJECTS, WORLD_FRAME
from robofollow_ros.monitoring.topics import RESET_CHECK
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import stamp_ns, time_msg
from robofollow_ros.rig.layout_poses import RestPose
from robofollow_ros.rig.reset_check import MISPLACED, OK, ResetReport, Seen, check_reset, expected_poses

#: The reset check's live view (MarkerArray, latched).
TOPIC_RESET_CHECK = RESET_CHECK
#: perception_node's status (``unexplained``: things seen that match no object of the layout).
TOPIC_PERCEPTION_STATUS = "/robofollow/perception/status"
GOOD = (0.1, 0.8, 0.2)
BAD = (0.95, 0.1, 0.1)


class ResetWatch:
    def __init__(self, node: Node, tolerance_m: float, yaw_tolerance_deg: float, yaw_shapes: list[str],
                 min_confidence: float) -> None:
        self._node = node
        self.tolerance_m, self.yaw_tolerance_deg = tolerance_m, yaw_tolerance_deg
        self.yaw_shapes, self.min_confidence = tuple(yaw_shapes), min_confidence
        self._lock = threading.Lock()
        self._layout: Layout | None = None
        self._expected: dict[str, RestPose] = {}
        self._seen: dict[str, Seen] | None = None
        self._seen_ns = 0
        #: The stamp of the objects message the last :meth:`check` compared (0: none): in the sim, the state
        #: the trial starts from when the table changed after the reset (``sim_node``'s ``displace_object``).
        self.checked_stamp_ns = 0
        self._blobs: list[tuple[str, list[float] | None]] = []
        #: perception's ``doubts``: per name, why it refused that name to what it saw (a look-alike).
        self._doubts: dict[str, str] = {}
        # The newest table only (each message holds every object): a deep queue read by a busy node would
        # compare the layout with a table seconds old.
        node.create_subscription(MarkerArray, TOPIC_OBJECTS, self._on_objects,
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
        node.create_subscription(String, TOPIC_PERCEPTION_STATUS, self._on_perception, 10)
        self.view = node.create_publisher(MarkerArray, TOPIC_RESET_CHECK, tp.LATCHED_STATE)

    def begin(self, layout: Layout, seed: int) -> None:
        """A new trial: forget what was seen; expect ``layout`` at ``seed``'s resting poses."""
        with self._lock:
            self._layout, self._expected = layout, expected_poses(layout, seed)
            self._seen, self._blobs, self._seen_ns, self.checked_stamp_ns = None, [], 0, 0
            self._doubts = {}

    def check(self) -> ResetReport | None:
        """The table against the layout, from what was seen since :meth:`begin` (None: nothing seen yet)."""
        with self._lock:
            if self._layout is None or self._seen is None:
                return None
            self.checked_stamp_ns = self._seen_ns
            return check_reset(self._layout, self._expected, self._seen, self.tolerance_m, self.yaw_tolerance_deg,
                               self.yaw_shapes, self.min_confidence, list(self._blobs), dict(self._doubts))

    def show(self, report: ResetReport | None, stamp_ns: int) -> None:
        """Publish the live view of ``report`` (None: clear it)."""
        markers = [_marker(stamp_ns, "", 0, Marker.CUBE, action=Marker.DELETEALL)]
        if report is not None and self._layout is not None:
            for check in report.objects:
                spec = self._layout.object(check.name)
                ns = f"reset/{check.name}"
                colour = GOOD if check.status == OK else BAD
                markers.append(_ghost(stamp_ns, ns, spec, self._expected[check.name], (*colour, 0.35)))
                x, y, z = check.expected
                label = f"{check.name} in place" if check.status == OK else f"MOVE {check.line()}"
                markers.append(_marker(stamp_ns, ns, 1, Marker.TEXT_VIEW_FACING, xyz=(x, y, z + 0.08),
                                       scale=(0.0, 0.0, 0.02), rgba=(*colour, 1.0), text=label))
                if check.status == MISPLACED and check.seen is not None:
                    markers.append(_marker(stamp_ns, ns, 2, Marker.ARROW, scale=(0.006, 0.012, 0.012),
                                           rgba=(*BAD, 1.0), points=[check.seen, check.expected]))
            for i, extra in enumerate(report.extra):
                if extra.position is None:
                    continue
                ns = f"reset/extra/{i}"
                markers.append(_marker(stamp_ns, ns, 0, Marker.SPHERE, xyz=extra.position, scale=(0.05, 0.05, 0.05),
                                       rgba=(*BAD, 0.6)))
                markers.append(_marker(stamp_ns, ns, 1, Marker.TEXT_VIEW_FACING,
                                       xyz=(extra.position[0], extra.position[1], extra.position[2] + 0.08),
                                       scale=(0.0, 0.0, 0.02), rgba=(*BAD, 1.0), text=f"REMOVE {extra.line()}"))
        self.view.publish(MarkerArray(markers=markers))

    # -- inputs ----------------------------------------------------------------------------------
    def _on_objects(self, msg: MarkerArray) -> None:
        seen: dict[str, Seen] = {}
        stamp = max((stamp_ns(m.header.stamp) for m in msg.markers), default=0)
        for m in msg.markers:
            if m.action != Marker.ADD or not m.ns or m.header.frame_id not in ("", WORLD_FRAME):
                continue
            confidence, visible = 1.0, True
            if m.text:
                try:
                    info = json.loads(m.text)
                except json.JSONDecodeError:
                    info = {}
                if isinstance(info, dict):
                    confidence = float(info.get("confidence", 1.0))
                    visible = bool(info.get("visible", True))
            p, q = m.pose.position, m.pose.orientation
            seen[m.ns] = Seen((p.x, p.y, p.z), (q.w, q.x, q.y, q.z), confidence, visible)
        with self._lock:
            if self._layout is not None:
                self._seen, self._seen_ns = seen, stamp

    def _on_perception(self, msg: String) -> None:
        status = tp.decode_or_log(msg.data, TOPIC_PERCEPTION_STATUS, self._node.get_logger())
        blobs = status.get("unexplained") if status is not None else None
        if not isinstance(blobs, list):
            return
        doubts = status.get("doubts") if status is not None else None
        with self._lock:
            if self._layout is not None:
                self._blobs = [(str(b.get("colour", "?")), b.get("position")) for b in blobs if isinstance(b, dict)]
                self._doubts = ({str(k): str(v) for k, v in doubts.items()} if isinstance(doubts, dict) else {})


def _marker(stamp_ns: int, ns: str, marker_id: int, kind: int, *, action: int = Marker.ADD,
            xyz: Any = (0.0, 0.0, 0.0), scale: Any = (1.0, 1.0, 1.0), rgba: Any = (1.0, 1.0, 1.0, 1.0),
            points: Any = (), text: str = "", quat_wxyz: Any = (1.0, 0.0, 0.0, 0.0)) -> Marker:
    from geometry_msgs.msg import Point

    m = Marker(ns=ns, id=marker_id, type=kind, action=action, text=text)
    m.header.stamp = time_msg(stamp_ns)
    m.header.frame_id = WORLD_FRAME
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in xyz)
    m.pose.orientation.w, m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z = (
        float(v) for v in quat_wxyz)
    m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
    m.color.r, m.color.g, m.color.b, m.color.a = (float(v) for v in rgba)
    m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]
    return m


def _ghost(stamp_ns: int, ns: str, spec: ObjectSpec, pose: RestPose, rgba: Any) -> Marker:
    """Where the object must go, in its shape and size (as ``monitoring.scene`` draws objects)."""
    xyz = tuple(float(v) for v in pose.position)
    if spec.shape == "sphere":
        d = 2 * spec.size[0]
        return _marker(stamp_ns, ns, 0, Marker.SPHERE, xyz=xyz, scale=(d, d, d), rgba=rgba)
    if spec.shape in ("cube", "box"):
        half = [spec.size[0]] * 3 if spec.shape == "cube" else list(spec.size[:3])
        return _marker(stamp_ns, ns, 0, Marker.CUBE, xyz=xyz, quat_wxyz=pose.quat_wxyz,
                       scale=[2 * h for h in half], rgba=rgba)
    if spec.shape == "cylinder":
        d, h = 2 * spec.size[0], 2 * spec.size[1]
        return _marker(stamp_ns, ns, 0, Marker.CYLINDER, xyz=xyz, scale=(d, d, h), rgba=rgba)
    d, h = 0.12 * spec.scale, 0.05 * spec.scale  # bowl, as monitoring.scene draws it
    return _marker(stamp_ns, ns, 0, Marker.CYLINDER, xyz=(xyz[0], xyz[1], xyz[2] - 0.02 + h / 2), scale=(d, d, h),
                   rgba=rgba)
