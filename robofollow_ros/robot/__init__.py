"""The rig's description, the same on the rig, in the mock profile and in the simulator.

What every profile needs to know about the robot, with NumPy and YAML only (no SAPIEN, no rclpy):
the rig's figures (``rig_config``: home pose, TCP and camera links, gripper travel, limits), the URDF
(``rig_urdf`` writes it, ``urdf_model`` / ``urdf_limits`` read it), forward and inverse kinematics
(``kinematics``, seeded by ``ik_seed``), where the contract's 14-vector sits in a joint vector
(``joint_map``), rotations (``transforms``), the cameras' mounts, intrinsics and calibration files
(``cameras``, ``calibration``) and the geometry of the bowls that perception and scoring reason about
(``bowl``). The simulator (``sim/``) builds its world from these; the arm bridge, the stage monitor,
perception and the expert read them without ever loading the simulator.

Imports: the standard library, NumPy, YAML, ``contract`` and ``paths`` — nothing else of the package.
"""
