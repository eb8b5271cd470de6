"""One oracle demonstration in SAPIEN, recorded densely at a fixed control rate.

The oracle plans sparse waypoints (one row per motion piece). Each row is time-parameterised
exactly as the simulator's TOPP stepper does (``sim.control.plan_segment``: both arms under the
rig's velocity/acceleration limits at 250 Hz, grippers linear), and the per-step set-points are
driven one physics step at a time through ``SimWorld.execute`` (a ``direct`` world with one step
per call). Every ``250 / fps`` physics steps a frame is kept, RoboTwin-style:

    frame k:  observation.state = joints at t_k, images at t_k,
              action = the set-point commanded at t_{k+1} (absolute, 14 values)

After the oracle's last row the episode holds still for ``HOLD_FRAMES`` frames (so a learned policy
sees how a demonstration ends). The verdict is the evaluator's: the same ``StageMonitor`` fed one
scorer frame per executed oracle row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.contract import ARM_SLICE, ARMS, CAMERA_NAMES, GRIPPER_INDEX
from robofollow_ros.evaluation.episode import privileged_state
from robofollow_ros.policy.interface import Policy, validate_actions
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor

PHYSICS_HZ = 250
FPS_CHOICES = (5, 10, 25, 50)
HOLD_FRAMES = 5
MAX_ORACLE_CALLS = 24


@dataclass
class Demonstration:
    state: list[np.ndarray] = field(default_factory=list)
    action: list[np.ndarray] = field(default_factory=list)
    images: dict[str, list[np.ndarray]] = field(default_factory=lambda: {c: [] for c in CAMERA_NAMES})
    result: dict[str, Any] = field(default_factory=dict)
    oracle_rows: int = 0

    @property
    def complete(self) -> bool:
        return bool(self.result.get("completion_ok"))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        return (np.asarray(self.state, dtype=np.float32), np.asarray(self.action, dtype=np.float32),
                {c: np.stack(frames) for c, frames in self.images.items()})


def setpoints(world: Any, start: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-physics-step 14-value set-points from ``start`` to ``target`` (the TOPP stepper's profile)."""
    from robofollow_ros.sim.control import pad_segment, plan_segment

    rig = world.rig
    segments = {arm: plan_segment(start[ARM_SLICE[arm]], target[ARM_SLICE[arm]], float(start[GRIPPER_INDEX[arm]]),
                                  float(target[GRIPPER_INDEX[arm]]), rig.max_velocity, rig.max_acceleration,
                                  1.0 / PHYSICS_HZ, rig.gripper_full_stroke_steps) for arm in ARMS}
    steps = max(s.steps for s in segments.values())
    rows = np.repeat(np.asarray(target, dtype=np.float64)[None, :], steps, axis=0)
    for arm, segment in segments.items():
        padded = pad_segment(segment, steps)
        rows[:, ARM_SLICE[arm]] = padded.positions
        rows[:, GRIPPER_INDEX[arm]] = padded.gripper
    return rows


class _Recorder:
    """Steps the world one set-point at a time and keeps a frame every ``steps_per_frame`` steps."""

    def __init__(self, world: Any, fps: int, demo: Demonstration) -> None:
        if fps not in FPS_CHOICES:
            raise ValueError(f"--fps: {fps} is not one of {FPS_CHOICES} (250 Hz physics must divide evenly)")
        self.world, self.demo = world, demo
        self.steps_per_frame = PHYSICS_HZ // fps
        self.steps = 0
        self.observe()

    def observe(self) -> None:
        self.demo.state.append(self.world.joint_vector().astype(np.float32))
        pictures = self.world.render_images()
        for camera in self.demo.images:
            self.demo.images[camera].append(pictures[camera]["rgb"])

    def step(self, setpoint: np.ndarray) -> None:
        self.world.execute(setpoint)
        self.steps += 1
        if self.steps % self.steps_per_frame == 0:
            self.demo.action.append(np.asarray(setpoint, dtype=np.float32))
            self.observe()

    def finish(self, command: np.ndarray, hold_frames: int) -> None:
        """Complete the current frame, hold still ``hold_frames`` frames, drop the last unpaired observation."""
        while self.steps % self.steps_per_frame:
            self.step(command)
        for _ in range(hold_frames * self.steps_per_frame):
            self.step(command)
        self.demo.state.pop()
        for frames in self.demo.images.values():
            frames.pop()


def record_demonstration(world: Any, oracle: Policy, task: EvalTask, seed: int, instruction: str,
                         fps: int) -> Demonstration:
    """Run the oracle on ``task`` (layout jittered by ``seed``) and record it; see the module docstring."""
    demo = Demonstration()
    world.reset(task, seed)
    monitor = StageMonitor(task)
    frame = world.scorer_frame()
    monitor.update(frame_from_dict(frame, index=0))
    oracle.reset()
    oracle.set_instruction(instruction)
    recorder = _Recorder(world, fps, demo)
    command = world.joint_vector()
    for _ in range(MAX_ORACLE_CALLS):
        vector = world.joint_vector()
        obs = {"joint_action": {"vector": vector}, "instruction": instruction,
               "privileged": privileged_state(task, frame)}
        rows = validate_actions(oracle.predict(obs)).astype(np.float64)
        if len(rows) == 1 and np.allclose(rows[0], vector, atol=1e-6):
            break  # the oracle holds: every phase is done
        for row in rows:
            for setpoint in setpoints(world, world.joint_vector(), row):
                recorder.step(setpoint)
            command = row
            demo.oracle_rows += 1
            frame = world.scorer_frame()
            monitor.update(frame_from_dict(frame, index=monitor.frame_count))
    recorder.finish(command, HOLD_FRAMES)
    demo.result = monitor.result()
    return demo
