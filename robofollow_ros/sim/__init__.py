"""The SAPIEN simulation of the rig: the world, its scenes and objects, rendering, the simulated drives.

Only what needs the simulator lives here (plus the controller emulation its drives follow, ``control``,
and the render settings, ``camera_settings``). The rig's description — config, URDF, kinematics,
cameras, bowl geometry — is ``robot/``, which the rig side reads without ever importing this folder;
``test/test_house.py`` names the modules that may import it.

Imports: ``robot/``, ``benchmark/``, ``contract``, ``paths`` and SAPIEN.
"""
