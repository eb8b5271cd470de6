"""stage_monitor_node: the core ``StageMonitor`` fed from ROS, live on ``/robofollow/score``.

A frame is built from ``/joint_states`` (EE points by forward kinematics, ``RigKinematics.ee_points``;
grippers from the vector) and the object poses — ground-truth TF from the sim, or
``/robofollow/objects`` from perception on the rig (``object_source``); a pose published below
``perception.confidence.MIN_POSE_CONFIDENCE`` is ignored (the object keeps its last confident one), and the
frame is marked ``doubtful`` for it: the monitor holds its verdict on that frame instead of deciding on a
doubtful pose, and the trial's result lists the held frames (``doubt_held``).
With ``frame_sync: stamp`` (sim) a frame is scored for every state stamp of the trial, in stamp
order, once both the joints and the objects of that stamp arrived: exactly one frame per executed
row plus frame 0, as the headless episode records. With ``latest`` (rig) every joint state makes a frame with the newest
objects. The last message of a trial says ``"final": true`` and carries the full results entry.
In the sim, the live score of frame 0 is the trial manager's cue to let the rows run (phase
``starting`` → ``running``): a scorer that missed the start state would wait for it forever.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from robofollow_ros.contract import (
    GRIPPER_INDEX,
    TOPIC_FRAME,
    TOPIC_JOINT_STATES,
    TOPIC_OBJECTS,
    TOPIC_SCORE,
    TOPIC_TRIAL,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet, one_of
from robofollow_ros.nodes.conversions import (
    MessageError,
    joint_vector,
    objects_from_markers,
    objects_from_transforms,
    stamp_ns,
)
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.perception.confidence import PoseGate

#: States kept while waiting for their partner message or for the trial to start.
BUFFER_LIMIT = 4096

Poses = tuple[dict[str, list[float]], dict[str, list[float]]]
#: Phases of a trial being scored. From ``starting`` on: the trial manager waits for frame 0's live
#: score before ``running``, so the scorer holds the start state before any row executes.
SCORED_PHASES = (tp.PHASE_STARTING, tp.PHASE_RUNNING, tp.PHASE_STOPPING, tp.PHASE_SCORING)


class StageMonitorNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("stage_monitor_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        self.object_source = params.declare(
            "object_source", "tf", "object poses from ground-truth TF (tf, sim) or /robofollow/objects (objects)",
            one_of("tf", "objects"))
        self.frame_sync = params.declare(
            "frame_sync", "stamp", "stamp: one frame per state stamp (sim lock-step); latest: per joint state (rig)",
            one_of("stamp", "latest"))

        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.kinematics import RigKinematics

        self.registry = default_registry()
        self.kinematics = RigKinematics()
        self._joints: dict[int, np.ndarray] = {}
        self._objects: dict[int, Poses] = {}
        self._latest_objects: Poses | None = None
        self._latest_objects_ns = -1
        #: Per object stamp (and the newest): the objects perception published below the confidence threshold.
        self._doubtful: dict[int, frozenset[str]] = {}
        self._latest_doubtful: frozenset[str] = frozenset()
        self._monitor: Any = None
        self._also: Any = None  # a swap control: the monitor of its true task (original_verdict)
        self._trial: dict[str, Any] = {}
        self._last_scored = -1
        self._end: int | None = None
        self._finished_ids: set[str] = set()
        self._gate = PoseGate()
        self.score = self.create_publisher(String, TOPIC_SCORE, tp.LATCHED_STATE)
        # Exactly the frames scored, so a recording (foxglove_node's MCAP) replays to the same result.
        self.frames = self.create_publisher(String, TOPIC_FRAME, tp.FRAME_STREAM)
        self.create_subscription(JointState, TOPIC_JOINT_STATES, self._on_joints, tp.STATE_STREAM)
        if self.object_source == "tf":
            self.create_subscription(TFMessage, "/tf", self._on_tf, tp.STATE_STREAM)
        else:
            self.create_subscription(MarkerArray, TOPIC_OBJECTS, self._on_markers, tp.STATE_STREAM)
        self.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)

    # -- inputs ----------------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        try:
            vector = joint_vector(msg)
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)
            return
        stamp = stamp_ns(msg.header.stamp)
        if self.frame_sync == "latest":
            # Only objects seen since the trial started: the previous trial's table is not this one's.
            fresh = self._latest_objects_ns >= int(self._trial.get("start_stamp_ns", 0))
            if self._monitor is not None and self._latest_objects is not None and fresh and self._end is None:
                self._score(stamp, vector, self._latest_objects, self._latest_doubtful)
            return
        self._joints[stamp] = vector
        self._trim(self._joints)
        self._advance()

    def _on_tf(self, msg: TFMessage) -> None:
        for stamp, poses in objects_from_transforms(msg.transforms).items():
            entry = self._objects.setdefault(stamp, ({}, {}))
            for name, (position, quat) in poses.items():
                entry[0][name], entry[1][name] = position, quat
            self._latest_objects, self._latest_objects_ns = entry, max(self._latest_objects_ns, stamp)
        self._trim(self._objects)
        self._advance()

    def _on_markers(self, msg: MarkerArray) -> None:
        try:
            stamp, positions, quats = objects_from_markers(msg)
        except MessageError as exc:
            self.get_logger().error(str(exc), throttle_duration_sec=5.0)
            return
        # Poses below MIN_POSE_CONFIDENCE are ignored: the object keeps its last confident pose (or has none).
        poses = {name: (positions[name], quats[name]) for name in positions}
        self._objects[stamp] = self._latest_objects = self._gate.update(poses, marker_confidences(msg))
        self._doubtful[stamp] = self._latest_doubtful = self._gate.doubtful
        self._latest_objects_ns = max(self._latest_objects_ns, stamp)
        self._trim(self._objects)
        self._trim(self._doubtful)
        self._advance()

    @staticmethod
    def _trim(buffer: dict[int, Any]) -> None:
        while len(buffer) > BUFFER_LIMIT:
            del buffer[min(buffer)]

    def _on_trial(self, msg: String) -> None:
        trial = tp.decode_or_log(msg.data, TOPIC_TRIAL, self.get_logger())
        if trial is None:
            return
        phase, trial_id = trial.get("phase"), str(trial.get("id"))
        if trial_id in self._finished_ids or phase not in SCORED_PHASES:
            return
        if trial_id != self._trial.get("id"):
            self._start(trial)  # also when `running` itself was missed: every phase carries the start stamp
        if phase == tp.PHASE_SCORING and self._end is None:
            self._end = int(trial.get("end_stamp_ns", self._last_scored))
            if self.frame_sync == "latest":
                self._end = self._last_scored
        self._advance()

    def _start(self, trial: dict[str, Any]) -> None:
        from robofollow_ros.scoring.monitor import StageMonitor

        # an instruction control (trial_blind): a swap is scored against its new task's rules, and its true
        # task's too (``original_verdict``), as eval scores it
        self._monitor = StageMonitor(self.registry.eval_task(str(trial.get("scored_task") or trial["task"])),
                                     self.registry)
        also = trial.get("also_scored")
        self._also = StageMonitor(self.registry.eval_task(str(also)), self.registry) if also else None
        self._trial, self._end = trial, None
        self._gate = PoseGate()  # a new table: the last trial's confident poses say nothing about it
        self._latest_doubtful = frozenset()
        start = int(trial.get("start_stamp_ns", 0))
        self._last_scored = start - 1
        for buffer in (self._joints, self._objects, self._doubtful):
            for stamp in [s for s in buffer if s < start]:
                del buffer[stamp]

    # -- scoring ---------------------------------------------------------------------------------
    def _advance(self) -> None:
        """Score every complete state in stamp order; finish the trial once its last row is scored."""
        if self._monitor is None:
            return
        if self.frame_sync == "stamp":
            stamps = sorted(self._joints)
            i = bisect.bisect_right(stamps, self._last_scored)
            for stamp in stamps[i:]:
                if self._end is not None and stamp > self._end:
                    break
                objects = self._objects.get(stamp)
                if objects is None:
                    break  # its object poses are still on the way; keep the order
                self._score(stamp, self._joints.pop(stamp), objects, self._doubtful.pop(stamp, frozenset()))
                del self._objects[stamp]
        if self._end is not None and self._last_scored >= self._end:
            self._finish()

    def _score(self, stamp: int, vector: np.ndarray, objects: Poses, doubtful: frozenset[str] = frozenset()) -> None:
        from robofollow_ros.scoring.frame import frame_from_dict

        task = self._monitor.task
        ee = self.kinematics.ee_points(vector, task.scene)
        raw = {"ee_left": [float(v) for v in ee["left"]], "ee_right": [float(v) for v in ee["right"]],
               "gripper_left": float(vector[GRIPPER_INDEX["left"]]),
               "gripper_right": float(vector[GRIPPER_INDEX["right"]]),
               "objects": objects[0], "object_quats": objects[1]}
        if doubtful:
            raw["doubtful"] = sorted(doubtful)
        index = self._monitor.frame_count + len(self._monitor.held_frames)  # frames offered, held ones included
        try:
            frame = frame_from_dict(raw, index=index)
            self._monitor.update(frame)
            if self._also is not None:
                self._also.update(frame)
        except (KeyError, ValueError) as exc:
            self.get_logger().error(f"frame at {stamp} ns not scored: {exc}", throttle_duration_sec=2.0)
            return
        self._last_scored = stamp
        self.frames.publish(String(data=tp.encode({"trial": self._trial.get("id"), "task": task.task_id,
                                                   "index": index, "frame": raw})))
        self.score.publish(String(data=tp.encode(self._payload(final=False))))

    def _payload(self, final: bool) -> dict[str, Any]:
        live = self._monitor.live()
        live.update(trial_id=self._trial.get("id"), final=final, frames=self._monitor.frame_count)
        if final:
            live["result"] = self._monitor.result() if self._monitor.frame_count else None
            if live["result"] is not None and self._also is not None:  # a swap: the verdict against the true task
                also = self._also.result() if self._also.frame_count else None
                if also is not None:
                    live["result"]["original_verdict"] = {"task": self._also.task.task_id, **{
                        k: also[k] for k in ("intent_score", "exec_score", "intent_ok", "exec_ok", "completion_ok")}}
        return live

    def _finish(self) -> None:
        trial_id = str(self._trial.get("id"))
        self.score.publish(String(data=tp.encode(self._payload(final=True))))
        self.get_logger().info(f"trial {trial_id} scored: {self._monitor.frame_count} frames")
        self._finished_ids.add(trial_id)
        self._monitor, self._end, self._also = None, None, None


def marker_confidences(msg: MarkerArray) -> dict[str, float]:
    """Per object, the confidence perception published: ``text`` JSON ``confidence``, else ``color.a``."""
    out = {}
    for m in msg.markers:
        if not m.ns:
            continue
        try:
            info = json.loads(m.text) if m.text else {}
            value = float(info["confidence"]) if isinstance(info, dict) and "confidence" in info else float(m.color.a)
        except (ValueError, TypeError):
            value = float(m.color.a)
        out[m.ns] = value
    return out


def main(args: list[str] | None = None) -> None:
    run_node(StageMonitorNode, args)


if __name__ == "__main__":
    main()
