"""Is the graph connected: does every awaited node see every other one, not only the trial manager?

DDS discovers participants pair by pair. Under load one pair can take seconds (a participant that
starts late learns of an earlier one only at that one's next periodic announcement), so the trial
manager seeing every node proves nothing about the pairs between them: measured with one process
per node, the recorder (foxglove_node) saw the sim, the arm bridge and the trial manager but not the
policy, the robot state publisher or the stage monitor for a whole two-trial run, and recorded no
joint command, link TF or scored frame. So each node of the package says, on a latched topic, when
it sees every node the trial manager awaits (the trial manager names them in its ``idle`` state),
and the trial manager begins the first trial only once every awaited node of the package has said
so; nodes from elsewhere (a test's watcher, a rig's own driver) are only seen, as before.

Once the run is under way the trial manager must also learn when one of them dies. DDS drops a
killed participant from the graph only when its lease runs out (20 s with Fast DDS), so each node of
the package also holds a publisher on ``/robofollow/graph/alive/<node>`` whose liveliness the
middleware asserts for it (AUTOMATIC, lease :data:`ALIVE_LEASE_S`): the trial manager's
:class:`AliveWatch` hears within that lease that a node was killed, crashed or froze (its liveliness
lapsed) or left the graph (its publisher went away), and which one. Nodes in the watcher's own process
are not watched: Fast DDS does not assert a participant's liveliness to itself (measured: a writer of
the same participant lapses after one lease although alive), and they cannot die without it anyway;
each alive topic carries its writer's host and pid (latched) to tell them apart.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from robofollow_ros.contract import TOPIC_TRIAL
from robofollow_ros.evaluation.progress import QUIET_S
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS
from robofollow_ros.nodes.rclpy_compat import QoSLivelinessChangedInfo, SubscriptionEventCallbacks
from robofollow_ros.nodes.trial_records import graph_ready

TOPIC_PEERS = "/robofollow/graph/peers"
#: How often a node looks at the graph until it sees every awaited node (steady clock).
CHECK_PERIOD_S = 0.1
#: A node whose middleware has not asserted its liveliness for this long is taken for dead (seconds).
#: Long enough for a loaded machine's DDS threads, short against any trial.
ALIVE_LEASE_S = 3.0
ALIVE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                       history=HistoryPolicy.KEEP_LAST, liveliness=LivelinessPolicy.AUTOMATIC,
                       liveliness_lease_duration=Duration(seconds=ALIVE_LEASE_S))


def alive_topic(node_name: str) -> str:
    return f"/robofollow/graph/alive/{node_name}"


class PeerReport:
    """Part of every node of the package: ``{"node", "sees"}`` on ``/robofollow/graph/peers`` once it
    sees every node in the trial manager's ``awaiting`` list."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._awaiting: list[str] | None = None
        self._publisher = node.create_publisher(String, TOPIC_PEERS, tp.LATCHED_STATE)
        self._alive = node.create_publisher(String, alive_topic(node.get_name()), ALIVE_QOS)
        self._alive.publish(String(data=tp.encode(_here(node.get_name()))))
        node.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)
        self._timer: Any = node.create_timer(CHECK_PERIOD_S, self._check,
                                             clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_trial(self, msg: String) -> None:
        trial = tp.decode_or_log(msg.data, TOPIC_TRIAL, self._node.get_logger())
        awaiting = (trial or {}).get("awaiting")
        if isinstance(awaiting, list) and self._awaiting is None:
            self._awaiting = [str(name) for name in awaiting]

    def _check(self) -> None:
        if self._awaiting is None or self._timer is None:
            return
        if set(self._awaiting) - {self._node.get_name()} <= set(self._node.get_node_names()):
            self._publisher.publish(String(data=tp.encode({"node": self._node.get_name(),
                                                           "sees": sorted(self._awaiting)})))
            self._node.destroy_timer(self._timer)
            self._timer = None


class PeerReports:
    """The trial manager's side: which awaited nodes of the package see all the others."""

    def __init__(self, node: Node, awaiting: list[str]) -> None:
        self._awaiting = set(awaiting)
        self._sees: dict[str, set[str]] = {}
        self._logger = node.get_logger()
        node.create_subscription(String, TOPIC_PEERS, self._on_report, tp.LATCHED)

    def _on_report(self, msg: String) -> None:
        report = tp.decode_or_log(msg.data, TOPIC_PEERS, self._logger)
        if report is not None and isinstance(report.get("sees"), list):
            self._sees[str(report.get("node"))] = {str(name) for name in report["sees"]}

    def missing(self) -> list[str]:
        """Awaited nodes of the package that have not yet reported seeing every awaited node."""
        return sorted(name for name in self._awaiting & set(NODE_ENTRY_POINTS)
                      if not self._awaiting <= self._sees.get(name, set()))


class GraphWait:
    """The trial manager's wait for a connected graph before the first trial: bounded, and explained.

    Every awaited node must be seen with its trial input discovered (``trial_records.graph_ready``)
    and each awaited node of the package must report seeing the others (:class:`PeerReports`). A node
    that never comes (it crashed at start, a profile awaits a node it does not run, a rig driver is
    not started) must not leave the operator looking at a silent graph: the missing names are logged
    every :data:`~robofollow_ros.evaluation.progress.QUIET_S`, and after ``timeout_s`` (0: no limit) the run is
    given up with one line naming them.
    """

    def __init__(self, node: Node, awaiting: list[str], timeout_s: float) -> None:
        self._node = node
        self._awaiting = list(awaiting)
        self._timeout_s = timeout_s
        self._reports = PeerReports(node, awaiting)
        self._since: float | None = None
        self._next_log = 0.0

    def ready(self) -> bool:
        return graph_ready(self._node, self._awaiting) and not self._reports.missing()

    def missing(self) -> list[str]:
        """What the wait is for, in words: unseen nodes first, then nodes that do not see the others yet."""
        names = set(self._node.get_node_names())
        unseen = [n for n in self._awaiting if n not in names]
        return unseen or [f"{n} (does not see every awaited node yet)" for n in self._reports.missing()] \
            or ["the awaited nodes' trial subscriptions (not discovered yet)"]

    def overdue(self) -> str | None:
        """Call while waiting for the first trial: logs progress; the reason to give up once past the limit."""
        if self.ready():
            return None
        now = time.monotonic()
        if self._since is None:  # counted from the first wait for a start, not from a paused idle
            self._since = now
        waited = now - self._since
        if self._timeout_s and waited > self._timeout_s:
            return (f"the graph is incomplete after {self._timeout_s:g} s; waiting for: {', '.join(self.missing())} "
                    f"(wait_for_nodes of {self._node.get_name()})")
        if waited >= self._next_log:
            self._next_log = waited + QUIET_S
            if waited >= QUIET_S:
                missing = self.missing()
                why = "; a rendering sim_node takes its first picture before it joins: up to a minute on a CPU" \
                    if any(m.startswith("sim_node") for m in missing) else ""
                self._node.get_logger().info(f"waiting for {', '.join(missing)} ({waited:.0f} s so far{why})")
        return None


class AliveWatch:
    """The trial manager's side of ``/robofollow/graph/alive/<node>``: ``on_lost(node, how)`` once per node
    that was alive and then lapsed (killed, crashed, frozen) or left the graph."""

    def __init__(self, node: Node, names: list[str], on_lost: Callable[[str, str], None]) -> None:
        self._on_lost = on_lost
        self._logger = node.get_logger()
        self._alive: set[str] = set()
        self._lost: set[str] = set()
        self._local: set[str] = set()  # in this process: not watched (see the module docstring)
        for name in sorted(set(names) & set(NODE_ENTRY_POINTS) - {node.get_name()}):
            node.create_subscription(String, alive_topic(name), self._whereabouts(name), ALIVE_QOS,
                                     event_callbacks=SubscriptionEventCallbacks(liveliness=self._listener(name)))

    def _whereabouts(self, name: str) -> Callable[[String], None]:
        def seen(msg: String) -> None:
            where = tp.decode_or_log(msg.data, alive_topic(name), self._logger) or {}
            if where.get("host") == _here(name)["host"] and where.get("pid") == os.getpid():
                self._local.add(name)

        return seen

    def _listener(self, name: str) -> Callable[[QoSLivelinessChangedInfo], None]:
        return lambda info: self._changed(name, info)

    def _changed(self, name: str, info: QoSLivelinessChangedInfo) -> None:
        if info.alive_count_change > 0:
            self._alive.add(name)
        if name not in self._alive or name in self._lost or name in self._local:
            return
        if info.not_alive_count_change > 0:
            how = f"stopped answering (no sign of life for {ALIVE_LEASE_S:g} s: killed, crashed or frozen)"
        elif info.alive_count_change < 0:
            how = "left the graph (its process ended)"
        else:
            return
        self._lost.add(name)
        self._on_lost(name, how)


def _here(node_name: str) -> dict[str, object]:
    """What a node's alive topic says: where it runs."""
    return {"node": node_name, "host": socket.gethostname(), "pid": os.getpid()}
