"""The node executables of the package: one list for setup.py, the profiles and the launch files.

Plain data with no imports, so ``setup.py`` can read it without importing rclpy or the package.
Each entry: executable name (also the node name) -> ``module:function`` of its ``main``.
"""

NODE_ENTRY_POINTS: dict[str, str] = {
    "arm_bridge_node": "robofollow_ros.nodes.arm_bridge_node:main",
    "foxglove_node": "robofollow_ros.nodes.foxglove_node:main",
    "mock_hardware_node": "robofollow_ros.nodes.mock_hardware_node:main",
    "perception_node": "robofollow_ros.nodes.perception_node:main",
    "policy_node": "robofollow_ros.nodes.policy_node:main",
    "robot_state_node": "robofollow_ros.nodes.robot_state_node:main",
    "sim_node": "robofollow_ros.nodes.sim_node:main",
    "stage_monitor_node": "robofollow_ros.nodes.stage_monitor_node:main",
    "trial_manager_node": "robofollow_ros.nodes.trial_manager_node:main",
}
