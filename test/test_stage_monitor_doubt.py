"""Issue 37: the stage monitor holds its verdict on a frame whose pose perception doubts, and says which.

A scripted place (``scoring.synthetic.Puppet``) whose last frames put the block 16 cm off, marked
*doubtful* (perception published that pose below ``MIN_POSE_CONFIDENCE``): those frames must not decide the
verdict (it equals the verdict of the trial without them, a completed place; scored, they would fail it),
and the result lists them under ``doubt_held``. The ROS
side marks a frame doubtful from the confidences ``PoseGate`` ignored; replay re-reads the mark from the
recorded frame, so a held frame replays as held.
"""

from __future__ import annotations

from dataclasses import replace

from robofollow_ros.perception.confidence import PoseGate
from robofollow_ros.scoring import StageMonitor, frame_from_dict, score_trajectory
from robofollow_ros.scoring.synthetic import Puppet

TASK = "L0_place_yellow_block_1_behind_red_cylinder"
BLOCK = "yellow_block_1"


def _glitch(frame, dy: float):  # type: ignore[no-untyped-def]
    """The frame with the block's published pose ``dy`` off (what a doubted pose may say)."""
    objects = dict(frame.objects)
    x, y, z = objects[BLOCK]
    objects[BLOCK] = (x, y + dy, z)
    return replace(frame, objects=objects)


def test_doubtful_frames_are_held_not_scored(registry):  # type: ignore[no-untyped-def]
    puppet = Puppet(registry.eval_task(TASK))
    cx, cy, _ = puppet.objects["red_cylinder"]
    rest_z = puppet.objects[BLOCK][2]
    frames = puppet.pick("right", BLOCK).place("right", (cx, cy + 0.08, rest_z)).home("right").frames
    held_at = list(range(len(frames) - 3, len(frames)))
    # The last frames' pose of the placed block is 16 cm off (in front of the cylinder, not behind it).
    wrong = [_glitch(f, -0.16) if i in held_at else f for i, f in enumerate(frames)]
    assert score_trajectory(TASK, frames, registry)["completion_ok"]
    assert not score_trajectory(TASK, wrong, registry)["completion_ok"]  # deciding on it fails the trial

    monitor = StageMonitor(TASK, registry)
    fed = [monitor.update(replace(f, doubtful=frozenset({BLOCK})) if i in held_at else f)
           for i, f in enumerate(wrong)]
    held = monitor.result()

    assert [i for i, scored in enumerate(fed) if not scored] == held_at == list(monitor.held_frames)
    assert held.pop("doubt_held") == {"frames": held_at, "objects": {BLOCK: len(held_at)}}
    assert held == score_trajectory(TASK, frames[:held_at[0]], registry)  # the confident frames' verdict
    assert held["completion_ok"]
    assert "doubt_held" in monitor.live()
    assert "doubt_held" not in score_trajectory(TASK, frames, registry)  # nothing held: RoboFollow's entry


def test_a_doubtful_mark_survives_the_trajectory_form_and_comes_from_the_gate(registry):  # type: ignore[no-untyped-def]
    frame = replace(Puppet(registry.eval_task(TASK)).frames[0], doubtful=frozenset({BLOCK}))
    raw = frame.to_dict()
    assert raw["doubtful"] == [BLOCK] and frame_from_dict(raw, 0).doubtful == {BLOCK}

    gate = PoseGate()
    pose = ([0.1, 0.0, 0.76], [1.0, 0.0, 0.0, 0.0])
    gate.update({BLOCK: pose, "red_cylinder": pose}, {BLOCK: 0.3, "red_cylinder": 0.9})
    assert gate.doubtful == {BLOCK}
    gate.update({BLOCK: pose}, {BLOCK: 0.95})
    assert gate.doubtful == frozenset()
