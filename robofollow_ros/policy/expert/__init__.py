"""The privileged expert behind ``oracle`` (and, fed nominal poses, ``memorizer`` and ``blind``).

Split by meaning: ``poses`` (the one interface object poses come through), ``meaning`` (what a task
asks, from an evaluation or a training record), ``motion`` (TCP targets → IK → action rows),
``skills`` (grasp, place, push, route, home) and ``planner`` (a task → phases executed one per
``predict`` call, each planned from the poses observed at that call).
"""

from robofollow_ros.policy.expert.meaning import TaskMeaning, meaning_of_eval_task, meaning_of_training_task
from robofollow_ros.policy.expert.planner import ExpertPlanner
from robofollow_ros.policy.expert.poses import ObjectPoses, PoseSnapshot, poses_from_observation

__all__ = ["ExpertPlanner", "ObjectPoses", "PoseSnapshot", "TaskMeaning", "meaning_of_eval_task",
           "meaning_of_training_task", "poses_from_observation"]
