"""The physical rig's side of the bridge (ROS-free): command safety, driver mappings, the mock table.

``safety`` filters every arm command (URDF limits, step clamp, workspace, e-stop, watchdog);
``driver_config`` maps the contract's joint vector onto each arm's driver topics; ``layout_poses``,
``layout_picture`` and ``mock_view`` give the operator and the mock profile the trial's table without
a simulator.

Imports: ``robot/``, ``scoring/`` (the operation area), ``benchmark/``, ``contract`` — never ``sim/``.
"""
