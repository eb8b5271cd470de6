"""With ``request_images``, the pictures a policy gets over ROS are the headless evaluator's pictures:
sim_node renders the very state the policy is about to act on (``/robofollow/sim/render``), so an
image-based model sees the same observation in both modes, not a camera frame a few rows old."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from profile_graph import start_profile_graph
from robofollow_ros.benchmark import default_registry
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
PICTURES: list[dict[str, np.ndarray | None]] = []


class PictureRecorder:
    """Keeps every observation's pictures; moves the left arm a little so the pictures change."""

    def reset(self) -> None:
        PICTURES.clear()

    def set_instruction(self, text: str) -> None:
        pass

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        PICTURES.append({k: None if v["rgb"] is None else np.array(v["rgb"]) for k, v in obs["observation"].items()})
        vector = np.asarray(obs["joint_action"]["vector"], dtype=np.float32)
        return np.stack([vector + np.float32(0.05) * (k + 1) * (np.arange(14) == 0) for k in range(2)])


def picture_recorder() -> PictureRecorder:
    return PictureRecorder()


def test_policy_pictures_over_ros_equal_the_headless_ones(tmp_path):
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.sim.world import SimWorld

    task = default_registry().eval_task(TASK)
    world = SimWorld(render=True)
    run_episode(world, PictureRecorder(), task, task.seed(1), EpisodeSettings(max_steps=3, actions_per_step=2))
    world.close()
    headless = list(PICTURES)

    with RosHarness() as ros:
        manager = start_profile_graph(ros, "sim", {
            "sim_node": {"camera_hz": 0.0},
            "policy_node": {"policy": "test_node_images:picture_recorder", "request_images": True},
            "trial_manager_node": {"trials": f"tasks={TASK}", "max_steps": 3, "actions_per_step": 2,
                                   "output": str(tmp_path / "run")}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=180, what="the rendered trial")
    over_ros = list(PICTURES)

    assert len(headless) == len(over_ros) == 3
    for step, (expected, got) in enumerate(zip(headless, over_ros, strict=True)):
        for key in ("head_camera", "left_camera", "right_camera"):
            assert got[key] is not None and got[key].shape == (240, 320, 3), (step, key)
            assert np.array_equal(got[key], expected[key]), f"call {step}: {key} differs from headless"
    assert not np.array_equal(over_ros[0]["left_camera"], over_ros[2]["left_camera"])  # the arm moved
    assert json.loads((tmp_path / "run" / "results.json").read_text())[0]["policy_steps"] == 3
    # the sim node built its renderer before the trial and said how long; run.json has it, as eval's does
    startup = json.loads((tmp_path / "run" / "run.json").read_text())["renderer_startup_s"]
    assert isinstance(startup, float) and startup > 0
