"""Headless and ROS verdicts are equal: same tasks, seeds and policy through ``run_episode`` and through
the graph (sim_node, policy_node in lock-step, stage_monitor_node, trial_manager_node over DDS).

The policy is a deterministic scripted grasp that reads the privileged observation (the task id and
the object poses), so the test also proves the ROS observation carries exactly what the headless
one does: a different object pose or joint vector would move the arm elsewhere and change scores.
It is not a built-in, so both runs hand it the privileged state only because they are asked to
(``privileged``, as ``--privileged``), and the ROS run records that in run.json.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from profile_graph import start_profile_graph
from robofollow_ros.benchmark import default_registry
from robofollow_ros.contract import GRIPPER_INDEX
from ros_harness import RosHarness

TASKS = ("L0_pickup_yellow_block_1_left", "L0_pickup_red_cylinder", "L0_s41_l_pick_yellow_cylinder")
MAX_STEPS, ROWS_PER_STEP = 4, 8
VERDICT_FIELDS = ("intent_ok", "exec_ok", "completion_ok", "intent_score", "exec_score", "frames", "policy_steps")


class ScriptedGrasp:
    """Above the task's source object → down → close → lift, each phase one chunk of interpolated rows."""

    def __init__(self, rows: int = ROWS_PER_STEP) -> None:
        from robofollow_ros.robot.kinematics import RigKinematics

        self.rows = rows
        self.kinematics = RigKinematics()
        self.registry = default_registry()
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def set_instruction(self, text: str) -> None:
        self.instruction = text

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ, top_down_grasp_tcp_z

        task = self.registry.eval_task(obs["privileged"]["task_id"])
        arm = task.arm if task.arm in ("left", "right") else "left"
        spec = self.registry.layout_of(task).object(task.source)
        x, y, z = obs["privileged"]["objects"][task.source]
        current = np.asarray(obs["joint_action"]["vector"], dtype=np.float64)
        grasp_z = top_down_grasp_tcp_z(z + spec.half_height)
        phase = self.calls
        self.calls += 1
        target = current.copy()
        if phase in (0, 1, 3):
            height = {0: grasp_z + 0.08, 1: grasp_z, 3: grasp_z + 0.10}[phase]
            arm_slice = slice(0, 6) if arm == "left" else slice(7, 13)
            ik = self.kinematics.ik(arm, np.array([x, y, height]), np.asarray(TOP_DOWN_QUAT_WXYZ),
                                    seed=current[arm_slice])
            target = self.kinematics.arm_vector(current, arm, ik.joints)
        if phase >= 2:
            target[GRIPPER_INDEX[arm]] = 0.0
        steps = np.linspace(0.0, 1.0, self.rows + 1)[1:, None]
        return (current + steps * (target - current)).astype(np.float32)


def scripted_grasp(**kwargs: Any) -> ScriptedGrasp:
    return ScriptedGrasp(**kwargs)


def _headless(policy: str, tasks: tuple[str, ...], max_steps: int, per_step: int,
              privileged: bool = False) -> dict[str, dict[str, Any]]:
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.policy.spec import load_policy
    from robofollow_ros.sim.world import SimWorld

    registry = default_registry()
    world = SimWorld(render=False)
    out = {}
    for task_id in tasks:
        task = registry.eval_task(task_id)
        out[task_id] = run_episode(world, load_policy(policy, privileged=privileged), task, task.seed(1),
                                   EpisodeSettings(max_steps, per_step))
    world.close()
    return out


def _run_graph(tmp_path, policy: str, tasks: tuple[str, ...] = TASKS, max_steps: int = MAX_STEPS,  # type: ignore[no-untyped-def]
               per_step: int = ROWS_PER_STEP, privileged: bool = False) -> list[dict[str, Any]]:
    with RosHarness() as ros:
        # The sim profile's graph: the commands go through the arm bridge and the drivers' topics.
        manager = start_profile_graph(ros, "sim", {
            "sim_node": {"render": False},
            "policy_node": {"policy": policy, "request_images": False, **({"privileged": True} if privileged else {})},
            "trial_manager_node": {"trials": f"tasks={','.join(tasks)} rounds=1", "max_steps": max_steps,
                                   "actions_per_step": per_step, "output": str(tmp_path / "run"),
                                   "policy_label": policy}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=240, what="all trials over ROS")
    return json.loads((tmp_path / "run" / "results.json").read_text())


def _assert_same_verdicts(ros_results: list[dict[str, Any]], headless: dict[str, dict[str, Any]]) -> None:
    assert [r["task"] for r in ros_results] == list(headless)
    for ros_result in ros_results:
        expected = headless[ros_result["task"]]
        assert {f: ros_result[f] for f in VERDICT_FIELDS} == {f: expected[f] for f in VERDICT_FIELDS}
        assert [(p["phase"], p["intent_score"], p["exec_score"]) for p in ros_result["phases"]] == \
            [(p["phase"], p["intent_score"], p["exec_score"]) for p in expected["phases"]]


def test_ros_verdicts_equal_headless_for_a_scripted_grasp(tmp_path):
    policy = "test_node_verdicts:scripted_grasp"
    ros_results = _run_graph(tmp_path, policy, privileged=True)
    _assert_same_verdicts(ros_results, _headless(policy, TASKS, MAX_STEPS, ROWS_PER_STEP, privileged=True))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["arguments"]["privileged"] is True
    assert all(r["frames"] == MAX_STEPS * ROWS_PER_STEP + 1 for r in ros_results)  # frame 0 + one per row
    # the script really does something the scorer sees: at least one stage is credited
    assert any(r["intent_score"] > 0 for r in ros_results)


ORACLE_TASKS = ("L0_pickup_yellow_block_1_left", "L0_pickup_red_cylinder", "L0_r_pick2_via4_to6_short_front",
                "L0_s41_l_pick_yellow_cylinder")


def test_ros_verdicts_equal_headless_for_the_oracle_one_task_per_scene(tmp_path):
    ros_results = _run_graph(tmp_path, "oracle", ORACLE_TASKS, max_steps=10, per_step=50)
    _assert_same_verdicts(ros_results, _headless("oracle", ORACLE_TASKS, 10, 50))
    assert [r["completion_ok"] for r in ros_results] == [True] * len(ORACLE_TASKS)


def test_run_files_of_the_ros_run_are_complete(tmp_path):
    results = _run_graph(tmp_path, "hold")
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert run["status"] == "complete" and run["expected_trials"] == len(TASKS) == len(results)
    assert run["model"] == "hold" and run["arguments"]["via"] == "ros"
    assert run["arguments"]["privileged"] is False  # the default: nothing privileged was handed out
    assert summary["status"] == "complete"
    assert all(r["policy_steps"] == MAX_STEPS and r["frames"] == MAX_STEPS * 5 + 1 for r in results)  # hold: 5 rows
