"""Recording every trial to ``<output>/mcap/<trial>.mcap`` from the headless evaluator.

``TrialRecorder.for_trial`` returns the observer that ``evaluation.episode.run_episode`` calls: it
opens the trial's MCAP file when the trial starts, logs every scorer frame (the exact input of the
StageMonitor), the live score, joint states, the 3-D scene, camera images when the policy got them,
the trial state and log lines, and closes the file with the final result when the trial ends.

Chunks are small (``CHUNK_BYTES``) so a process killed mid-trial loses at most the last chunk;
``monitoring.replay`` reads such a file without its summary or footer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import foxglove
from foxglove.mcap import MCAPWriteOptions, MCAPWriter

from robofollow_ros.benchmark import EvalTask, Registry, default_registry
from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OBS_KEYS
from robofollow_ros.monitoring.channels import MonitorSettings, TrialChannels
from robofollow_ros.monitoring.scene import SceneBuilder

#: Target uncompressed chunk size: what a killed recording can lose at most (plus the open chunk).
CHUNK_BYTES = 64 * 1024


def open_trial_mcap(path: Path, context: foxglove.Context) -> MCAPWriter:
    """An MCAP writer for one trial on ``context`` (a re-run trial overwrites its killed recording)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return foxglove.open_mcap(path, allow_overwrite=True, context=context,
                              writer_options=MCAPWriteOptions(chunk_size=CHUNK_BYTES, profile="robofollow"))


def trial_state(trial_id: str, task: EvalTask, seed: int | None, phase: str,
                round_index: int | None = None) -> dict[str, Any]:
    """The trial-state JSON of ``/robofollow/trial`` (docs/foxglove.md)."""
    return {"trial": trial_id, "scene": task.scene, "level": task.level, "task": task.task_id,
            "instruction": task.instruction, "round": round_index, "seed": seed, "phase": phase}


class TrialRecorder:
    """Owns one foxglove Context and its channels; opens one MCAP file per trial."""

    def __init__(self, mcap_dir: Path, settings: MonitorSettings | None = None,
                 registry: Registry | None = None) -> None:
        self.mcap_dir = Path(mcap_dir)
        self.registry = registry or default_registry()
        self.context = foxglove.Context()
        self.channels = TrialChannels(self.context, settings)
        self._open: MCAPWriter | None = None

    def for_trial(self, trial_id: str, round_index: int | None = None) -> TrialObserver:
        return TrialObserver(self, trial_id, round_index)

    def path_of(self, trial_id: str) -> Path:
        return self.mcap_dir / f"{trial_id}.mcap"

    def _start(self, trial_id: str) -> None:
        self._finish()
        self._open = open_trial_mcap(self.path_of(trial_id), self.context)

    def _finish(self) -> None:
        if self._open is not None:
            writer, self._open = self._open, None
            writer.close()

    def close(self) -> None:
        """Finish an open recording (a trial aborted by an exception still gets a readable file)."""
        self._finish()


class TrialObserver:
    """The ``run_episode`` observer of one trial (see ``evaluation.episode.EpisodeObserver``)."""

    def __init__(self, recorder: TrialRecorder, trial_id: str, round_index: int | None) -> None:
        self.recorder = recorder
        self.trial_id = trial_id
        self.round_index = round_index
        self.channels = recorder.channels
        self._task: EvalTask | None = None
        self._seed: int | None = None
        self._world: Any = None

    def on_start(self, task: EvalTask, seed: int, world: Any) -> None:
        self._task, self._seed, self._world = task, seed, world
        self.recorder._start(self.trial_id)
        reg = self.recorder.registry
        self.channels.set_scene(SceneBuilder(task, reg.layout_of(task), reg.slot_xy))
        self.channels.log_trial(trial_state(self.trial_id, task, seed, "running", self.round_index))
        self.channels.log_line("info", f"trial {self.trial_id} started: {task.instruction}")

    def on_frame(self, index: int, frame: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        task = self._require_task()
        now = time.time_ns()
        self.channels.log_frame(self.trial_id, task.task_id, index, frame, time_ns=now)
        self.channels.log_score(live, time_ns=now)
        joint_vector = getattr(self._world, "joint_vector", None)
        if joint_vector is not None:
            self.channels.log_joints(joint_vector(), time_ns=now)

    def on_observation(self, observation: Mapping[str, Any]) -> None:
        images = observation.get("observation", {})
        for camera in CAMERA_NAMES:
            rgb = images.get(CAMERA_OBS_KEYS[camera], {}).get("rgb")
            self.channels.log_image(camera, rgb)

    def on_end(self, result: Mapping[str, Any], live: Mapping[str, Any]) -> None:
        task = self._require_task()
        self.channels.log_score({**live, "final": True})
        self.channels.log_result(self.trial_id, result)
        level = "error" if "policy_error" in result else "info"
        self.channels.log_line(level, f"trial {self.trial_id} ended: IS {result.get('intent_score', 0.0):.2f} "
                                      f"ES {result.get('exec_score', 0.0):.2f} "
                                      f"complete {bool(result.get('completion_ok'))}"
                                      + (f" ({result['policy_error']})" if "policy_error" in result else ""))
        self.channels.log_trial(trial_state(self.trial_id, task, self._seed, "done", self.round_index))
        self.channels.set_scene(None)
        self.recorder._finish()

    def _require_task(self) -> EvalTask:
        if self._task is None:
            raise RuntimeError(f"trial {self.trial_id}: on_start was not called")
        return self._task
