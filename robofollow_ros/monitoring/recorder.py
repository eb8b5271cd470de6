"""Recording every trial of the headless evaluator to ``<output>/mcap/<trial>.mcap`` (a ROS 2 bag).

``TrialRecorder.for_trial`` returns the observer that ``evaluation.episode.run_episode`` calls: it
opens the trial's recording when the trial starts and logs what the ROS graph would carry for the
same trial: the robot model (``/robot_description``, ``/tf_static``, link ``/tf`` from the measured
joints), joint states and commands, camera images (JPEG) with their calibration when the policy got
them, object poses, every scorer frame (the exact input of the StageMonitor), the live score, the
trial state and log lines; it closes the file with the final result when the trial ends.

Times are the trial's clock: the wall time the trial started plus the simulated time since (the
world's physics steps), for every stamp and log time of the file. Sim time stands still while the
policy thinks, as on the graph under ``use_sim_time``, so intervals in a recording are the robot's:
a dataset exported from it (``robofollow export-lerobot``) is sampled in robot time, not in how
long rendering and inference took.

Chunks are small (``bagfile.CHUNK_BYTES``) so a process killed mid-trial loses at most the last
chunk; ``monitoring.replay`` reads such a file without its summary or footer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import EvalTask, Registry, default_registry
from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OBS_KEYS, TRIAL_ID_KEY
from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.channels import MonitorSettings, TrialChannels
from robofollow_ros.monitoring.robot import RobotModel
from robofollow_ros.monitoring.scene import SceneBuilder, object_markers, object_transforms
from robofollow_ros.monitoring.trial_log import TrialLog


def trial_state(trial_id: str, task: EvalTask, seed: int | None, phase: str,
                round_index: int | None = None) -> dict[str, Any]:
    """The trial-state JSON of ``/robofollow/trial`` (docs/foxglove.md), the trial named as the trial manager
    names it (``contract.TRIAL_ID_KEY``)."""
    return {TRIAL_ID_KEY: trial_id, "scene": task.scene, "level": task.level, "task": task.task_id,
            "instruction": task.instruction, "round": round_index, "seed": seed, "phase": phase}


class TrialRecorder:
    """Owns the monitoring channels; opens one recording per trial."""

    def __init__(self, mcap_dir: Path, settings: MonitorSettings | None = None,
                 registry: Registry | None = None) -> None:
        self.mcap_dir = Path(mcap_dir)
        self.registry = registry or default_registry()
        self.channels = TrialChannels(settings)
        self.log = TrialLog(self.channels)
        self.robot: RobotModel | None = None

    def for_trial(self, trial_id: str, round_index: int | None = None) -> TrialObserver:
        return TrialObserver(self, trial_id, round_index)

    def path_of(self, trial_id: str) -> Path:
        return self.mcap_dir / f"{trial_id}.mcap"

    def robot_for(self, world: Any) -> RobotModel | None:
        """The robot model of the world's rig (built once; None for a world without a rig)."""
        rig = getattr(world, "rig", None)
        if rig is not None and (self.robot is None or self.robot.rig is not rig):
            self.robot = RobotModel(rig)
            self.channels.send(topics.ROBOT_DESCRIPTION, rosmsg.string(self.robot.urdf))
            self.channels.send(topics.TF_STATIC, rosmsg.tf_message(self.robot.static_transforms(time.time_ns())))
        return self.robot if rig is not None else None

    def close(self) -> None:
        """Finish an open recording (a trial aborted by an exception still gets a readable file)."""
        self.channels.close_recording()


class TrialObserver:
    """The ``run_episode`` observer of one trial (see ``evaluation.episode.EpisodeObserver``)."""

    def __init__(self, recorder: TrialRecorder, trial_id: str, round_index: int | None) -> None:
        self.recorder = recorder
        self.trial_id = trial_id
        self.round_index = round_index
        self.channels = recorder.channels
        self.log = recorder.log
        self._task: EvalTask | None = None
        self._seed: int | None = None
        self._world: Any = None
        self._robot: RobotModel | None = None
        self._started_ns = time.time_ns()

    def _now(self) -> int:
        """The trial's clock (module docstring); wall time for a world that does not count its steps."""
        steps, dt = getattr(self._world, "physics_steps", None), getattr(self._world, "dt", None)
        if not isinstance(steps, int) or not isinstance(dt, float):
            return time.time_ns()
        return self._started_ns + round(steps * dt * 1e9)

    def on_start(self, task: EvalTask, seed: int, world: Any) -> None:
        self._task, self._seed, self._world = task, seed, world
        self._started_ns = time.time_ns()
        now = self._now()
        self.channels.open_recording(self.recorder.path_of(self.trial_id))
        self._robot = self.recorder.robot_for(world)  # first trial: logs the robot model into this file
        reg = self.recorder.registry
        self.log.set_scene(SceneBuilder(task, reg.layout_of(task), reg.slot_xy))
        self.log.trial(trial_state(self.trial_id, task, seed, "running", self.round_index), time_ns=now)
        self.channels.send(topics.INSTRUCTION, rosmsg.string(task.instruction), now)
        self.channels.log_line("info", f"trial {self.trial_id} started: {task.instruction}", time_ns=now)

    def on_frame(self, index: int, frame: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        task = self._require_task()
        now = self._now()
        self.log.frame(self.trial_id, task.task_id, index, frame, time_ns=now, object_tf=False)
        self.log.score(live, time_ns=now)
        transforms = object_transforms(frame, now)
        joint_vector = getattr(self._world, "joint_vector", None)
        if joint_vector is not None:
            vector = joint_vector()
            self.channels.log_joints(vector, time_ns=now)
            if self._robot is not None:
                transforms = self._robot.link_transforms(vector, now) + transforms
        self.channels.send(topics.TF, rosmsg.tf_message(transforms), now)
        poses = {n: (xyz, frame.get("object_quats", {}).get(n, (1.0, 0.0, 0.0, 0.0)))
                 for n, xyz in frame.get("objects", {}).items()}
        self.channels.send(topics.OBJECTS, object_markers(poses, now), now)

    def on_command(self, row: Any) -> None:
        """The 14-value row about to be executed (``/robofollow/joint_command``)."""
        self.channels.log_joints(row, time_ns=self._now(), topic=topics.JOINT_COMMAND)  # at the state it follows

    def on_observation(self, observation: Mapping[str, Any]) -> None:
        now = self._now()
        images = observation.get("observation", {})
        for camera in CAMERA_NAMES:
            rgb = images.get(CAMERA_OBS_KEYS[camera], {}).get("rgb")
            if rgb is not None and camera not in self.channels.intrinsics and self._robot is not None:
                height, width = rgb.shape[:2]
                self.channels.intrinsics[camera] = (width, height, self._robot.camera_intrinsics(camera, width, height))
            self.channels.log_image(camera, rgb, time_ns=now)

    def on_end(self, result: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        task = self._require_task()
        now = self._now()
        self.log.score({**live, "final": True}, time_ns=now)
        self.log.result(self.trial_id, result, time_ns=now)
        level = "error" if "policy_error" in result else "info"
        self.channels.log_line(level, f"trial {self.trial_id} ended: IS {result.get('intent_score', 0.0):.2f} "
                                      f"ES {result.get('exec_score', 0.0):.2f} "
                                      f"complete {bool(result.get('completion_ok'))}"
                                      + (f" ({result['policy_error']})" if "policy_error" in result else ""),
                               time_ns=now)
        self.log.trial(trial_state(self.trial_id, task, self._seed, "done", self.round_index), time_ns=now)
        self.log.set_scene(None)
        self.channels.close_recording()

    def _require_task(self) -> EvalTask:
        if self._task is None:
            raise RuntimeError(f"trial {self.trial_id}: on_start was not called")
        return self._task
