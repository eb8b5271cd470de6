"""Recording every trial of the headless evaluator to ``<output>/mcap/<trial>.mcap`` (a ROS 2 bag).

``TrialRecorder.for_trial`` returns the observer that ``evaluation.episode.run_episode`` calls: it
opens the trial's recording when the trial starts and logs what the ROS graph would carry for the
same trial: the robot model (``/robot_description``, ``/tf_static``, link ``/tf`` from the measured
joints), joint states and commands, camera images (JPEG) with their calibration, object poses, every
scorer frame (the exact input of the StageMonitor), the live score, the trial state and log lines; it
closes the file with the final result when the trial ends.

Two rates (``monitoring.rates``, said in the bag's ``custom_data``): at the **policy** rate (default) the
cameras are the images the policy got (once per policy call), the joint states those after each executed
row, the commands the policy's rows. At a **control** rate of N Hz (``record_hz``) the world is sampled
every 1/N s of robot time from the trial's start (``SimWorld.set_sampler``): joint states, the set-point
the stepper drove the arms to (``/robofollow/joint_command``) and the three cameras rendered at that
state, one stamp for all, as ``robofollow collect`` records a frame; the policy's rows and its
observations are not recorded then. Either way each trial's cameras start with it: the rate cap's
schedule starts again with each recording (``TrialChannels.restart_schedules``).

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
from robofollow_ros.monitoring import rates, rosmsg, topics
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
                 registry: Registry | None = None, record_hz: int | None = None) -> None:
        if record_hz is not None and record_hz not in rates.CONTROL_HZ:
            raise ValueError(f"--record-rate: {record_hz} Hz is not one of {rates.CONTROL_HZ}")
        self.mcap_dir = Path(mcap_dir)
        #: None: the policy rate; else the control rate in Hz (module docstring).
        self.record_hz = record_hz
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

    @property
    def control_rate(self) -> bool:
        return self.recorder.record_hz is not None

    def on_start(self, task: EvalTask, seed: int, world: Any) -> None:
        self._task, self._seed, self._world = task, seed, world
        self._started_ns = time.time_ns()
        now = self._now()
        self.channels.open_recording(self.recorder.path_of(self.trial_id), rates.custom_data(self.recorder.record_hz))
        self._robot = self.recorder.robot_for(world)  # first trial: logs the robot model into this file
        reg = self.recorder.registry
        self.log.set_scene(SceneBuilder(task, reg.layout_of(task), reg.slot_xy))
        self.log.trial(trial_state(self.trial_id, task, seed, "running", self.round_index), time_ns=now)
        self.channels.send(topics.INSTRUCTION, rosmsg.string(task.instruction), now)
        self.channels.log_line("info", f"trial {self.trial_id} started: {task.instruction}", time_ns=now)
        if self.recorder.record_hz is not None:
            world.set_sampler(self._steps_per_sample(world, self.recorder.record_hz), self._sample)
            self._sample(None)  # t = 0: the start state and its pictures
        self._check()

    def _check(self) -> None:
        """A write of this trial's recording failed (a full disk ...): stop the trial now with that ``OSError``,
        rather than run it to its end for a recording that cannot be finished."""
        recording = self.channels.recording
        if recording is not None:
            recording.check()

    @staticmethod
    def _steps_per_sample(world: Any, hz: int) -> int:
        dt = getattr(world, "dt", None)
        if not callable(getattr(world, "set_sampler", None)) or not isinstance(dt, float):
            raise ValueError(f"--record-rate {hz}: {type(world).__name__} cannot be sampled at a control rate")
        steps = round(1.0 / (hz * dt))
        if abs(steps * dt * hz - 1.0) > 1e-9:
            raise ValueError(f"--record-rate {hz}: not a whole number of {dt} s physics steps")
        return steps

    def _sample(self, setpoint: Any) -> None:
        """One control-rate sample (``SimWorld.set_sampler``): the state, the set-point that led to it (none at
        t = 0), the link transforms and the three cameras, all at this step's time."""
        now, world = self._now(), self._world
        vector = world.joint_vector()
        self.channels.log_joints(vector, time_ns=now)
        if setpoint is not None:
            self.channels.log_joints(setpoint, time_ns=now, topic=topics.JOINT_COMMAND)
        if self._robot is not None:
            self.channels.send(topics.TF, rosmsg.tf_message(self._robot.link_transforms(vector, now)), now)
        if getattr(world, "render", False):
            pictures = world.render_images()
            for camera in CAMERA_NAMES:
                self._log_image(camera, pictures.get(camera, {}).get("rgb"), now, limit=False)

    def _log_image(self, camera: str, rgb: Any, now: int, limit: bool = True) -> None:
        if rgb is not None and camera not in self.channels.intrinsics and self._robot is not None:
            height, width = rgb.shape[:2]
            self.channels.intrinsics[camera] = (width, height, self._robot.camera_intrinsics(camera, width, height))
        self.channels.log_image(camera, rgb, time_ns=now, limit=limit)

    def on_frame(self, index: int, frame: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        task = self._require_task()
        now = self._now()
        self.log.frame(self.trial_id, task.task_id, index, frame, time_ns=now, object_tf=False)
        self.log.score(live, time_ns=now)
        transforms = object_transforms(frame, now)
        joint_vector = getattr(self._world, "joint_vector", None)
        if joint_vector is not None:
            vector = joint_vector()
            if not self.control_rate:  # at a control rate the samples are the joint states
                self.channels.log_joints(vector, time_ns=now)
            if self._robot is not None:
                transforms = self._robot.link_transforms(vector, now) + transforms
        self.channels.send(topics.TF, rosmsg.tf_message(transforms), now)
        poses = {n: (xyz, frame.get("object_quats", {}).get(n, (1.0, 0.0, 0.0, 0.0)))
                 for n, xyz in frame.get("objects", {}).items()}
        self.channels.send(topics.OBJECTS, object_markers(poses, now), now)
        self._check()

    def on_command(self, row: Any) -> None:
        """The 14-value row about to be executed (``/robofollow/joint_command``); at a control rate the
        commands are the sampled set-points instead."""
        if not self.control_rate:
            self.channels.log_joints(row, time_ns=self._now(), topic=topics.JOINT_COMMAND)  # at the state it follows

    def on_observation(self, observation: Mapping[str, Any]) -> None:
        """The images the policy gets (policy rate; at a control rate the samples are the images)."""
        if self.control_rate:
            return
        now = self._now()
        images = observation.get("observation", {})
        for camera in CAMERA_NAMES:
            self._log_image(camera, images.get(CAMERA_OBS_KEYS[camera], {}).get("rgb"), now)

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
        if self.control_rate:
            self._world.set_sampler(1, None)
        self.channels.close_recording()

    def _require_task(self) -> EvalTask:
        if self._task is None:
            raise RuntimeError(f"trial {self.trial_id}: on_start was not called")
        return self._task
