"""Mirage baselines in real SAPIEN: the memorizer recalls the right training task and succeeds at L0,
but fails when an L1 layout moves the object; blind does the same thing whatever it is told."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from robofollow_ros.benchmark import TrainingTask
from robofollow_ros.evaluation.episode import EpisodeSettings, privileged_state, run_episode
from robofollow_ros.policy.baselines.mirage import (
    BlindPolicy,
    MemorizerPolicy,
    most_frequent_behaviour,
    text_similarity,
)
from robofollow_ros.policy.interface import PolicyError
from robofollow_ros.policy.spec import builtin_names, load_policy
from robofollow_ros.sim.world import SimWorld


@pytest.fixture(scope="module")
def memorizer() -> MemorizerPolicy:
    return MemorizerPolicy()


@pytest.fixture(scope="module")
def blind() -> BlindPolicy:
    return BlindPolicy()


@pytest.fixture(scope="module")
def world() -> SimWorld:
    return SimWorld(render=False)


def test_builtins_are_registered_by_name() -> None:
    assert {"oracle", "blind", "memorizer", "hold"} <= set(builtin_names())
    with pytest.raises(ValueError, match="chunk_size"):
        load_policy("memorizer", {"chunk_size": 0})


def test_memorizer_recalls_the_training_task_of_an_l0_instruction(registry, memorizer) -> None:  # type: ignore[no-untyped-def]
    for task in registry.eval_tasks(level="L0")[::7]:
        recalled, variant = memorizer.nearest(task.instruction)
        assert variant == task.instruction  # L0 uses the first training variant verbatim
        assert (recalled.action, recalled.source, recalled.arm) == (task.action, task.source, task.arm)
    assert text_similarity("pick up the red ball", "pick up the red ball") == 1.0
    assert text_similarity("pick up the red ball", "stack the blue cube") < 0.5


def test_memorizer_succeeds_at_l0_and_fails_when_the_layout_moves_the_object(registry, memorizer, world) -> None:  # type: ignore[no-untyped-def]
    l0 = registry.eval_task("L0_pickup_red_cylinder")
    result = run_episode(world, memorizer, l0, l0.seed(1), EpisodeSettings())
    assert result["completion_ok"] and result["intent_score"] == 1.0
    # Layout 2.1 swaps the red cylinder with the blue cube: same words, the remembered spot now holds the cube.
    l1 = registry.eval_task("L1_scene2_1_02_pickup_red_cylinder_red_cylinder")
    result = run_episode(world, memorizer, l1, l1.seed(1), EpisodeSettings())
    assert memorizer.remembered is not None and memorizer.remembered.source == l1.source == l0.source  # right words
    assert not result["completion_ok"] and result["intent_score"] == 0.0  # ... wrong place
    assert "large_blue_cube" in result["phases"][0]["intent_reason"], result["phases"][0]


def test_memorizer_never_needs_the_scene(registry, memorizer, world) -> None:  # type: ignore[no-untyped-def]
    """Without images or privileged poses it still plans: it only ever used words and its own joints."""
    task = registry.eval_task("L0_pickup_red_cylinder")
    world.reset(task, task.seed(1))
    memorizer.reset()
    memorizer.set_instruction(task.instruction)
    chunk = memorizer.predict({"joint_action": {"vector": world.joint_vector()}})
    assert chunk.shape[1] == 14 and chunk.shape[0] > 5
    with pytest.raises(PolicyError, match="instruction"):
        memorizer.set_instruction("  ")


def test_blind_ignores_the_instruction(registry, blind, world) -> None:  # type: ignore[no-untyped-def]
    task = registry.eval_task("L0_stack_left_cube_on_red_cylinder")
    world.reset(task, task.seed(1))
    obs: dict[str, Any] = world.observation()
    obs["privileged"] = privileged_state(task, world.scorer_frame())
    chunks = []
    for words in (task.instruction, "Use your right arm to push the blue cylinder towards the yellow bowl."):
        blind.reset()
        blind.set_instruction(words)
        chunks.append(blind.predict(obs))
    np.testing.assert_array_equal(chunks[0], chunks[1])
    assert blind.group == "scene2/default"
    # Its habit in Scene 2 is the most frequent training behaviour there: a pickup, so the stack fails.
    result = run_episode(world, blind, task, task.seed(1), EpisodeSettings())
    assert not result["completion_ok"]
    with pytest.raises(PolicyError, match="privileged"):
        blind.reset()
        blind.predict({"joint_action": {"vector": world.joint_vector()}})


def test_blind_finds_its_scene_group_from_object_names(registry, blind, world) -> None:  # type: ignore[no-untyped-def]
    task = registry.eval_task("L3_scene4_7_23_l3_s47_seq_r_right_ball_then_l_left_ball")  # layout 4.7 ~ 4.1's objects
    world.reset(task, task.seed(1))
    obs: dict[str, Any] = world.observation()
    obs["privileged"] = privileged_state(task, world.scorer_frame())
    blind.reset()
    blind.predict(obs)
    assert blind.group == "scene4/scene4_1"


def _training(task_id: str, action: str, source: str, arm: str = "left", target: str | None = None) -> TrainingTask:
    return TrainingTask(scene="scene1", task_id=task_id, layout="default", scene_group="scene1/default",
                        action=action, action_family=action, source=source, target=target, arm=arm,  # type: ignore[arg-type]
                        instructions=("x",))


def test_most_frequent_behaviour_counts_action_then_source_then_target() -> None:
    tasks = [_training("a", "pickup", "cube"), _training("b", "place_behind", "ball", target="t1"),
             _training("c", "place_behind", "cube", target="t1"), _training("d", "place_behind", "ball", target="t2"),
             _training("e", "place_behind", "ball", target="t2")]
    chosen = most_frequent_behaviour(tasks)
    assert (chosen.action, chosen.source, chosen.target) == ("place_behind", "ball", "t2")
