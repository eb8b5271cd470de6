"""``LiveSession``: trial bookkeeping for a live monitor fed by messages (the foxglove node's core).

The ROS graph delivers a trial as separate streams (trial state, score, scorer frames, object
poses, transforms). This object turns them into one recording per trial: a new trial id opens
``<dir>/<trial>.mcap`` (the trial's ``run_dir``/mcap unless a directory is forced), the final
score's result entry is logged for replay, and the file closes once the trial said ``done`` and
every frame its final score counted is in. The streams arrive in no fixed order across topics, so
frames or scores of a trial not announced yet wait for its state message, and a next trial waits
while the previous recording still misses its tail; so do camera images stamped after the ended trial's
end (``on_stamped``): each trial's camera streams start with it, and the camera rate cap's schedule starts
again with each trial. The robot model and static transforms arrive once per graph, so ``TrialChannels``
re-logs them into every new recording.
ROS-free, so it is tested without rclpy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import Registry, UnknownTaskError, default_registry
from robofollow_ros.contract import MIN_POSE_CONFIDENCE, TRIAL_ID_KEY
from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.scene import SceneBuilder
from robofollow_ros.monitoring.trial_log import TrialLog

#: Messages kept for a trial announced late, or for the next trial while the previous one completes
#: (a trial has at most 501 frames and as many scores); past this the older tail is given up.
HOLD_LIMIT = 2048
#: Trial phases after which nothing more of the trial arrives (trial_protocol.py).
CLOSING_PHASES = ("done", "finished")


class LiveSession:
    """Feed it the graph's messages; it logs them and keeps one MCAP open per running trial."""

    def __init__(self, channels: TrialChannels, record: bool = True, record_dir: Path | None = None,
                 registry: Registry | None = None, session_file: Path | None = None) -> None:
        self.channels = channels
        self.log = TrialLog(channels)
        self.record = record
        self.record_dir = record_dir
        self.registry = registry or default_registry()
        self.trial_id: str | None = None
        self.task_id: str | None = None
        self.recording: Path | None = None
        self._frame_index = 0
        self._ee: dict[str, Any] = {}
        self._exact_frames = False
        #: Frames/scores of a trial whose state message has not arrived yet, by trial id.
        self._early: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        #: Messages of the next trial, held while the current recording still misses its tail.
        self._held: list[tuple[str, Any]] = []
        #: The trial said it ended, and how many frames its final score counted: the recording closes
        #: only when both are known and every frame is in, since the streams arrive in no fixed order.
        self._ended = False
        self._expected_frames: int | None = None
        #: The trial's last state stamp (the trial manager's ``end_stamp_ns``) and the newest stamp seen on
        #: each stamped state stream (joint states, link and object TF, objects): those streams lag behind
        #: the trial's own messages, so the recording also waits for each of them to reach the end.
        self._end_stamp: int | None = None
        self._stream_stamps: dict[str, int] = {}
        #: One file for the whole session (``robofollow record``): trials do not open or close recordings.
        self.session_file = session_file
        if session_file is not None:
            self.recording = session_file
            channels.open_recording(session_file)

    # -- trial state -------------------------------------------------------------------------------
    def on_trial(self, state: Mapping[str, Any]) -> None:
        trial_id = state.get(TRIAL_ID_KEY)
        if trial_id is not None and str(trial_id) != self.trial_id:
            if self._held or self._awaiting_tail():
                self._hold("trial", state)
                return
            self._begin(str(trial_id), state)
        if isinstance(state.get("end_stamp_ns"), int):
            self._end_stamp = int(state["end_stamp_ns"])
        self.log.trial(state)
        phase = state.get("phase")
        if phase is not None:
            self.channels.log_line("info", f"trial {trial_id}: phase {phase}")
        if phase in CLOSING_PHASES:
            self._ended = True
            self._close_when_complete()

    def _begin(self, trial_id: str, state: Mapping[str, Any]) -> None:
        if self.session_file is None:
            self._close_recording()
        self.channels.restart_schedules()  # this trial's first pictures are not the last one's rate-limited tail
        self.trial_id, self._frame_index, self._ee, self._exact_frames = trial_id, 0, {}, False
        self._ended, self._expected_frames = False, None
        self._end_stamp, self._stream_stamps = None, {}
        self.task_id = state.get("task")
        builder = None
        if self.task_id is not None:
            try:
                task = self.registry.eval_task(str(self.task_id))
                builder = SceneBuilder(task, self.registry.layout_of(task), self.registry.slot_xy)
            except UnknownTaskError as exc:
                self.channels.log_line("warning", f"trial {trial_id}: no 3-D scene ({exc})")
        self.log.set_scene(builder)
        directory = self.record_dir or (Path(state["run_dir"]) / "mcap" if state.get("run_dir") else None)
        if self.session_file is None and self.record and directory is not None:
            self.recording = directory / f"{trial_id}.mcap"
            self.channels.open_recording(self.recording)
            instruction = state.get("instruction")
            if isinstance(instruction, str):  # the trial's own, whenever /robofollow/instruction arrived
                self.channels.publish_to_recording(topics.INSTRUCTION, topics.STRING,
                                                   rosmsg.encode(rosmsg.string(instruction)))
        early, self._early = self._early.pop(trial_id, []), {}  # other unseen trials belong to no recording
        for kind, payload in early:
            self._dispatch(kind, payload)

    @property
    def recording_open(self) -> bool:
        return self.channels.recording is not None

    def _close_recording(self) -> None:
        self.channels.close_recording()

    # -- streams -------------------------------------------------------------------------------------
    def on_instruction(self, data: bytes) -> None:
        """``/robofollow/instruction`` (serialized): live, and kept for late viewers. A trial recording has its
        trial's instruction from the trial state as it opens (``_begin``): the topic's message comes just
        before that state, in no fixed order with it, and would land in the previous trial's file or none.
        A session file (no trials) records it as it comes."""
        if self.session_file is not None:
            self.channels.publish(topics.INSTRUCTION, topics.STRING, data)
        else:
            self.channels.publish_live(topics.INSTRUCTION, topics.STRING, data)

    def on_score(self, live: Mapping[str, Any]) -> None:
        if self._elsewhere("score", live, live.get("trial_id")):
            return
        self.log.score(live)
        if live.get("final") and isinstance(live.get("result"), dict):
            self.log.result(str(live.get("trial_id") or self.trial_id), live["result"])
            frames = live.get("frames", live["result"].get("frames"))
            self._expected_frames = int(frames) if isinstance(frames, int) else 0
            self._close_when_complete()

    def on_state(self, stream: str, stamp_ns: int, record: Callable[[], None]) -> None:
        """A stamped state message of ``stream``; ``record`` logs it. Stamped at or before the ended trial's
        end it goes into that trial's recording, which may then be complete; stamped past the end it
        belongs to the next trial: the ended one closes first if that completes it, else the message
        waits with the next trial's others until it does."""
        if self.recording_open and self._ended and self._end_stamp is not None and stamp_ns > self._end_stamp:
            self._stream_stamps[stream] = stamp_ns
            self._close_when_complete()
            if self._awaiting_tail():
                self._hold("state", record)
                return
        record()
        if self.recording_open:
            self._stream_stamps[stream] = max(stamp_ns, self._stream_stamps.get(stream, stamp_ns))
            if self._ended:
                self._close_when_complete()

    def on_stamped(self, stamp_ns: int, record: Callable[[], object]) -> None:
        """A stamped message the recording does not wait for (a camera image or its camera_info): stamped past
        the ended trial's end while that recording still waits for its tail (or, without an end stamp, once the
        next trial was announced), it belongs to the next trial and waits with the next trial's other messages;
        else ``record`` logs it now."""
        if self._awaiting_tail():
            end = self._end_stamp
            if (stamp_ns > end) if end is not None else bool(self._held):
                self._hold("state", record)
                return
        record()

    def _complete(self) -> bool:
        frames = self._expected_frames is not None and self._frame_index >= self._expected_frames
        end = self._end_stamp
        return frames and (end is None or all(stamp >= end for stamp in self._stream_stamps.values()))

    def _awaiting_tail(self) -> bool:
        """The current recording's trial ended, but its last frames, its final score or its last states are
        still on the way."""
        return self.recording_open and self._ended and not self._complete()

    def _close_when_complete(self) -> None:
        if self._ended and self._complete():
            if self.session_file is None:
                self._close_recording()
            self._release()

    def _elsewhere(self, kind: str, payload: Mapping[str, Any], trial: Any) -> bool:
        """Park a message of another trial than the recorded one; True when it was parked."""
        if trial is None or str(trial) == self.trial_id:
            return False
        if self._held:
            self._hold(kind, payload)
        else:
            early = self._early.setdefault(str(trial), [])
            if len(early) < HOLD_LIMIT:
                early.append((kind, payload))
        return True

    def _hold(self, kind: str, payload: Any) -> None:
        self._held.append((kind, payload))
        if len(self._held) > HOLD_LIMIT:  # the previous trial's tail is not coming: give it up
            if self.session_file is None:
                self._close_recording()
            self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for kind, payload in held:
            self._dispatch(kind, payload)

    def _dispatch(self, kind: str, payload: Any) -> None:
        """Hand a held message on: a trial state, score or frame (JSON), or a state message's ``record``."""
        if kind == "state":
            payload()  # a held state message's recording call
            return
        {"trial": self.on_trial, "score": self.on_score, "frame": self.on_frame}[kind](payload)

    def on_frame(self, message: Mapping[str, Any]) -> None:
        """A scorer frame: ``{"index", "frame", ...}`` or a bare trajectory-frame dict."""
        if self._elsewhere("frame", message, message.get("trial")):
            return
        frame = message.get("frame", message)
        index = int(message.get("index", self._frame_index))
        self._frame_index = index + 1
        self._exact_frames = True
        self._ee = {k: frame[k] for k in ("ee_left", "ee_right", "gripper_left", "gripper_right") if k in frame}
        # object transforms come from the graph's own /tf, so the frame only draws the scene
        self.log.frame(self.trial_id or "", str(message.get("task", self.task_id)), index, frame, object_tf=False)
        self._close_when_complete()

    def on_perception(self, report: Mapping[str, Any]) -> None:
        """``/robofollow/perception/status`` JSON: perception's doubts and rates, shown in ``/robofollow/status``."""
        self.log.perception_status(report)

    def on_objects(self, poses: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                   confidences: Mapping[str, float] | None = None) -> None:
        """Object poses (name -> xyz, wxyz) from /robofollow/objects: the 3-D scene when no frames come; with
        perception's ``confidences`` drawn by opacity, and the ones below the threshold labelled doubtful."""
        if self._exact_frames:  # the scorer frames already draw the scene, with the scorer's EE points
            return
        frame: dict[str, Any] = {"objects": {n: list(p) for n, (p, _) in poses.items()},
                                 "object_quats": {n: list(q) for n, (_, q) in poses.items()}, **self._ee}
        if confidences:
            frame["confidence"] = dict(confidences)
            frame["doubtful"] = sorted(n for n, c in confidences.items() if c < MIN_POSE_CONFIDENCE)
        self.log.draw(frame)

    def close(self) -> None:
        self._close_recording()
        self._release()
        self._close_recording()
