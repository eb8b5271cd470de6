"""``robofollow eval --execution realtime`` (issue 26, deliverable 2): the arms move while the policy thinks.

* latency costs ticks on the virtual clock, exactly and whatever the CPU: a ``latency:200`` oracle at 25 Hz holds
  5 ticks at cold start and never starves afterwards; a policy whose measured call takes 130 ms on an injected
  wall clock holds ceil(0.13 / 0.04) = 4 ticks;
* the oracle at latency 0 completes an easy L0 task in this mode; lock-step trials carry no ``execution`` entry;
* run.json records the mode and the executor's settings; ``--resume`` refuses another mode or merge rule, and a
  run.json written before the field existed reads as lock-step.
Real SimWorld, real policies (the oracle, ``latency:`` from its SPEC), real run directories.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.execution_mode import PHYSICS_HZ, ExecutionSettings
from robofollow_ros.evaluation.provenance import RunSettings
from robofollow_ros.evaluation.realtime_episode import run_realtime_episode
from robofollow_ros.evaluation.results import RunWriter
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.evaluation.trial_worker import TrialWorker, WorkerSpec
from robofollow_ros.exit_status import EXIT_BAD_INPUT, EXIT_OK
from robofollow_ros.policy.latency import LatencyPolicy
from robofollow_ros.rundir import RunDirError
from robofollow_ros.scoring import score_trajectory
from robofollow_ros.scoring.synthetic import Puppet
from robofollow_ros.sim import world as sim_world
from said import error_lines
from test_cli_tasks import ROBOFOLLOW

# exclusive: wall-clock bounds, run alone after the parallel phase (make test)
pytestmark = [pytest.mark.timeout(120), pytest.mark.exclusive]

EASY = "L0_pickup_yellow_block_1_left"
REALTIME = ExecutionSettings(mode="realtime", control_hz=25)


def _trial(policy: str, settings: EpisodeSettings, task: str = EASY) -> dict[str, Any]:
    worker = TrialWorker(WorkerSpec(policy=policy, settings=settings, stepper="direct"))
    try:
        key = TrialKey(task, 1, default_registry().eval_task(task).seed(1))
        return worker.run(key).result
    finally:
        worker.close()


def test_the_tick_is_a_whole_number_of_physics_steps() -> None:
    assert PHYSICS_HZ == sim_world.PHYSICS_HZ
    assert REALTIME.tick_physics_steps / PHYSICS_HZ == pytest.approx(REALTIME.control_dt_s)


def test_a_200ms_latency_oracle_holds_exactly_five_ticks_at_cold_start() -> None:
    result = _trial("latency:200:oracle", EpisodeSettings(max_steps=2, actions_per_step=50, execution=REALTIME))
    stats = result["execution"]
    assert stats["ticks"] == 100  # the budget: max_steps × actions_per_step ticks
    # holds before the first row (ticks 0..4); the oracle's later holds are its own short chunks (see the docs)
    assert stats["hold_ticks"] - stats["starved_ticks"] == 5
    assert stats["latency_s"]["max"] == pytest.approx(0.2) and stats["latency_s"]["p50"] == pytest.approx(0.2)
    assert stats["delay_steps"] == 5 and stats["requests"] >= 2


class ChunkOfHolds:
    """A test policy: 50 rows holding the joints it sees, computed at once."""

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        return np.repeat(np.asarray(obs["joint_action"]["vector"], dtype=np.float32)[None], 50, axis=0)


def test_a_declared_200ms_latency_costs_five_ticks_once_and_never_starves_a_full_chunk() -> None:
    world = sim_world.SimWorld(stepper="direct", direct_steps=REALTIME.tick_physics_steps)
    policy = LatencyPolicy(ChunkOfHolds(), 200.0)
    try:
        task = default_registry().eval_task(EASY)
        result = run_realtime_episode(world, policy, task, task.seed(1),
                                      EpisodeSettings(max_steps=3, actions_per_step=50, execution=REALTIME))
    finally:
        world.close()
    stats = result["execution"]
    assert stats["ticks"] == 150 and stats["hold_ticks"] == 5 and stats["starved_ticks"] == 0
    assert stats["requests"] >= 4 and stats["late_chunks"] == 0
    assert list(policy.waited_s) == [0.2] * stats["requests"]  # one draw per request, charged in ticks


class SlowHold:
    """A test policy whose every call takes 130 ms on an injected clock: a chunk that holds the joints it sees."""

    def __init__(self, clock: FakeWall) -> None:
        self.clock = clock

    def reset(self) -> None:
        pass

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        self.clock.advance(0.13)
        return np.repeat(np.asarray(obs["joint_action"]["vector"], dtype=np.float32)[None], 20, axis=0)


class FakeWall:
    """A monotonic clock moved only by :meth:`advance` (thread-safe)."""

    def __init__(self) -> None:
        self._now = 100.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def test_a_measured_latency_costs_its_ticks_on_an_injected_wall_clock() -> None:
    wall = FakeWall()
    world = sim_world.SimWorld(stepper="direct", direct_steps=REALTIME.tick_physics_steps)
    try:
        task = default_registry().eval_task(EASY)
        result = run_realtime_episode(world, SlowHold(wall), task, task.seed(1),
                                      EpisodeSettings(max_steps=1, actions_per_step=20, execution=REALTIME),
                                      wall=wall)
    finally:
        world.close()
    stats = result["execution"]
    assert "policy_error" not in result, result.get("policy_error")
    assert stats["hold_ticks"] == 4  # ceil(0.13 / 0.04): ticks 0..3
    assert stats["latency_s"]["max"] == pytest.approx(0.16)  # charged as the 4 ticks it took
    assert stats["starved_ticks"] == 0


def test_the_oracle_at_latency_zero_completes_an_easy_task_in_realtime_mode() -> None:
    result = _trial("latency:0:oracle", EpisodeSettings(execution=REALTIME))
    assert result["completion_ok"] is True and "policy_error" not in result
    assert result["execution"]["hold_ticks"] == 0  # every answer is there on the tick it was asked on
    assert result["execution"]["motion"]["ticks"] == 500


def test_a_lockstep_trial_is_the_lockstep_loop() -> None:
    result = _trial("oracle", EpisodeSettings())
    assert "execution" not in result and result["completion_ok"] is True
    assert result["policy_steps"] <= EpisodeSettings().max_steps


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, "eval", *args], capture_output=True, text=True, timeout=120)


def test_run_json_records_the_mode_and_resume_refuses_another(tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["--policy", "hold", "--tasks", EASY, "--rounds", "1", "--max-steps", "1", "--actions-per-step", "5",
            "--no-render", "--backend", "inline", "--output", str(run)]
    done = _eval(*argv, "--execution", "realtime", "--merge", "ensemble", "--threshold", "3")
    assert done.returncode == EXIT_OK, done.stderr[-2000:]
    record = json.loads((run / "run.json").read_text())
    execution = record["execution"]
    assert execution["mode"] == "realtime" and execution["control_hz"] == 25 and execution["step_budget_ticks"] == 5
    assert execution["executor"]["merge"] == "ensemble" and execution["executor"]["threshold"] == 3
    assert record["stepper"] == "direct"
    (trial,) = json.loads((run / "results.json").read_text())
    assert trial["execution"]["ticks"] == 5
    for other, field in ((["--execution", "lockstep"], "execution"),
                         (["--execution", "realtime", "--merge", "latest", "--threshold", "3"], "execution")):
        refused = _eval(*argv, *other, "--resume")
        lines = error_lines(refused.stderr)
        assert refused.returncode == EXIT_BAD_INPUT and len(lines) == 1, refused.stderr
        assert f"holds another run ({field}" in lines[0] and "differ" in lines[0], lines[0]
    bad = _eval(*argv[:-1], str(tmp_path / "other"), "--merge", "ensemble")
    assert bad.returncode == EXIT_BAD_INPUT and "--merge: only with --execution realtime" in bad.stderr
    topp = _eval(*argv[:-1], str(tmp_path / "topp"), "--execution", "realtime", "--stepper", "topp")
    assert topp.returncode == EXIT_BAD_INPUT and "--stepper topp: --execution realtime" in topp.stderr


def test_a_run_json_without_execution_resumes_as_lockstep_only(tmp_path: Path) -> None:
    task = default_registry().eval_task(EASY)
    plan = {"selected_tasks": [(task.scene, task.task_id)], "expected_trials": 2, "stepper": "topp"}
    settings = RunSettings(policy="hold", max_steps=1, actions_per_step=5, render=False)
    writer = RunWriter(tmp_path / "run", arguments={}, settings=settings, **plan)
    writer.record_trial(score_trajectory(task, Puppet(task).hold(3).frames), task=task, round_index=1,
                        seed=task.seed(1))
    writer.close()  # as a killed run
    path = tmp_path / "run" / "run.json"
    record = json.loads(path.read_text())
    assert record.pop("execution") == {"mode": "lockstep"}
    path.write_text(json.dumps(record))  # as written before the field existed
    realtime = ExecutionSettings(mode="realtime").describe(1, 5)
    with pytest.raises(RunDirError, match="execution differ"):
        RunWriter.resume(tmp_path / "run", arguments={}, settings=RunSettings(
            policy="hold", max_steps=1, actions_per_step=5, render=False, execution=realtime), **plan)
    with RunWriter.resume(tmp_path / "run", arguments={}, settings=settings, **plan) as same:
        assert same.recorded(task.task_id, 1)
