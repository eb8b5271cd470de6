"""robofollow_ros: run RoboFollow and OWDA on a dual-arm rig or in a SAPIEN simulation of it.

The package is layered: the ROS-free core (``benchmark``, ``scoring``, ``sim``, ``policy``,
``perception``, ``decisions``, ``evaluation``, ``rundir``) never imports rclpy; ``nodes`` adapt it to ROS 2.
"""

__version__ = "0.1.0"
