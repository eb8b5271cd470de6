"""A warm renderer (issue 16) changes speed only: a trial after other trials shows the policy the very
pictures, and gets the very verdict, that the same trial gets as the first scene of a fresh process
on the old path (renderer rebuilt per scene)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.sim.renderer import renderer_kept_warm
from robofollow_ros.sim.world import SimWorld

pytestmark = pytest.mark.timeout(600)
TASK = "L1_s11_pick_left_of_green"
BEFORE = "L0_push_left_cube_to_red_cylinder"  # another scene runs first in the warm process
SETTINGS = EpisodeSettings(max_steps=3)
COMPARED = ("intent_score", "exec_score", "completion_ok", "frames", "policy_steps", "phases", "policy_error")


class Pictures:
    """Episode observer keeping every camera picture the policy is shown."""

    def __init__(self) -> None:
        self.images: list[np.ndarray] = []

    def on_start(self, task: Any, seed: int, world: Any) -> None:
        pass

    def on_frame(self, index: int, frame: dict[str, Any], live: dict[str, Any]) -> None:
        pass

    def on_observation(self, observation: dict[str, Any]) -> None:
        self.images += [observation["observation"][key]["rgb"].copy() for key in sorted(observation["observation"])]

    def on_end(self, result: dict[str, Any], live: dict[str, Any]) -> None:
        pass


FRESH_PROCESS = f"""
import json, sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_sim_render_warm import COMPARED, SETTINGS, TASK, Pictures
from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.episode import run_episode
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.sim.renderer import renderer_kept_warm
from robofollow_ros.sim.world import SimWorld
task = default_registry().eval_task(TASK)
pictures = Pictures()
result = run_episode(SimWorld(render=True, keep_renderer=False), load_policy("oracle"), task, task.seed(1), SETTINGS,
                     observer=pictures)
assert not renderer_kept_warm()
np.savez(sys.argv[1] + ".npz", *pictures.images)
json.dump({{k: result.get(k) for k in COMPARED}}, open(sys.argv[1] + ".json", "w"))
"""


def test_warm_renderer_gives_the_pictures_and_verdict_of_a_fresh_process(registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fresh"
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(out)], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-3000:]
    fresh_result = json.loads(out.with_suffix(".json").read_text())
    with np.load(out.with_suffix(".npz")) as saved:
        fresh_images = [saved[f"arr_{i}"] for i in range(len(saved.files))]

    world, policy = SimWorld(render=True), load_policy("oracle")
    before = registry.eval_task(BEFORE)
    run_episode(world, policy, before, before.seed(1), SETTINGS)
    assert renderer_kept_warm()
    task = registry.eval_task(TASK)
    pictures = Pictures()
    result = run_episode(world, policy, task, task.seed(1), SETTINGS, observer=pictures)

    assert {k: result.get(k) for k in COMPARED} == fresh_result
    assert len(pictures.images) == len(fresh_images) >= 3 * SETTINGS.max_steps  # three cameras per observation
    for index, (warm, fresh) in enumerate(zip(pictures.images, fresh_images, strict=True)):
        assert warm.shape == fresh.shape == (240, 320, 3)
        assert np.array_equal(warm, fresh), f"picture {index}: {int((warm != fresh).any(axis=2).sum())} pixels differ"
