"""What a task asks the robot to do, reduced to the fields a motion plan needs.

Built from an evaluation record (the oracle: the record's resolved action/source/target/arm and its
*scored* route and yaw) or from a training record (the memorizer and blind baselines, which only
know training behaviour).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robofollow_ros.benchmark import EvalTask, TrainingTask

#: Scene 3 bar pairs: a pair shares one column in the default layout (spec section a).
BAR_PAIRS = {"red_bar_2": "green_bar_3", "green_bar_3": "red_bar_2",
             "yellow_bar_4": "blue_bar_5", "blue_bar_5": "yellow_bar_4"}
#: Scene 3 target yaw per place mode (spec section d): the bar's long axis is along y at yaw 0.
PLACE_MODE_YAW = {"short_front": 0.0, "long_right": 0.0, "long_front": math.pi / 2, "short_right": math.pi / 2}


@dataclass(frozen=True)
class TaskMeaning:
    scene: str
    action: str
    source: str
    arm: str
    target: str | None = None
    #: Scene 3: the bar to carry the source over, the bar to stay away from, the final yaw.
    route_over: str | None = None
    route_avoid: str | None = None
    target_yaw: float | None = None
    #: Scene 4.
    place_slot: int | None = None
    second_source: str | None = None
    second_arm: str | None = None


def yaw_value(value: float | None) -> float | None:
    """A target yaw in radians (the registry already turned the data's "pi/2" into a number)."""
    return None if value is None else float(value)


def meaning_of_eval_task(task: EvalTask) -> TaskMeaning:
    return TaskMeaning(scene=task.scene, action=task.action, source=task.source, arm=task.arm, target=task.target,
                       route_over=task.scored_pass_over_object, route_avoid=task.scored_avoid_object,
                       target_yaw=yaw_value(task.target_yaw_rad), place_slot=task.place_slot,
                       second_source=task.second_source, second_arm=task.second_arm)


def meaning_of_training_task(task: TrainingTask) -> TaskMeaning:
    over = avoid = None
    if task.via is not None:
        over = task.via if task.route_mode == "via" else BAR_PAIRS.get(task.via)
        avoid = BAR_PAIRS.get(over) if over is not None else None
    yaw = PLACE_MODE_YAW.get(task.place_mode) if task.place_mode is not None else None
    return TaskMeaning(scene=task.scene, action=task.action, source=task.source, arm=task.arm, target=task.target,
                       route_over=over, route_avoid=avoid, target_yaw=yaw, place_slot=task.place_slot,
                       second_source=task.second_source, second_arm=task.second_arm)
