"""The oracle completes one representative task of every scene and action in real SAPIEN (no rendering), on the
built-in rig and on the ALOHA twin (gym-aloha's own model), retries a grasp that missed, and refuses observations
without the privileged extension."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sapien

from robofollow_ros.evaluation.episode import EpisodeSettings, privileged_state, run_episode
from robofollow_ros.policy.expert.oracle import OraclePolicy
from robofollow_ros.policy.interface import PolicyError
from robofollow_ros.sim.world import SimWorld

REPRESENTATIVE = [
    "L0_pickup_yellow_block_1_left",  # S1 pickup
    "L3_s13_i08_place_left_of_red_sphere_left__src_behind_red_cylinder",  # S1 relation, swapped layout
    "L1_scene2_1_05_push_red_cylinder_to_left_cube_red_cylinder_to_leftmost_cube",  # S2 push, swapped
    "L0_stack_left_cube_on_red_cylinder",  # S2 stack
    "L3_scene2_5_01_place_right_cube_in_green_bowl_rightmost_cube_to_green_bowl",  # S2 bowl, bowls swapped
    "L0_r_pick2_via4_to6_short_front",  # S3 via, yaw 0
    "L2_l_pick4_around3_to1_short_right__rw_route0_ori0",  # S3 around, yaw pi/2
    "L0_s41_l_pick_cube_in_bowl",  # S4 pickup from the bowl
    "L0_s43_r_unstack_blue_cube_from_yellow_to_slot5",  # S4 unstack to a slot
    "L1_scene4_4_01_l1_s44_if_bowl_nonempty_then_l_pick_blue_else_r_stack",  # S4 conditional -> stack
    "L3_scene4_7_23_l3_s47_seq_r_right_ball_then_l_left_ball",  # S4 sequence, both arms
]


@pytest.fixture(scope="module")
def oracle() -> OraclePolicy:
    return OraclePolicy()


@pytest.fixture(scope="module")
def world() -> SimWorld:
    return SimWorld(render=False)


@pytest.mark.parametrize("task_id", REPRESENTATIVE)
def test_the_oracle_completes_them_on_the_aloha_twin(registry, monkeypatch, task_id: str) -> None:  # type: ignore[no-untyped-def]
    """The same code on the ALOHA's kinematics, limits, finger slides and meshes' collision shapes."""
    monkeypatch.setenv("ROBOFOLLOW_RIG", "aloha")
    task = registry.eval_task(task_id)
    result = run_episode(_aloha_world(), OraclePolicy(), task, task.seed(1), EpisodeSettings())
    reasons = [(p["phase"], p["intent_reason"], p["exec_reason"]) for p in result["phases"]]
    assert result["completion_ok"], reasons


_ALOHA: list[SimWorld] = []


def _aloha_world() -> SimWorld:
    if not _ALOHA:
        from robofollow_ros.robot.rig_config import load_rig_config

        _ALOHA.append(SimWorld(render=False, rig=load_rig_config("aloha")))
    assert _ALOHA[0].rig.name == "aloha"
    return _ALOHA[0]


@pytest.mark.parametrize("task_id", REPRESENTATIVE)
def test_oracle_completes_representative_tasks(registry, oracle, world, task_id: str) -> None:  # type: ignore[no-untyped-def]
    task = registry.eval_task(task_id)
    result = run_episode(world, oracle, task, task.seed(1), EpisodeSettings())
    reasons = [(p["phase"], p["intent_reason"], p["exec_reason"]) for p in result["phases"]]
    assert result.get("policy_error") is None, result.get("policy_error")
    assert result["completion_ok"], reasons
    assert result["intent_score"] == pytest.approx(1.0) and result["exec_score"] == pytest.approx(1.0), reasons
    assert result["frames"] <= 1 + 10 * 50


def test_oracle_retries_a_grasp_that_missed(registry, oracle, world) -> None:  # type: ignore[no-untyped-def]
    """Move the cube away while the gripper descends: the first grasp closes on air, the next call re-plans."""
    task = registry.eval_task("L0_pickup_yellow_block_1_left")
    world.reset(task, task.seed(1))
    oracle.reset()
    oracle.set_instruction(task.instruction)
    start = world.object_pose(task.source)[0]

    def observe() -> dict:
        obs = world.observation()
        obs["privileged"] = privileged_state(task, world.scorer_frame())
        return obs

    first = oracle.predict(observe())
    closing = int(np.argmax(first[:, 6] < 0.5))  # the row that closes the left gripper
    for row in first[:closing]:
        world.execute(row)
    moved = start + np.array([0.05, -0.02, 0.0])
    world.objects[task.source].set_pose(sapien.Pose(moved.tolist(), [1.0, 0.0, 0.0, 0.0]))
    for row in first[closing:]:
        world.execute(row)
    assert world.object_pose(task.source)[0][2] < start[2] + 0.01  # the first grasp missed
    for _ in range(3):
        for row in oracle.predict(observe()):
            world.execute(row)
    end = world.object_pose(task.source)[0]
    assert end[2] > start[2] + 0.05, end  # picked up at its new place and carried home
    assert abs(end[0] - moved[0]) > 0.05 or abs(end[1] - moved[1]) > 0.05


def test_oracle_needs_the_privileged_extension(oracle) -> None:  # type: ignore[no-untyped-def]
    obs: dict[str, Any] = {"joint_action": {"vector": np.zeros(14)}}
    oracle.reset()
    with pytest.raises(PolicyError, match=r"privileged\.task_id"):
        oracle.predict(obs)
    obs["privileged"] = {"task_id": "no_such_task", "objects": {}}
    with pytest.raises(PolicyError, match="'no_such_task' is not an evaluation task"):
        oracle.predict(obs)
    obs["privileged"] = {"task_id": "L0_pickup_yellow_block_1_left", "objects": {"yellow_block_1": [0, "x", 1]}}
    with pytest.raises(PolicyError, match=r"privileged.objects\['yellow_block_1'\]"):
        oracle.predict(obs)


def test_oracle_resends_rows_the_evaluator_did_not_execute(registry, oracle, world) -> None:  # type: ignore[no-untyped-def]
    """With --actions-per-step 7 only a prefix of each 50-row chunk runs; the oracle notices and continues."""
    task = registry.eval_task("L1_s12_place_right_of_red_behind_red_cylinder")
    result = run_episode(world, oracle, task, task.seed(1), EpisodeSettings(max_steps=40, actions_per_step=7))
    assert result["completion_ok"] and result["intent_score"] == 1.0 and result["exec_score"] == 1.0


@pytest.mark.parametrize(("kwargs", "message"), [('{"chunk_size": 0}', "chunk_size: expected an integer >= 1, got 0"),
                                                 ('{"bogus": 1}', "bad kwargs ['bogus']")])
def test_eval_cli_rejects_bad_oracle_kwargs_with_exit_2(tmp_path, kwargs: str, message: str) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "eval", "--policy", "oracle", "--kwargs", kwargs,
                           "--tasks", "L0_pickup_red_cylinder", "--rounds", "1", "--no-render",
                           "--output", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
