"""Bringup: one profile per rig (``config/profiles/``) lists the nodes, their parameters and remappings.

Both ways of starting the graph read it: the launch files wrap :func:`launch_profile`'s node list in
``launch_ros`` Node actions, and ``robofollow bringup`` (for machines without ``launch``) runs the
same list in one process (:func:`run_in_process`) or one process per node (:func:`run_as_processes`).
There is no second list of nodes anywhere, and the user's choices (trial selection, policy, ports,
driver map, remappings) are applied by one function (:func:`apply_choices`) for both.
"""

from robofollow_ros.bringup.options import (
    LAUNCH_ARGUMENTS,
    Choices,
    apply_choices,
    driver_config_path,
    foxglove_address,
    launch_profile,
    policy_of,
    privileged_of,
)
from robofollow_ros.bringup.profiles import (
    PROFILES,
    TRIAL_MANAGER,
    NodeSpec,
    Profile,
    ProfileError,
    check_parameters,
    load_profile,
    profile_path,
    ros_params_file,
    with_overrides,
    without_nodes,
)
from robofollow_ros.bringup.running import (
    BringupOutcome,
    NodeExit,
    NodeStartError,
    build_nodes,
    node_arguments,
    run_as_processes,
    run_in_process,
)

__all__ = [
    "LAUNCH_ARGUMENTS", "PROFILES", "TRIAL_MANAGER", "BringupOutcome", "Choices", "NodeExit", "NodeSpec",
    "NodeStartError", "Profile", "ProfileError", "apply_choices", "build_nodes", "check_parameters",
    "driver_config_path", "foxglove_address", "launch_profile", "load_profile", "node_arguments", "policy_of",
    "privileged_of", "profile_path",
    "ros_params_file", "run_as_processes", "run_in_process", "with_overrides", "without_nodes",
]
