"""Scene entropy H(T|S): RoboFollow's 3.782 bits against LIBERO's 0.880."""

from __future__ import annotations

import math

import pytest

from robofollow_ros.benchmark.entropy import LIBERO_SCENE_GROUPS, scene_entropy


def test_robofollow_scene_entropy(registry):
    assert round(registry.scene_entropy_bits(), 3) == 3.782


def test_libero_scene_entropy_with_the_same_function():
    assert sum(LIBERO_SCENE_GROUPS.values()) == 40
    assert round(scene_entropy(LIBERO_SCENE_GROUPS), 3) == 0.880


def test_one_task_per_scene_has_zero_entropy_and_one_scene_has_log2_n():
    assert scene_entropy([1] * 10) == 0.0
    assert scene_entropy([8]) == pytest.approx(math.log2(8))


def test_empty_or_nonpositive_groups_are_rejected():
    with pytest.raises(ValueError, match="group_sizes"):
        scene_entropy([])
    with pytest.raises(ValueError, match="group_sizes"):
        scene_entropy([3, 0])
