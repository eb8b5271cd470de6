"""The privileged expert: the ``oracle`` policy and the planner behind it (and, fed nominal poses,
behind ``memorizer`` and ``blind``). See docs/oracle.md.

Split by meaning: ``poses`` (the one interface object poses come through), ``meaning`` (what a task
asks, from an evaluation or a training record), ``motion`` (TCP targets → IK → action rows),
``skills`` (grasp, place, push, route, home), ``placement`` (where a Scene 1 relation holds),
``planner`` (a task → phases executed one per ``predict`` call, each planned from the poses observed
at that call) and ``oracle`` (``OraclePolicy``, the ``oracle`` SPEC, and ``PlannerPolicy``, the
plumbing the baselines share with it; imported from its module, not re-exported here).

May import the policy core (``policy.interface``), ``benchmark``, ``contract`` and the rig's
kinematics; never ``policy.spec``, ``wire``, ``baselines`` or anything above ``policy/``.
"""

from robofollow_ros.policy.expert.meaning import TaskMeaning, meaning_of_eval_task, meaning_of_training_task
from robofollow_ros.policy.expert.planner import ExpertPlanner
from robofollow_ros.policy.expert.poses import ObjectPoses, PoseSnapshot, poses_from_observation

__all__ = ["ExpertPlanner", "ObjectPoses", "PoseSnapshot", "TaskMeaning", "meaning_of_eval_task",
           "meaning_of_training_task", "poses_from_observation"]
