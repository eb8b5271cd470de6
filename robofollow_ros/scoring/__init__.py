"""RoboFollow's stage-wise scoring, ROS-free: per-scene rules, the online StageMonitor, summaries.

``StageMonitor(task).update(frame)`` per recorded frame; ``result()`` gives the results.json entry,
``live()`` the live-score JSON. ``score_trajectory`` feeds a monitor (one scorer, not two).
"""

from robofollow_ros.scoring.frame import Frame, TrajectoryError, frame_from_dict
from robofollow_ros.scoring.monitor import StageMonitor, frames_from_json, score_trajectory, score_view

__all__ = ["Frame", "StageMonitor", "TrajectoryError", "frame_from_dict", "frames_from_json", "score_trajectory",
           "score_view"]
