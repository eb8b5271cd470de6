"""``TrialLog``: a trial's own messages (state, live score, scorer frames, result, 3-D scene).

Shared by the headless recorder and the ROS session, so both record the same topics: the JSON the
graph speaks (``/robofollow/trial``, ``/robofollow/score``, ``/robofollow/frame``, ``/robofollow/result``
as ``std_msgs/String``) plus what Foxglove panels need from it (``/robofollow/score/stages``,
``/robofollow/status``, ``/robofollow/scene``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from robofollow_ros.contract import TRIAL_ID_KEY
from robofollow_ros.monitoring import rosmsg, stages, topics
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.scene import SceneBuilder, object_transforms


class TrialLog:
    def __init__(self, channels: TrialChannels) -> None:
        self.channels = channels
        self.scene: SceneBuilder | None = None
        self.state: dict[str, Any] = {}
        self.live: dict[str, Any] | None = None
        #: The latest ``/robofollow/perception/status`` (rig only): shown as the status's ``perception`` entry.
        self.perception: dict[str, Any] | None = None

    def set_scene(self, builder: SceneBuilder | None) -> None:
        """The task's scene (layout, source/target, regions); None stops drawing it."""
        self.scene = builder

    def trial(self, state: Mapping[str, Any], time_ns: int | None = None) -> None:
        """Trial state JSON: id (``contract.TRIAL_ID_KEY``), scene, level, task, instruction, round, seed, phase."""
        now = time.time_ns() if time_ns is None else time_ns
        if str(state.get(TRIAL_ID_KEY)) != str(self.state.get(TRIAL_ID_KEY)):
            self.live = None  # a new trial: the previous score no longer applies
        self.state = dict(state)
        self.channels.log_json(topics.TRIAL, state, now)
        self.channels.send(topics.STATUS, stages.status(now, self.state, self.live, self.perception), now)

    def perception_status(self, report: Mapping[str, Any], time_ns: int | None = None) -> None:
        """Perception's status JSON: its doubts, depth age and frame rates join ``/robofollow/status``."""
        now = time.time_ns() if time_ns is None else time_ns
        self.perception = dict(report)
        self.channels.send(topics.STATUS, stages.status(now, self.state, self.live, self.perception), now)

    def score(self, live: Mapping[str, Any], time_ns: int | None = None) -> None:
        """StageMonitor.live() (docs/scoring.md), plus the plotted values and the stage states it implies."""
        now = time.time_ns() if time_ns is None else time_ns
        self.live = dict(live)
        self.channels.log_json(topics.SCORE, live, now)
        self.channels.send(topics.STAGES, rosmsg.float64_array(stages.stage_values(live), "IS/ES"), now)
        self.channels.send(topics.STATUS, stages.status(now, self.state, self.live, self.perception), now)

    def result(self, trial_id: str, result: Mapping[str, Any], time_ns: int | None = None) -> None:
        """The results.json entry the live trial produced (replay compares against it)."""
        self.channels.log_json(topics.RESULT, {"trial": trial_id, "result": dict(result)}, time_ns)

    def frame(self, trial_id: str, task_id: str, index: int, frame: Mapping[str, Any], time_ns: int | None = None,
              object_tf: bool = True) -> None:
        """The scorer frame (exact re-scoring), its 3-D scene and (headless) the object transforms."""
        now = time.time_ns() if time_ns is None else time_ns
        self.channels.log_json(topics.FRAME, {"trial": trial_id, "task": task_id, "index": index, "frame": frame}, now)
        self.draw(frame, now)
        if object_tf and self.channels.wants(topics.TF):
            self.channels.send(topics.TF, rosmsg.tf_message(object_transforms(frame, now)), now)

    def draw(self, frame: Mapping[str, Any], time_ns: int | None = None) -> bool:
        """The 3-D scene of a (possibly partial) frame; False when no task scene is set or nobody listens."""
        if self.scene is None or not self.channels.wants(topics.SCENE):
            return False
        now = time.time_ns() if time_ns is None else time_ns
        self.channels.send(topics.SCENE, self.scene.update(frame, now), now)
        return True
