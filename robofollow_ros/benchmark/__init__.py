"""The RoboFollow benchmark as data: scenes, layouts, training and evaluation tasks, seeds.

ROS-free. ``default_registry()`` is the entry point; records are immutable dataclasses.
"""

from robofollow_ros.benchmark.errors import RegistryError, UnknownTaskError
from robofollow_ros.benchmark.records import (
    LEVELS,
    SCENES,
    EvalTask,
    Layout,
    ObjectSpec,
    PerturbRule,
    TrainingTask,
)
from robofollow_ros.benchmark.registry import Registry, default_registry
from robofollow_ros.benchmark.seeds import trial_seed, trial_seeds

__all__ = [
    "LEVELS",
    "SCENES",
    "EvalTask",
    "Layout",
    "ObjectSpec",
    "PerturbRule",
    "Registry",
    "RegistryError",
    "TrainingTask",
    "UnknownTaskError",
    "default_registry",
    "trial_seed",
    "trial_seeds",
]
