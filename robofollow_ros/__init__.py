"""robofollow_ros: run RoboFollow and OWDA on a dual-arm rig or in a SAPIEN simulation of it.

The package is a house of floors (README, "Layout of the code"): the ROS-free core — ``contract``,
``benchmark``, ``robot``, ``rundir``, ``scoring``, ``sim``, ``rig``, ``policy``, ``monitoring``,
``evaluation``, ``datasets``, ``perception``, ``learning``, ``decisions`` — never imports rclpy; ``nodes``
adapt it to ROS 2, and ``bringup`` and ``cli`` sit on top. Imports point downwards only
(``test/test_house.py``).
"""

__version__ = "0.1.0"
